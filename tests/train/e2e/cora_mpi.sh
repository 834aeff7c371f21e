#!/usr/bin/env bash
# `mpiexec -n P dsp train` on Cora, end to end through the CLI (on-the-fly partitioning into P
# parts, collective sampling, pipeline, gradient all-reduce): test accuracy at the best validation
# epoch must reach the published band (>= 0.78).
# Usage: cora_mpi.sh DSP MPIEXEC DATA_DIR P MODEL [VARIANT] [FLAGS...]
# VARIANT: default; pagraph (PaGraph's self-reliant parts: each rank samples alone, and its
# sampler must send nothing); bfs (BGL's proximity-aware seed order); preaggregate (PaGraph's
# pre-aggregated first layer, from a partition written with --preaggregate: the job must say so). FLAGS: more `dsp train`
# flags, e.g. --roles 1.
set -euo pipefail
dsp="$1" mpiexec="$2" data="$3" np="$4" model="${5:-sage}" variant="${6:-default}"
shift 6 || shift $#
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$dsp" convert --from ogb "$data/cora" "$tmp/cora" >/dev/null
extra=(--hidden 32)
[[ "$model" == "gat" ]] && extra=(--heads 8 --hidden 8 --lr 0.005 --dropout 0.6)
path="$tmp/cora"
case "$variant" in
  default) ;;
  pagraph)
    "$dsp" partition "$tmp/cora" "$tmp/cora-pagraph" -p "$np" --method pagraph --hops 2 >/dev/null
    path="$tmp/cora-pagraph" ;;
  bfs) extra+=(--order bfs) ;;
  preaggregate)
    "$dsp" partition "$tmp/cora" "$tmp/cora-pp" -p "$np" --preaggregate >/dev/null
    path="$tmp/cora-pp"
    extra+=(--preaggregate) ;;
  *) echo "unknown variant $variant"; exit 2 ;;
esac
"$mpiexec" --oversubscribe -n "$np" "$dsp" train "$path" --model "$model" --fanouts 10,10 \
  --eval-fanouts 25,25 --batch-size $((16 / np)) --epochs 20 --seed 1 --no-progress \
  --metrics "$tmp/metrics.jsonl" "${extra[@]}" "$@" 2>&1 | tee "$tmp/log"
acc="$(awk '/test acc at best/ {print $NF}' "$tmp/log")"
lines="$(wc -l < "$tmp/metrics.jsonl")"
[[ "$lines" -eq 20 ]] || { echo "FAIL: $lines metrics records, expected 20"; exit 1; }
awk -v a="$acc" 'BEGIN { exit !(a >= 0.78) }' || { echo "FAIL: test accuracy $acc < 0.78"; exit 1; }
if [[ "$variant" == preaggregate ]]; then
  grep -q "first layer pre-aggregated (PaGraph)" "$tmp/log" ||
    { echo "FAIL: the job did not report the pre-aggregated first layer"; exit 1; }
fi
if [[ "$variant" == pagraph ]]; then
  sent="$(python3 -c 'import json, sys
print(max(json.loads(l)["sampler"]["bytes_sent"] for l in open(sys.argv[1])))' "$tmp/metrics.jsonl")"
  [[ "$sent" -eq 0 ]] || { echo "FAIL: the training sampler sent $sent bytes"; exit 1; }
fi
echo "PASS: $model ($variant) on $np ranks $*, test accuracy at best validation $acc"
