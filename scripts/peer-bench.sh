#!/usr/bin/env bash
# dsp against DGL 2.1 on this machine, both on the same graph files, runs alternating, and the
# table written into docs/benchmarks.md (the section between the peer-bench markers). Not part of
# CI: the DGL venv takes ~5 GB and a few minutes to build.
#
#  1. DGL venv (torch 2.2.1 + dgl 2.1.0, the newest Linux DGL wheel) in $DSP_PEER_VENV (default
#     ~/.cache/dsp/peer-venv; keep it out of the repository), created on first use.
#  2. Graphs under out/peer/<size>/: an R-MAT graph without duplicate edges for sampling
#     (scripts/peerbench/gen_rmat.py + dedup.py: a dsp dataset and an int64 CSC copy for DGL) and
#     a community graph (dsp generate community) for end-to-end training.
#  3. Sampling: `dsp bench sample` (one part, one thread) against DGL's default and fused
#     NeighborSampler paths (scripts/peerbench/dgl_sampling.py), uniform [15,10,5], 1024 seeds.
#  4. End to end: `dsp train` against the standard DGL loop (scripts/peerbench/dgl_train.py:
#     NeighborSampler + DataLoader + 3 x SAGEConv('mean'), Adam), GraphSAGE-mean, hidden 128,
#     [15,10,5], batch 1024, 2 epochs each (the second is timed, the first's mean loss compares
#     learning per step), on 1 and 2 threads. Then the train step's breakdown: `dsp bench pipeline`
#     and dgl_train.py --stages.
#  Every comparison alternates dsp and DGL, --rounds times; the table reports medians.
#
# Usage: scripts/peer-bench.sh [--quick] [--rounds N] [--no-build] [--report-only]
#   --quick   R-MAT scale 18 and a 200k-node community graph (default: scale 21, 1M nodes)
# Env: DSP_PEER_VENV (the venv), DSP_PEER_THREADS (default "1 2").
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
quick=0 rounds=2 build=1 report_only=0
while (($#)); do
  case "$1" in
    --quick) quick=1 ;;
    --rounds) rounds="$2"; shift ;;
    --no-build) build=0 ;;
    --report-only) report_only=1 build=0 ;;
    *) echo "usage: scripts/peer-bench.sh [--quick] [--rounds N] [--no-build] [--report-only]" >&2
       exit 2 ;;
  esac
  shift
done
venv="${DSP_PEER_VENV:-$HOME/.cache/dsp/peer-venv}"
threads_list=(${DSP_PEER_THREADS:-1 2})
py=/usr/bin/python3
[[ -x "$py" ]] || py=python3
dsp=build/tools/dsp  # relative: the report quotes the commands
pb=scripts/peerbench
if ((quick)); then
  size=quick rmat_scale=18
  comm_args=(--nodes 200000 --edges 5000000 --communities 128)
  sample_batches=100
else
  size=full rmat_scale=21
  comm_args=(--nodes 1000000 --edges 25000000 --communities 512)
  sample_batches=200
fi
out="out/peer/$size"
res="$out/results"
log() { echo "peer-bench.sh [$(date +%T)] $*" >&2; }
report() {
  "$py" "$pb/report.py" "$res" docs/benchmarks.md
  log "wrote the peer section of docs/benchmarks.md"
}
if ((report_only)); then
  report
  exit 0
fi
mkdir -p "$res"
rm -f "$res"/*.json "$res"/*.cmd "$res"/*.log

# --- the DGL venv ------------------------------------------------------------------------------
if ! "$venv/bin/python" -c 'import dgl, torch' 2>/dev/null; then
  log "creating the DGL venv in $venv (torch 2.2.1, dgl 2.1.0; ~5 GB)"
  "$py" -m venv "$venv"
  # dgl 2.1 needs pandas to import, and numpy < 2 with torch 2.2.1.
  "$venv/bin/pip" install -q --no-cache-dir torch==2.2.1 dgl==2.1.0 torchdata==0.7.1 "numpy<2" \
    "scipy<1.15" "pandas<2.3" pyyaml "pydantic>=2"
fi
vpy="$venv/bin/python"
if ((build)); then cmake --build build -j2 --target dsp; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 DGLBACKEND=pytorch

# run NAME CMD...: runs CMD, keeps its command line and its output under $res.
run() {
  local name="$1"
  shift
  log "$name: $*"
  echo "$*" >"$res/$name.cmd"
  "$@" >"$res/$name.log" 2>&1 || { tail -n 20 "$res/$name.log" >&2; exit 1; }
}

# --- graphs --------------------------------------------------------------------------------------
if [[ ! -f "$out/rmat-dsp/dataset.json" ]]; then
  log "generating R-MAT scale $rmat_scale"
  "$vpy" "$pb/gen_rmat.py" "$out/rmat-raw" "$rmat_scale"
  "$vpy" "$pb/dedup.py" "$out/rmat-raw" "$out/rmat-dsp" "$out/rmat-dgl"
  rm -rf "$out/rmat-raw"
fi
[[ -f "$out/rmat-p1/partition.json" ]] ||
  "$dsp" partition "$out/rmat-dsp" "$out/rmat-p1" --parts 1 --overwrite >/dev/null
if [[ ! -f "$out/community/dataset.json" ]]; then
  log "generating the community graph"
  "$dsp" generate community "$out/community" "${comm_args[@]}" --features 100 --classes 47 \
    --name community --overwrite >/dev/null
fi
for p in 1 2; do
  [[ -f "$out/community-p$p/partition.json" ]] ||
    "$dsp" partition "$out/community" "$out/community-p$p" --parts "$p" --overwrite >/dev/null
done

{
  echo "{\"date\": \"$(date -u +%FT%RZ)\", \"commit\": \"$(git rev-parse --short HEAD)\","
  echo " \"cpu\": \"$(lscpu | sed -n 's/^Model name: *//p' | head -1)\", \"cores\": $(nproc),"
  echo " \"mem_gib\": $(($(sed -n 's/^MemTotal: *\([0-9]*\).*/\1/p' /proc/meminfo) / 1048576)),"
  echo " \"torch\": \"$("$vpy" -c 'import torch; print(torch.__version__)')\","
  echo " \"dgl\": \"$("$vpy" -c 'import dgl; print(dgl.__version__)' 2>/dev/null | tail -1)\","
  echo " \"libtorch\": \"$(dpkg-query -W -f='${Version}' libtorch-dev 2>/dev/null || echo unknown)\","
  echo " \"size\": \"$size\", \"rounds\": $rounds, \"threads\": \"${threads_list[*]}\"}"
} >"$res/meta.json"

# --- sampling, alternating -----------------------------------------------------------------------
for ((r = 0; r < rounds; ++r)); do
  run "sample_dsp_r$r" "$dsp" bench sample "$out/rmat-p1" --threads 1 --batches "$sample_batches" \
    --seed "$r" --json "$res/sample_dsp_r$r.json"
  OMP_NUM_THREADS=1 run "sample_dgl_r$r" "$vpy" "$pb/dgl_sampling.py" 1 "$out/rmat-dgl" \
    "$res/sample_dgl_r$r.json"
done

# --- end to end, alternating ---------------------------------------------------------------------
# Evaluation runs with fanouts 1,1,1: only the training loss and the epoch times are compared,
# and the epoch time dsp reports excludes evaluation anyway.
for T in "${threads_list[@]}"; do
  for ((r = 0; r < rounds; ++r)); do
    run "train_dsp_t${T}_r$r" "$dsp" train "$out/community-p1" --epochs 2 --threads "$T" \
      --hidden 128 --fanouts 15,10,5 --batch-size 1024 --eval-fanouts 1,1,1 --seed "$r" \
      --no-progress --metrics "$res/train_dsp_t${T}_r$r.jsonl"
    OMP_NUM_THREADS=$T run "train_dgl_t${T}_r$r" "$vpy" "$pb/dgl_train.py" "$out/community" "$T" \
      "$res/train_dgl_t${T}_r$r.json" --epochs 2 --seed "$r"
  done
done

# --- the train step's breakdown ------------------------------------------------------------------
run "step_dsp" "$dsp" bench pipeline "$out/community-p1" --threads 1 --hidden 128 \
  --fanouts 15,10,5 --epochs 1 --warmup 1 --max-steps 20 --json "$res/step_dsp.json"
# Two ranks, one thread each: the gradient all-reduce is real (MPI through shared memory).
run "step_dsp_p2" mpirun --oversubscribe --bind-to none -np 2 "$dsp" bench pipeline \
  "$out/community-p2" --threads 1 --hidden 128 --fanouts 15,10,5 --epochs 1 --warmup 1 \
  --max-steps 20 --json "$res/step_dsp_p2.json"
OMP_NUM_THREADS=1 run "step_dgl" "$vpy" "$pb/dgl_train.py" "$out/community" 1 \
  "$res/step_dgl.json" --stages 20

report
