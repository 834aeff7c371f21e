#!/usr/bin/env bash
# The 8-GPU projection of docs/benchmarks.md: an ogbn-products-sized community graph (2,449,029
# nodes, about 62M undirected edges, 100 features, 47 classes, 8.03% of the nodes training seeds
# as products' 196,615) partitioned with METIS into 1, 2, 4 and 8 parts (every row cached:
# products' features fit a 16 GB V100, as in DSP's runs), the per-rank volumes of each measured by
# `dsp bench volumes` under mpirun -np P (a few batches: the volumes do not depend on the
# backend), then `dsp bench project`: with this machine's one-rank stage times, and with V100
# stage times derived from the DSP paper's products figures, compared with its published epoch
# times (Table 4: 3.11, 1.75, 0.992, 0.613 s).
#
# Usage: scripts/bench/project.sh [--batches 3] [--out out/project] [--no-build]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$here"
batches=3 out=out/project build=1
while (($#)); do
  case "$1" in
    --batches) batches="$2"; shift ;;
    --out) out="$2"; shift ;;
    --no-build) build=0 ;;
    *) echo "usage: scripts/bench/project.sh [--batches 3] [--out DIR] [--no-build]" >&2; exit 2 ;;
  esac
  shift
done
if ((build)); then cmake --build build -j2 --target dsp; fi
dsp="${DSP_BIN:-build/tools/dsp}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun --oversubscribe --bind-to none)
res="$out/results"
mkdir -p "$res"
log() { echo "project.sh [$(date +%T)] $*" >&2; }

g="$out/products"
if [[ ! -f "$g/dataset.json" ]]; then
  log "generating the products-sized community graph"
  # as scripts/bench/bench.sh: 71.1M draws keep about 62M distinct undirected edges
  "$dsp" generate community "$g" --nodes 2449029 --edges 71100000 --communities 1024 \
    --features 100 --classes 47 --train-frac 0.0803 --name products-sized --overwrite
fi
runs=()
for p in 1 2 4 8; do
  if [[ ! -f "$g-p$p/partition.json" ]]; then
    log "partitioning into $p part(s)"
    "$dsp" partition "$g" "$g-p$p" -p "$p" --cache-ratio 1 --overwrite >"$res/partition_p$p.log" 2>&1
  fi
  log "volumes at $p rank(s)"
  "${mpi[@]}" -np "$p" "$dsp" bench volumes "$g-p$p" --batches "$batches" --warmup 1 \
    --json "$res/volumes_p$p.json" | tee "$res/volumes_p$p.log"
  runs+=("$res/volumes_p$p.json")
done

log "projection with this machine's one-rank stage times"
"$dsp" bench project "${runs[@]}" --json "$res/project_here.json" | tee "$res/project_here.log"

# V100 stage times for products (DSP, PPoPP'23): 193 batches of 1024 of its 196,615 training
# seeds on one GPU; sampling alone 1.60 s an epoch (Table 6) -> 8.29 ms a batch; the rest of the
# 3.11 s epoch (Table 4), 7.82 ms a batch, is loading and training, the stages taken as not
# overlapping on one GPU (calibration). Loading on one GPU is a gather of the batch's input rows
# from device memory: the 1-rank run's local bytes at 300 GB/s (a V100 gather, about a third of
# its 900 GB/s), the rest is training.
v100=$(/usr/bin/python3 - "$res/volumes_p1.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
batches = -(-196615 // 1024)
sample = 1.60 / batches * 1e3
rest = (3.11 - 1.60) / batches * 1e3
load = j["per_batch"]["load"]["local_bytes"] / 300e9 * 1e3
print(f"{sample:.4f},{load:.4f},{rest - load:.4f}")
EOF
)
log "projection with V100 stage times $v100 ms (sample,load,train)"
"$dsp" bench project "${runs[@]}" --stage-ms "$v100" --train-seeds 196615 --batch-size 1024 \
  --published 1:3.11,2:1.75,4:0.992,8:0.613 --json "$res/project_v100.json" |
  tee "$res/project_v100.log"

# How much the 8-GPU figure depends on the link figures the paper does not give: the peer link's
# bandwidth (10 GB/s, 25 the default, 150 a V100's six NVLink-2 links) and latency (5, 20, 100 us).
for opt in "--peer-gbps 10" "--peer-gbps 150" "--peer-latency-us 5" "--peer-latency-us 100"; do
  # shellcheck disable=SC2086
  "$dsp" bench project "${runs[@]}" --stage-ms "$v100" --train-seeds 196615 --batch-size 1024 \
    --published 1:3.11,8:0.613 $opt --json "$res/project_v100_${opt// /_}.json" |
    awk -v o="$opt" '$1 == 8 { print "sensitivity " o ": " $0 }' | tee -a "$res/project_v100.log"
done
