#!/usr/bin/env bash
# dsp against DGL 2.1 on this machine, both on the same graph files, runs alternating, and the
# table written into docs/benchmarks.md (the section between the peer-bench markers). Not part of
# CI: the DGL venv takes ~5 GB and a few minutes to build.
#
#  1. DGL venv (torch 2.2.1 + dgl 2.1.0, the newest Linux DGL wheel) in $DSP_PEER_VENV (default
#     ~/.cache/dsp/peer-venv; keep it out of the repository), created on first use.
#  2. Graphs under out/peer/<size>/: an R-MAT graph without duplicate edges for sampling
#     (scripts/peers/peerbench/gen_rmat.py + dedup.py: a dsp dataset and an int64 CSC copy for
#     DGL) and a community graph (dsp generate community) for end-to-end training.
#  3. Sampling: `dsp bench sample` (one part, one thread) against DGL's default and fused
#     NeighborSampler paths (scripts/peers/peerbench/dgl_sampling.py), uniform [15,10,5], 1024
#     seeds.
#  4. End to end: `dsp train` (--pipeline off, then on) against the standard DGL loop
#     (scripts/peers/peerbench/dgl_train.py: NeighborSampler + DataLoader + 3 x SAGEConv('mean'),
#     Adam),
#     GraphSAGE-mean, hidden 128, [15,10,5], batch 1024, 2 epochs each (the second is timed, the
#     first's mean loss compares learning per step), on 1 and 2 threads. Then the train step's
#     breakdown: `dsp bench pipeline` and dgl_train.py --stages.
#  Every comparison alternates dsp and DGL, --rounds times; the table reports medians.
#
# Usage: scripts/peers/bench.sh [--quick] [--rounds N] [--steps N] [--data DIR] [--no-build]
#                              [--report-only]
#   --quick    R-MAT scale 18 and a 200k-node community graph (default: scale 21, 1M nodes)
#   --steps N  end to end on the community graph with N x 1024 training seeds (and 1024
#              validation / test nodes): epochs of N steps for both systems (default: all of its
#              training nodes)
#   --data DIR graphs made earlier: DIR/comm1m (dsp dataset), DIR/rmat21 (dsp dataset) and
#              DIR/rmat21dgl (its int64 CSC copy), instead of generating them
# Env: DSP_PEER_VENV (the venv), DSP_PEER_THREADS (default "1 2"), DSP_PEER_LOCK (a file each
# timed phase holds with flock, e.g. the lock concurrent builds on a shared machine take).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$here"
quick=0 rounds=2 build=1 report_only=0 steps=0 data=""
while (($#)); do
  case "$1" in
    --quick) quick=1 ;;
    --rounds) rounds="$2"; shift ;;
    --steps) steps="$2"; shift ;;
    --data) data="$2"; shift ;;
    --no-build) build=0 ;;
    --report-only) report_only=1 build=0 ;;
    *) echo "usage: scripts/peers/bench.sh [--quick] [--rounds N] [--steps N] [--data DIR]" \
         "[--no-build] [--report-only]" >&2
       exit 2 ;;
  esac
  shift
done
venv="${DSP_PEER_VENV:-$HOME/.cache/dsp/peer-venv}"
threads_list=(${DSP_PEER_THREADS:-1 2})
py=/usr/bin/python3
[[ -x "$py" ]] || py=python3
dsp=build/tools/dsp  # relative: the report quotes the commands
pb=scripts/peers/peerbench
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
log() { echo "peers/bench.sh [$(date +%T)] $*" >&2; }
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
# Each timed phase (a few minutes) holds $DSP_PEER_LOCK when set.
if [[ -n "${DSP_PEER_LOCK:-}" ]]; then exec 9>>"$DSP_PEER_LOCK"; fi
phase() {
  [[ -n "${DSP_PEER_LOCK:-}" ]] || return 0
  flock -u 9
  log "waiting for $DSP_PEER_LOCK ($1)"
  flock 9
}

# --- graphs --------------------------------------------------------------------------------------
if [[ -n "$data" ]]; then
  rmat_dsp="$data/rmat21" rmat_dgl="$data/rmat21dgl" comm="$data/comm1m"
else
  rmat_dsp="$out/rmat-dsp" rmat_dgl="$out/rmat-dgl" comm="$out/community"
  if [[ ! -f "$rmat_dsp/dataset.json" ]]; then
    log "generating R-MAT scale $rmat_scale"
    "$vpy" "$pb/gen_rmat.py" "$out/rmat-raw" "$rmat_scale"
    "$vpy" "$pb/dedup.py" "$out/rmat-raw" "$rmat_dsp" "$rmat_dgl"
    rm -rf "$out/rmat-raw"
  fi
  if [[ ! -f "$comm/dataset.json" ]]; then
    log "generating the community graph"
    "$dsp" generate community "$comm" "${comm_args[@]}" --features 100 --classes 47 \
      --name community --overwrite >/dev/null
  fi
fi
# part P of graph G: the one under --data when there, else made under $out.
parts() {
  local g="$1" p="$2"
  if [[ -f "$g-p$p/partition.json" ]]; then echo "$g-p$p"; return; fi
  local d="$out/$(basename "$g")-p$p"
  [[ -f "$d/partition.json" ]] || "$dsp" partition "$g" "$d" --parts "$p" --overwrite >/dev/null
  echo "$d"
}
rmat_p1="$(parts "$rmat_dsp" 1)"
# The train step's breakdown: the whole graph (dsp bench pipeline cuts the epoch to --max-steps).
step_p1="$(parts "$comm" 1)" step_p2="$(parts "$comm" 2)"
step_comm="$comm"
if ((steps > 0)); then
  # The same graph and features with N x 1024 training seeds: both systems run epochs of N steps.
  sub="$out/community-s$steps"
  if [[ ! -f "$sub/dataset.json" ]]; then
    "$vpy" "$pb/subset.py" "$comm" "$sub" $((steps * 1024)) 1024
  fi
  comm="$sub"
fi
train_p1="$(parts "$comm" 1)"

{
  echo "{\"date\": \"$(date -u +%FT%RZ)\", \"commit\": \"$(git rev-parse --short HEAD)\","
  echo " \"cpu\": \"$(lscpu | sed -n 's/^Model name: *//p' | head -1)\", \"cores\": $(nproc),"
  echo " \"mem_gib\": $(($(sed -n 's/^MemTotal: *\([0-9]*\).*/\1/p' /proc/meminfo) / 1048576)),"
  echo " \"torch\": \"$("$vpy" -c 'import torch; print(torch.__version__)')\","
  echo " \"dgl\": \"$("$vpy" -c 'import dgl; print(dgl.__version__)' 2>/dev/null | tail -1)\","
  echo " \"libtorch\": \"$(dpkg-query -W -f='${Version}' libtorch-dev 2>/dev/null || echo unknown)\","
  echo " \"size\": \"$size\", \"rounds\": $rounds, \"steps\": $steps, \"lock\": \"${DSP_PEER_LOCK:-}\", \"threads\": \"${threads_list[*]}\"}"
} >"$res/meta.json"

# --- sampling, alternating -----------------------------------------------------------------------
phase sampling
for ((r = 0; r < rounds; ++r)); do
  run "sample_dsp_r$r" "$dsp" bench sample "$rmat_p1" --threads 1 --batches "$sample_batches" \
    --seed "$r" --json "$res/sample_dsp_r$r.json"
  OMP_NUM_THREADS=1 run "sample_dgl_r$r" "$vpy" "$pb/dgl_sampling.py" 1 "$rmat_dgl" \
    "$res/sample_dgl_r$r.json"
done

# The memory latency the sampler's random reads pay (a dependent chain of loads, 1 GiB buffer).
cc -O2 -o "$out/pointer_chase" "$pb/pointer_chase.c"
run "latency" "$out/pointer_chase" 1024 20000000
tail -n 1 "$res/latency.log" >"$res/latency.json"

# --- end to end, alternating ---------------------------------------------------------------------
# Evaluation runs with fanouts 1,1,1: only the training loss and the epoch times are compared,
# and the epoch time dsp reports excludes evaluation anyway.
for T in "${threads_list[@]}"; do
  for ((r = 0; r < rounds; ++r)); do
    phase "end to end, $T thread(s), round $r"
    for pipe in off on; do
      run "train_dsp_${pipe}_t${T}_r$r" "$dsp" train "$train_p1" --epochs 2 --threads "$T" \
        --hidden 128 --fanouts 15,10,5 --batch-size 1024 --eval-fanouts 1,1,1 --seed "$r" \
        --pipeline "$pipe" --no-progress --metrics "$res/train_dsp_${pipe}_t${T}_r$r.jsonl"
    done
    OMP_NUM_THREADS=$T run "train_dgl_t${T}_r$r" "$vpy" "$pb/dgl_train.py" "$comm" "$T" \
      "$res/train_dgl_t${T}_r$r.json" --epochs 2 --seed "$r"
  done
done

# --- the train step's breakdown ------------------------------------------------------------------
phase "the train step"
run "step_dsp" "$dsp" bench pipeline "$step_p1" --threads 1 --hidden 128 \
  --fanouts 15,10,5 --epochs 1 --warmup 1 --max-steps 20 --json "$res/step_dsp.json"
# Two ranks, one thread each: the gradient all-reduce is real (MPI through shared memory).
run "step_dsp_p2" mpirun --oversubscribe --bind-to none -np 2 "$dsp" bench pipeline \
  "$step_p2" --threads 1 --hidden 128 --fanouts 15,10,5 --epochs 1 --warmup 1 \
  --max-steps 20 --json "$res/step_dsp_p2.json"
OMP_NUM_THREADS=1 run "step_dgl" "$vpy" "$pb/dgl_train.py" "$step_comm" 1 \
  "$res/step_dgl.json" --stages 20

[[ -z "${DSP_PEER_LOCK:-}" ]] || flock -u 9
report
