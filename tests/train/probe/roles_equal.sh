#!/usr/bin/env bash
# GNNLab's factored roles train exactly what the symmetric layout trains: two epochs on Cora
# partitioned in 2 parts, symmetric on 2 ranks vs 1 and 2 sampler-only ranks beside 2 trainers.
# Every trained batch (blocks, features, labels) and the final model must be bit-identical.
# With a fifth argument `fail`: a sampler-only rank (rank 2 of 3) throws at batch 1 of epoch 1,
# and the whole job must end within 20 s with that rank's message printed once.
# Usage: roles_equal.sh DSP MPIEXEC DATA_DIR PROBE [fail]
set -euo pipefail
dsp="$1" mpiexec="$2" data="$3" probe="$4" mode="${5:-equal}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$dsp" convert --from ogb "$data/cora" "$tmp/cora" >/dev/null
"$dsp" partition "$tmp/cora" "$tmp/p2" --parts 2 --seed 1 >/dev/null 2>&1
if [[ "$mode" == fail ]]; then
  "$(dirname "$0")/../../pipeline/probe/expect_failure.sh" 20 \
    "dsp: error on rank 2 in the sampler .*injected failure in the sampler-only rank 2 at batch 1" 1 \
    "$mpiexec" --oversubscribe -n 3 "$probe" "$tmp/p2" 1 fail 2 1
  exit
fi
run() {  # ranks samplers out
  "$mpiexec" --oversubscribe -n "$1" "$probe" "$tmp/p2" "$2" >"$3.raw"
  grep '^batch ' "$3.raw" | sort >"$3.batches"
  grep '^params ' "$3.raw" >"$3.params"
}
run 2 0 "$tmp/sym"
n="$(wc -l <"$tmp/sym.batches")"
[[ "$n" -gt 10 ]] || { echo "FAIL: the symmetric run trained only $n batches"; exit 1; }
for s in 1 2; do
  run $((2 + s)) "$s" "$tmp/roles$s"
  diff "$tmp/sym.batches" "$tmp/roles$s.batches" >/dev/null ||
    { echo "FAIL: $s sampler(s): trained batches differ from the symmetric run"; diff "$tmp/sym.batches" "$tmp/roles$s.batches" | head; exit 1; }
  diff "$tmp/sym.params" "$tmp/roles$s.params" ||
    { echo "FAIL: $s sampler(s): the model differs from the symmetric run's"; exit 1; }
done
echo "PASS: $n batches and the model $(cat "$tmp/sym.params") identical with 0, 1 and 2 sampler ranks"
