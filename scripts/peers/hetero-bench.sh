#!/usr/bin/env bash
# Heterogeneous neighbour sampling, dsp against DGL 2.1's heterograph NeighborSampler, on the same
# graph files, runs alternating. Not part of CI (the DGL venv: scripts/peers/bench.sh says how to
# make it).
#
# The graph: `dsp generate hetero`, MAG-shaped (papers with features and labels, authors,
# institutions, fields of study; writes, cites, has_topic, affiliated_with and their reverses: 8
# relations), with ogbn-mag's edges per paper and per author, one part. For every fanout setting
# (--fanouts, repeatable; dsp's text: the same count for every relation, or per relation with
# '*' for the rest), each round r (sampling seed r) runs
#   dsp  `dsp bench sample P1 --threads 1 --fanouts F --seed r` (one rank, one thread)
#   DGL  scripts/peers/peerbench/dgl_hetero.py: NeighborSampler.sample_blocks (one thread: DGL's
#        unfused path) and sample_neighbors_fused per layer, the same fanouts as one
#        {canonical etype: count} dict per layer, one thread
# with the same batch size and number of timed batches, seeds in batches from a shuffled paper
# train_idx (each system its own shuffle: the same distribution of seed sets), without
# replacement. Reported per setting: sampled edges per batch (they must agree: both take
# min(fanout, degree) per (node, relation)), ms per batch and sampled edges/s on one core
# (medians over rounds), and dsp's rate over each DGL path's.
#
# Usage: scripts/peers/hetero-bench.sh [--papers N] [--fanouts F]... [--batch B] [--batches K]
#                                     [--rounds R] [--out DIR]
# Env: DSP_PEER_VENV (default ~/.cache/dsp/peer-venv), DSP (default build/tools/dsp).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$here"
papers=200000 batch=1024 batches=40 rounds=3
fanouts=()
out=out/peer/hetero
while (($#)); do
  case "$1" in
    --papers) papers="$2"; shift ;;
    --fanouts) fanouts+=("$2"); shift ;;
    --batch) batch="$2"; shift ;;
    --batches) batches="$2"; shift ;;
    --rounds) rounds="$2"; shift ;;
    --out) out="$2"; shift ;;
    *) echo "usage: scripts/peers/hetero-bench.sh [--papers N] [--fanouts F]... [--batch B]" \
         "[--batches K] [--rounds R] [--out DIR]" >&2
       exit 2 ;;
  esac
  shift
done
((${#fanouts[@]})) || fanouts=("10,10" "writes:15,cites:10,*:5;writes:10,cites:5,*:3")
venv="${DSP_PEER_VENV:-$HOME/.cache/dsp/peer-venv}"
if [[ ! -x "$venv/bin/python" ]]; then
  echo "no DGL venv at $venv (see scripts/peers/bench.sh)" >&2
  exit 1
fi
dsp="${DSP:-build/tools/dsp}"
data="$out/mag_$papers"
res="$out/results"
mkdir -p "$res"
rm -f "$res"/*.json "$res"/*.log
# run LOG CMD...: CMD's output into $res/LOG.log, its tail shown if it fails
run() {
  local log="$res/$1.log"
  shift
  "$@" > "$log" 2>&1 || { tail -n 20 "$log" >&2; exit 1; }
}
# ogbn-mag per paper: ~9.7 authors, ~7.4 references, ~10.2 fields; ~0.9 institutions per author;
# node counts scaled from its 736k papers, 1.13M authors, 8.7k institutions, 60k fields.
if [[ ! -f "$data/dataset.json" ]]; then
  run generate "$dsp" generate hetero "$data" --papers "$papers" \
    --authors $((papers * 3 / 2)) --institutions $((papers / 80)) --fields $((papers / 12)) \
    --writes 10 --cites 7 --topics 10 --affiliations 1 --feature-dim 64 --seed 1 --overwrite
fi
[[ -f "$data-p1/partition.json" ]] || run partition "$dsp" partition "$data" "$data-p1" --parts 1 \
  --overwrite
for i in "${!fanouts[@]}"; do
  for r in $(seq 1 "$rounds"); do
    echo "fanouts ${fanouts[$i]}, round $r: dsp" >&2
    run "dsp_f${i}_r$r" "$dsp" bench sample "$data-p1" --threads 1 --fanouts "${fanouts[$i]}" \
      --batch-size "$batch" --batches "$batches" --seed "$r" --json "$res/dsp_f${i}_r$r.json"
    echo "fanouts ${fanouts[$i]}, round $r: DGL" >&2
    OMP_NUM_THREADS=1 DGLBACKEND=pytorch run "dgl_f${i}_r$r" "$venv/bin/python" \
      scripts/peers/peerbench/dgl_hetero.py "$data" 1 "$res/dgl_f${i}_r$r.json" \
      --fanouts "${fanouts[$i]}" --batch "$batch" --batches "$batches" --seed "$r"
  done
done
/usr/bin/python3 - "$res" "$rounds" "$data" "${fanouts[@]}" <<'EOF'
import json, statistics, sys
res, rounds, data, fanouts = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
meta = json.load(open(f"{data}/dataset.json"))["hetero"]
R = range(1, rounds + 1)
g0 = json.load(open(f"{res}/dgl_f0_r1.json"))
nodes = sum(t["count"] for t in meta["node_types"])
edges = sum(r["edges"] for r in meta["relations"])
print(f"graph {data}: {nodes} nodes of {len(meta['node_types'])} types, {edges} edges in "
      f"{len(meta['relations'])} relations; batch {g0['batch_size']} papers, {g0['batches']} "
      f"batches x {rounds} round(s), 1 thread each; DGL {g0['dgl']}; medians over rounds")
print("| fanouts (from the seeds) | system | sampled edges / batch | ms / batch "
      "| M sampled edges/s per core | dsp / this |")
print("|---|---|---|---|---|---|")
med = statistics.median
for i, f in enumerate(fanouts):
    dsp_runs = [json.load(open(f"{res}/dsp_f{i}_r{r}.json"))["modes"][0] for r in R]
    dgl_runs = [json.load(open(f"{res}/dgl_f{i}_r{r}.json"))["configs"] for r in R]
    rows = {"dsp": dsp_runs}
    for c in dgl_runs[0]:
        rows[f"DGL {c}"] = [x[c] for x in dgl_runs]
    rate = {k: med(v["sampled_edges_per_s"] for v in x) for k, x in rows.items()}
    for k, x in rows.items():
        e = statistics.mean(v["sampled_edges_per_batch"] for v in x)
        ms = med(v["ms_per_batch"] for v in x)
        ratio = "-" if k == "dsp" else f"{rate['dsp'] / rate[k]:.2f}"
        print(f"| `{f}` | {k} | {e:.0f} | {ms:.2f} | {rate[k] / 1e6:.2f} | {ratio} |")
EOF
