#!/usr/bin/env bash
# LABOR against neighbour sampling, dsp against DGL 2.1, on the same graph files, runs alternating.
# Not part of CI (the DGL venv: scripts/peers/bench.sh says how to make it).
#
# The graph: `dsp generate community` (power-law degrees, so many nodes have more neighbours than
# the fanout and LABOR has something to share), one part. Each round r (sampling seed r) runs
#   dsp  `dsp bench sample P1 --sampler neighbor | labor [--labor-importance 1]
#        [--labor-layer-dependency]`, one rank, one thread
#   DGL  scripts/peers/peerbench/dgl_labor.py: NeighborSampler and LaborSampler(importance_sampling
#        0 | 1, layer_dependency off | on), one thread
# with the same fanouts, batch size and number of timed batches, seeds in batches from a shuffled
# train_idx (each system its own shuffle: the same distribution of seed sets). Reported per
# sampler: distinct input nodes per batch (and per layer, from the seeds out; a block's sources
# include its destinations in both systems), their feature bytes, sampled edges per batch, the
# neighbour-row entries the frontier holds (DGL's script sums its destinations' degrees: what a
# sampler drawing one variate per neighbour reads) and ms per batch; counts are means over rounds,
# times medians. Counts repeat exactly for the same seeds; times on a shared machine do not, so
# compare times within a system (LABOR against neighbour sampling in the same round).
#
# Usage: scripts/peers/labor-bench.sh [--nodes N] [--edges M] [--features F] [--fanouts LIST]
#                                    [--batch B] [--batches K] [--rounds R] [--out DIR]
# Env: DSP_PEER_VENV (default ~/.cache/dsp/peer-venv), DSP (default build/tools/dsp).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$here"
nodes=200000 edges=2000000 features=64 fanouts=10,10,10 batch=1024 batches=40 rounds=2
out=out/peer/labor
while (($#)); do
  case "$1" in
    --nodes) nodes="$2"; shift ;;
    --edges) edges="$2"; shift ;;
    --features) features="$2"; shift ;;
    --fanouts) fanouts="$2"; shift ;;
    --batch) batch="$2"; shift ;;
    --batches) batches="$2"; shift ;;
    --rounds) rounds="$2"; shift ;;
    --out) out="$2"; shift ;;
    *) echo "usage: scripts/peers/labor-bench.sh [--nodes N] [--edges M] [--features F]" \
         "[--fanouts LIST] [--batch B] [--batches K] [--rounds R] [--out DIR]" >&2
       exit 2 ;;
  esac
  shift
done
venv="${DSP_PEER_VENV:-$HOME/.cache/dsp/peer-venv}"
if [[ ! -x "$venv/bin/python" ]]; then
  echo "no DGL venv at $venv (see scripts/peers/bench.sh)" >&2
  exit 1
fi
dsp="${DSP:-build/tools/dsp}"
mkdir -p "$out"
data="$out/g_${nodes}_${edges}_f$features"
res="$out/results"
mkdir -p "$res"
rm -f "$res"/*.json "$res"/*.log
# run LOG CMD...: CMD's output into $res/LOG.log, its tail shown if it fails
run() {
  local log="$res/$1.log"
  shift
  "$@" > "$log" 2>&1 || { tail -n 20 "$log" >&2; exit 1; }
}
if [[ ! -f "$data/dataset.json" ]]; then
  run generate "$dsp" generate community "$data" --nodes "$nodes" --edges "$edges" \
    --features "$features" --classes 16 --communities 64 --seed 1 --name community --overwrite
fi
[[ -f "$data-p1/partition.json" ]] || run partition "$dsp" partition "$data" "$data-p1" --parts 1 \
  --overwrite
# name and dsp flags of each sampler; DGL's configurations carry the same names
configs=(neighbor labor0 labor0_ld labor1 labor1_ld)
declare -A flags=(
  [neighbor]="--sampler neighbor"
  [labor0]="--sampler labor"
  [labor0_ld]="--sampler labor --labor-layer-dependency"
  [labor1]="--sampler labor --labor-importance 1"
  [labor1_ld]="--sampler labor --labor-importance 1 --labor-layer-dependency")
for r in $(seq 1 "$rounds"); do
  for c in "${configs[@]}"; do
    echo "round $r: dsp $c" >&2
    # shellcheck disable=SC2086  # the flags are words
    run "dsp_${c}_r$r" "$dsp" bench sample "$data-p1" --threads 1 --fanouts "$fanouts" \
      --batch-size "$batch" --batches "$batches" --seed "$r" ${flags[$c]} \
      --json "$res/dsp_${c}_r$r.json"
  done
  echo "round $r: DGL" >&2
  OMP_NUM_THREADS=1 DGLBACKEND=pytorch run "dgl_r$r" "$venv/bin/python" \
    scripts/peers/peerbench/dgl_labor.py "$data" 1 "$res/dgl_r$r.json" --fanouts "$fanouts" \
    --batch "$batch" --batches "$batches" --seed "$r" --configs "$(IFS=,; echo "${configs[*]}")"
done
/usr/bin/python3 - "$res" "$rounds" "$data" "${configs[@]}" <<'EOF'
import json, statistics, sys
res, rounds, data, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
meta = json.load(open(f"{data}/dataset.json"))
R = range(1, rounds + 1)
runs = {"dsp": {c: [json.load(open(f"{res}/dsp_{c}_r{r}.json"))["modes"][0] for r in R]
                for c in configs},
        "DGL": {c: [json.load(open(f"{res}/dgl_r{r}.json"))["configs"][c] for r in R]
                for c in configs}}
g0 = json.load(open(f"{res}/dgl_r1.json"))
mean = statistics.mean
print(f"graph {data}: {meta['num_nodes']} nodes, {meta['num_edges']} stored edges, "
      f"{meta['feature_dim']} x {meta['feature_dtype']} features; fanouts {g0['fanouts']} from "
      f"the seeds, batch {g0['batch_size']}, {g0['batches']} batches x {rounds} round(s), "
      f"1 thread; DGL {g0['dgl']}; counts: means, times: medians over rounds")
print("| sampler | system | input nodes / batch | vs neighbor | sources per layer (from seeds) "
      "| feature MB / batch | sampled edges / batch | row entries read / batch | ms / batch "
      "| vs neighbor |")
print("|---|---|---|---|---|---|---|---|---|---|")


def fig(x):
    L = len(x[0]["sources_per_batch_per_layer"])
    rows = "-"  # DGL's script sums the destinations' degrees; dsp's bench does not
    if "frontier_degree_sum_per_batch" in x[0]:
        rows = f"{mean(v['frontier_degree_sum_per_batch'] for v in x):.0f}"
    return dict(n=mean(v["input_nodes_per_batch"] for v in x),
                layers=[round(mean(v["sources_per_batch_per_layer"][l] for v in x))
                        for l in range(L)],
                mb=mean(v["feature_bytes_per_batch"] for v in x) / 1e6,
                e=mean(v["sampled_edges_per_batch"] for v in x), rows=rows,
                ms=statistics.median(v["ms_per_batch"] for v in x))


figs = {s: {c: fig(runs[s][c]) for c in configs} for s in runs}
for c in configs:
    for s in runs:
        f, b = figs[s][c], figs[s].get("neighbor")
        rel = lambda k: f"{f[k] / b[k]:.3f}" if b else "-"
        print(f"| {c} | {s} | {f['n']:.0f} | {rel('n')} | {f['layers']} | {f['mb']:.1f} | "
              f"{f['e']:.0f} | {f['rows']} | {f['ms']:.1f} | {rel('ms')} |")
EOF
