#!/usr/bin/env bash
# Link prediction, dsp against DGL 2.1 on this machine, on the same graph files, runs alternating.
# Not part of CI (the DGL venv: scripts/peers/bench.sh says how to make it).
#
# The graph: `dsp generate community` with a link split (featureless: both systems learn a
# 64-column embedding per node), partitioned into 1 and 2 parts (METIS). Each round runs:
#   dsp  1 rank x 1 thread   dsp train P1 --task link --max-steps S (--pipeline off)
#   DGL  1 thread            scripts/peers/peerbench/dgl_link.py (as_edge_prediction_sampler,
#                            reverse_id exclusion, uniform negatives, nn.Embedding(sparse) +
#                            SparseAdam)
#   dsp  2 ranks x 1 thread  mpirun -n 2 dsp train P2 ... (the same batch per rank)
#   DGL  2 threads
# all with GraphSAGE-mean over [10,5], hidden 64, batch 1024 positive edges, 1 negative each, dot
# predictor, no dropout. dsp's figures come from its --metrics record (the epoch's wall time and
# sampler statistics of S steps), DGL's from its own timing of S steps after 3 warm-up steps.
# Reported: ms per step, sampled edges per second of sampling time, and the estimated epoch
# (steps of a whole epoch x ms per step).
#
# Usage: scripts/peers/link-bench.sh [--nodes N] [--edges M] [--steps S] [--rounds R] [--out DIR]
# Env: DSP_PEER_VENV (default ~/.cache/dsp/peer-venv), MPIEXEC (default mpirun).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$here"
nodes=1000000 edges=10000000 steps=200 rounds=2 out=out/peer/link
while (($#)); do
  case "$1" in
    --nodes) nodes="$2"; shift ;;
    --edges) edges="$2"; shift ;;
    --steps) steps="$2"; shift ;;
    --rounds) rounds="$2"; shift ;;
    --out) out="$2"; shift ;;
    *) echo "usage: scripts/peers/link-bench.sh [--nodes N] [--edges M] [--steps S]" \
         "[--rounds R] [--out DIR]" >&2
       exit 2 ;;
  esac
  shift
done
venv="${DSP_PEER_VENV:-$HOME/.cache/dsp/peer-venv}"
[[ -x "$venv/bin/python" ]] || { echo "no DGL venv at $venv (see scripts/peers/bench.sh)" >&2; exit 1; }
mpiexec="${MPIEXEC:-mpirun}"
dsp=build/tools/dsp
mkdir -p "$out"
data="$out/g_${nodes}_${edges}"
if [[ ! -f "$data/dataset.json" ]]; then
  "$dsp" generate community --nodes "$nodes" --edges "$edges" --features 0 --classes 0 \
    --communities 256 --link-split 0.85,0.05,0.10 --link-negatives 100000 --seed 1 "$data"
fi
for p in 1 2; do
  [[ -f "$data-p$p/partition.json" ]] || "$dsp" partition "$data" "$data-p$p" --parts "$p"
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
common=(--task link --fanouts 10,5 --hidden 64 --batch-size 1024 --dropout 0 --weight-decay 0
        --embedding-lr 0.05 --pipeline off --epochs 1 --max-steps "$steps" --no-progress
        --threads 1)
run_dsp() {  # ranks, json
  local cmd=("$dsp" train "$data-p$1" "${common[@]}" --metrics "$2")
  rm -f "$2"
  if (($1 > 1)); then cmd=("$mpiexec" --oversubscribe -n "$1" "${cmd[@]}"); fi
  "${cmd[@]}" > /dev/null
}
run_dgl() {  # threads, json
  OMP_NUM_THREADS="$1" DGLBACKEND=pytorch "$venv/bin/python" scripts/peers/peerbench/dgl_link.py \
    "$data" "$1" "$2" --steps "$steps" --fanouts 10,5 --batch 1024 --hidden 64 > /dev/null 2>&1
}
for r in $(seq 1 "$rounds"); do
  for n in 1 2; do
    echo "round $r: dsp $n rank(s), DGL $n thread(s)" >&2
    run_dsp "$n" "$out/dsp_np${n}_r$r.jsonl"
    run_dgl "$n" "$out/dgl_t${n}_r$r.json"
  done
done
/usr/bin/python3 - "$out" "$rounds" "$steps" "$data" <<'EOF'
import json, statistics, sys
out, rounds, steps, data = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
meta = json.load(open(f"{data}/dataset.json"))
print(f"graph {data}: {meta['num_nodes']} nodes, {meta['num_edges']} stored entries, "
      f"{meta['num_link_train']} training edges; {steps} steps of 1024 edges per rank, "
      f"{rounds} round(s), medians")
print("| system | ranks x threads | ms / step | sampled edges / s (sampling) | epoch (est.) |")
print("|---|---|---|---|---|")
for n in (1, 2):
    d = [json.loads(open(f"{out}/dsp_np{n}_r{r}.jsonl").read().splitlines()[-1])
         for r in range(1, rounds + 1)]
    ms = statistics.median(x["epoch_s"] / x["pipeline"]["steps"] * 1e3 for x in d)
    eps = statistics.median(x["sampler"]["sampled_edges"] / x["sampler"]["t_total"] for x in d)
    epoch_steps = -(-meta["num_link_train"] // (1024 * n))
    print(f"| dsp | {n} x 1 | {ms:.1f} | {eps / 1e6:.2f} M (rank 0) | {ms * epoch_steps / 1e3:.0f} s |")
    g = [json.load(open(f"{out}/dgl_t{n}_r{r}.json")) for r in range(1, rounds + 1)]
    gms = statistics.median(x["wall_s"] / x["steps_timed"] * 1e3 for x in g)
    geps = statistics.median(x["sampled_edges_per_s"] for x in g)
    print(f"| DGL 2.1 | 1 x {n} | {gms:.1f} | {geps / 1e6:.2f} M | "
          f"{gms * g[0]['steps_per_epoch'] / 1e3:.0f} s |")
EOF
