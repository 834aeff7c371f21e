#!/usr/bin/env bash
# GNNLab's factored roles train exactly what the symmetric layout trains: two epochs on Cora.
# Every trained batch (blocks, features, labels; keyed by the symmetric rank whose batch it is) and
# the final model must be bit-identical.
#   equal (default): partitioned in 2 parts, symmetric on 2 ranks vs 1 and 2 sampler-only ranks
#     beside 2 trainers.
#   switch: dynamic switching (pipeline/roles.hpp), one batch slot per rank: 3 ranks (1 sampler,
#     2 trainers) never, always and on switching, and 4 ranks (2 samplers) always, against the
#     symmetric job on 3 and 4 parts with its gradients reduced in slot order; and 2 ranks (1
#     sampler) always switching against the plain symmetric 2-rank job. The sampler ranks must
#     have trained batches when always switching, none when never.
#   fail: a sampler-only rank (rank 2 of 3) throws at batch 1 of epoch 1; failswitch: rank 2 of 3,
#     a sampler always switching, throws while it trains batch 1 of epoch 1. The whole job must end
#     within 20 s with that rank's message printed once.
# Usage: roles_equal.sh DSP MPIEXEC DATA_DIR PROBE [equal|switch|fail|failswitch]
set -euo pipefail
dsp="$1" mpiexec="$2" data="$3" probe="$4" mode="${5:-equal}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$dsp" convert --from ogb "$data/cora" "$tmp/cora" >/dev/null
part() { "$dsp" partition "$tmp/cora" "$tmp/p$1" --parts "$1" --seed 1 >/dev/null 2>&1; }
expect_failure="$(dirname "$0")/../../pipeline/probe/expect_failure.sh"
case "$mode" in
  fail)
    part 2
    exec "$expect_failure" 20 \
      "dsp: error on rank 2 in the sampler .*injected failure in the sampler-only rank 2 at batch 1" 1 \
      "$mpiexec" --oversubscribe -n 3 "$probe" "$tmp/p2" 1 off fail 2 1 ;;
  failswitch)
    part 3
    exec "$expect_failure" 20 \
      "dsp: error on rank 2 in the trainer .*injected failure in rank 2 training slot 2 at batch 1" 1 \
      "$mpiexec" --oversubscribe -n 3 "$probe" "$tmp/p3" 1 always failtrain 2 1 ;;
esac
run() {  # ranks partition samplers switch out
  "$mpiexec" --oversubscribe -n "$1" "$probe" "$tmp/p$2" "$3" "$4" >"$5.raw" 2>"$5.err" ||
    { cat "$5.err"; exit 1; }
  grep '^batch ' "$5.raw" | sort >"$5.batches"
  grep '^params ' "$5.raw" >"$5.params"
}
same() {  # reference candidate what
  diff "$1.batches" "$2.batches" >/dev/null ||
    { echo "FAIL: $3: trained batches differ from the symmetric run"; diff "$1.batches" "$2.batches" | head; exit 1; }
  diff "$1.params" "$2.params" || { echo "FAIL: $3: the model differs from the symmetric run's"; exit 1; }
}
switched() { grep -h '^rank .* switched' "$1.err" | awk '{s += $4} END {print s + 0}'; }
part 2
run 2 2 0 off "$tmp/sym"
n="$(wc -l <"$tmp/sym.batches")"
[[ "$n" -gt 10 ]] || { echo "FAIL: the symmetric run trained only $n batches"; exit 1; }
if [[ "$mode" == equal ]]; then
  for s in 1 2; do
    run $((2 + s)) 2 "$s" off "$tmp/roles$s"
    same "$tmp/sym" "$tmp/roles$s" "$s sampler(s)"
  done
  echo "PASS: $n batches and the model $(cat "$tmp/sym.params") identical with 0, 1 and 2 sampler ranks"
  exit
fi
run 2 2 1 always "$tmp/sw2"
same "$tmp/sym" "$tmp/sw2" "2 ranks, 1 sampler always switching"
[[ "$(switched "$tmp/sw2")" -gt 0 ]] || { echo "FAIL: 2 ranks: the sampler never trained"; exit 1; }
part 3
part 4
run 3 3 0 ordered "$tmp/sym3"
run 4 4 0 ordered "$tmp/sym4"
for sw in never always on; do
  run 3 3 1 "$sw" "$tmp/sw3$sw"
  same "$tmp/sym3" "$tmp/sw3$sw" "3 ranks, 1 sampler, switching $sw"
done
[[ "$(switched "$tmp/sw3never")" -eq 0 ]] || { echo "FAIL: never: a sampler trained"; exit 1; }
[[ "$(switched "$tmp/sw3always")" -gt 0 ]] || { echo "FAIL: always: the sampler never trained"; exit 1; }
run 4 4 2 always "$tmp/sw4"
same "$tmp/sym4" "$tmp/sw4" "4 ranks, 2 samplers always switching"
[[ "$(switched "$tmp/sw4")" -gt 0 ]] || { echo "FAIL: 4 ranks: the samplers never trained"; exit 1; }
echo "PASS: switching (2 ranks always: $(switched "$tmp/sw2") batches trained by the sampler;" \
  "3 ranks never/always/on: $(switched "$tmp/sw3always")/$(switched "$tmp/sw3on") by the sampler;" \
  "4 ranks always: $(switched "$tmp/sw4")) trains the symmetric job's batches and model bit-identically"
