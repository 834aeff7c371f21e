#!/usr/bin/env bash
# Regenerates docs/benchmarks.md and its plots (docs/img/bench_*.png) from one run of every
# `dsp bench` on three graphs: a generated ogbn-products-sized community graph (locality: what
# METIS exploits), an R-MAT graph of the same size (no locality: the worst case for partitioning)
# and Cora (tests/data/cora). Datasets and partitions are kept under out/bench/<size>/ and reused.
#
# Usage: scripts/bench/bench.sh [--quick] [--no-build] [--report-only]
#   --quick        ~200k-node graphs and fewer batches (a few minutes on 2 cores)
#   --no-build     use build/tools/dsp as it is
#   --report-only  rewrite the report from the results of the last run
# Every comparison (CSP vs pull, policy vs oracle, gather vs memcpy, pipeline on vs off) is made
# inside one command, so its ratio is measured in one run on one machine state.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$here"
quick=0
build=1
report_only=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    --no-build) build=0 ;;
    --report-only) report_only=1 build=0 ;;
    *) echo "usage: scripts/bench/bench.sh [--quick] [--no-build] [--report-only]" >&2; exit 2 ;;
  esac
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The first python3 on PATH may lack numpy/matplotlib; Debian's has them (setup.sh).
py=/usr/bin/python3
[[ -x "$py" ]] || py=python3
if ((build)); then cmake --build build -j2 --target dsp; fi
dsp=build/tools/dsp  # relative: the report quotes the commands
mpi=(mpirun --oversubscribe --bind-to none)

if ((quick)); then
  size=quick
  comm_args=(--nodes 200000 --edges 4000000 --communities 128)
  rmat_args=(--nodes 262144 --edges 3670000)
  sample_batches=10 cache_batches=30 pipe_steps=3 gather_iters=10
else
  size=full
  # ogbn-products: 2,449,029 nodes, 61,859,140 undirected edges, 100 features, 47 classes.
  # About 13% of draws repeat an edge with 1024 communities; 71.1M draws keep about 62M distinct
  # undirected edges (ogbn-products has 61.86M).
  comm_args=(--nodes 2449029 --edges 71100000 --communities 1024)
  # Graph500 scale 21 with edge factor 14: 2,097,152 nodes, 29.35M undirected edges drawn.
  rmat_args=(--nodes 2097152 --edges 29360128)
  # cache: one epoch of the community graph (240 batches; R-MAT has 205), so the seed orders
  # are compared over whole epochs
  sample_batches=20 cache_batches=240 pipe_steps=3 gather_iters=20
fi
out="out/bench/$size"
res="$out/results"
mkdir -p "$res"
log() { echo "bench.sh [$(date +%T)] $*" >&2; }
report() {
  "$py" scripts/bench/plot_bench.py "$res" docs/benchmarks.md docs/img
  log "wrote docs/benchmarks.md and docs/img/bench_*.png"
}
if ((report_only)); then
  report
  exit 0
fi
rm -f "$res"/*.json "$res"/*.cmd "$res"/*.log

# run NAME CMD...: runs CMD with --json $res/NAME.json, keeps its command line and its output.
run() {
  local name="$1"
  shift
  log "$name: $*"
  echo "$* --json $res/$name.json" >"$res/$name.cmd"
  "$@" --json "$res/$name.json" 2>&1 | tee "$res/$name.log"
}

# --- datasets -------------------------------------------------------------------------------
if [[ ! -f "$out/community/dataset.json" ]]; then
  log "generating the community graph"
  "$dsp" generate community "$out/community" "${comm_args[@]}" --features 100 --classes 47 \
    --name community --overwrite
fi
if [[ ! -f "$out/rmat/dataset.json" ]]; then
  log "generating the R-MAT graph"
  "$dsp" generate rmat "$out/rmat" "${rmat_args[@]}" --undirected --features 100 --classes 47 \
    --name rmat --overwrite
fi
if [[ ! -f "$out/cora/dataset.json" ]]; then
  "$dsp" convert --from ogb tests/data/cora "$out/cora" --name cora --overwrite
fi
graphs=(community rmat cora)
for g in "${graphs[@]}"; do
  for p in 1 2 4; do
    if [[ ! -f "$out/$g-p$p/partition.json" ]]; then
      log "partitioning $g into $p part(s)"
      "$dsp" partition "$out/$g" "$out/$g-p$p" -p "$p" --overwrite >"$out/$g-p$p.log" 2>&1
    fi
  done
done

# --- sampling throughput and communication volume ---------------------------------------------
# One thread per rank, so 1 -> 2 ranks doubles the cores; 4 ranks oversubscribe the 2 cores.
for g in "${graphs[@]}"; do
  for p in 1 2 4; do
    extra=()
    if ((p > 1)); then extra=(--per-layer-bytes); fi
    run "sample_${g}_p$p" "${mpi[@]}" -np "$p" "$dsp" bench sample "$out/$g-p$p" --mode both \
      --fanouts 15,10,5 --batch-size 1024 --batches "$sample_batches" "${extra[@]}"
  done
done

# --- cache policies vs the oracle (single process; also the reference sampler's throughput) ----
# Traces with shuffled seeds and in BGL's BFS order; PreSC#K for K = 1, 2, 4.
for g in "${graphs[@]}"; do
  run "cache_$g" "$dsp" bench cache "$out/$g" --ratios 0.05,0.1,0.2 --batches "$cache_batches" \
    --fanouts 15,10,5 --batch-size 1024 --orders random,bfs --presample-epochs 1,2,4
  for s in 1 16; do
    run "cache_${g}_bfs$s" "$dsp" bench cache "$out/$g" --ratios 0.05,0.1,0.2 \
      --batches "$cache_batches" --fanouts 15,10,5 --batch-size 1024 --orders bfs \
      --policies in-degree --bfs-sequences "$s"
  done
done

# --- partition quality: METIS with and without the entries constraint, BGL, PaGraph, random ---
for g in community rmat; do
  q="$out/quality"
  run "partition_${g}_random_p2" "$dsp" partition "$out/$g" "$q/$g-random" -p 2 --method random \
    --overwrite
  run "partition_${g}_metis_noentries_p2" "$dsp" partition "$out/$g" "$q/$g-metis-ne" -p 2 \
    --no-entry-balance --overwrite
  for p in 2 4; do
    run "partition_${g}_bfs_blocks_p$p" "$dsp" partition "$out/$g" "$q/$g-bfs" -p "$p" \
      --method bfs-blocks --overwrite
    run "partition_${g}_metis_p$p" "$dsp" partition "$out/$g" "$q/$g-metis" -p "$p" --overwrite
  done
  run "partition_${g}_bfs_blocks_noentries_p2" "$dsp" partition "$out/$g" "$q/$g-bfs" -p 2 \
    --method bfs-blocks --no-entry-balance --overwrite
  run "partition_${g}_pagraph_l2_cap10_p2" "$dsp" partition "$out/$g" "$q/$g-pagraph" -p 2 \
    --method pagraph --hops 2 --halo-cap 10 --overwrite
  run "partition_${g}_pagraph_l3_cap10_p2" "$dsp" partition "$out/$g" "$q/$g-pagraph" -p 2 \
    --method pagraph --hops 3 --halo-cap 10 --overwrite
  rm -rf "$q"
done
run partition_community_pagraph_l2_p2 "$dsp" partition "$out/community" "$out/pagraph-tmp" -p 2 \
  --method pagraph --hops 2 --overwrite
rm -rf "$out/pagraph-tmp"

# --- loader gather vs memcpy --------------------------------------------------------------------
for g in community rmat; do
  run "gather_${g}_p1" "$dsp" bench gather "$out/$g-p1" --iters "$gather_iters"
  run "gather_${g}_p2" "${mpi[@]}" -np 2 "$dsp" bench gather "$out/$g-p2" --iters "$gather_iters"
done

# --- pipeline on vs off ---------------------------------------------------------------------------
for p in 1 2; do
  run "pipeline_community_p$p" "${mpi[@]}" -np "$p" "$dsp" bench pipeline "$out/community-p$p" \
    --model sage --hidden 256 --fanouts 15,10,5 --batch-size 1024 --epochs 2 --warmup 1 \
    --max-steps "$pipe_steps"
done
run pipeline_cora_p1 "$dsp" bench pipeline "$out/cora-p1" --model sage --hidden 256 \
  --fanouts 15,10,5 --batch-size 64 --epochs 3 --warmup 1

# --- report -----------------------------------------------------------------------------------
{
  echo "{"
  echo "  \"size\": \"$size\","
  echo "  \"date\": \"$(date -u +%Y-%m-%dT%H:%MZ)\","
  echo "  \"commit\": \"$(git rev-parse --short HEAD 2>/dev/null || echo unknown)\","
  echo "  \"cpu\": \"$(lscpu | sed -n 's/^Model name: *//p' | head -1)\","
  echo "  \"cores\": $(nproc),"
  echo "  \"mem_gib\": $(awk '/MemTotal/ {printf "%.0f", $2 / 1048576}' /proc/meminfo),"
  echo "  \"command\": \"scripts/bench/bench.sh$( ((quick)) && echo ' --quick')\""
  echo "}"
} >"$res/meta.json"
for g in community rmat cora; do cp "$out/$g/dataset.json" "$res/dataset_$g.json"; done
report
