#!/usr/bin/env bash
# `mpiexec -n P dsp train` on Cora, end to end through the CLI (on-the-fly partitioning into P
# parts, collective sampling, pipeline, gradient all-reduce): test accuracy at the best validation
# epoch must reach the published band (>= 0.78). Usage: cora_mpi.sh DSP MPIEXEC DATA_DIR P MODEL
# [FLAGS...] (more `dsp train` flags, e.g. --roles 1)
set -euo pipefail
dsp="$1" mpiexec="$2" data="$3" np="$4" model="${5:-sage}"
shift 5 || shift $#
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$dsp" convert --from ogb "$data/cora" "$tmp/cora" >/dev/null
extra=(--hidden 32)
[[ "$model" == "gat" ]] && extra=(--heads 8 --hidden 8 --lr 0.005 --dropout 0.6)
"$mpiexec" --oversubscribe -n "$np" "$dsp" train "$tmp/cora" --model "$model" --fanouts 10,10 \
  --eval-fanouts 25,25 --batch-size $((16 / np)) --epochs 20 --seed 1 --no-progress \
  --metrics "$tmp/metrics.jsonl" "${extra[@]}" "$@" 2>&1 | tee "$tmp/log"
acc="$(awk '/test acc at best/ {print $NF}' "$tmp/log")"
lines="$(wc -l < "$tmp/metrics.jsonl")"
[[ "$lines" -eq 20 ]] || { echo "FAIL: $lines metrics records, expected 20"; exit 1; }
awk -v a="$acc" 'BEGIN { exit !(a >= 0.78) }' || { echo "FAIL: test accuracy $acc < 0.78"; exit 1; }
echo "PASS: $model on $np ranks $*, test accuracy at best validation $acc"
