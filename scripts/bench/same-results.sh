#!/usr/bin/env bash
# Behaviour unchanged between two dsp binaries: converts Cora, generates a community and an R-MAT
# graph, partitions both by METIS and by PaGraph, trains GraphSAGE, GCN and GAT on Cora and
# GraphSAGE on the community graph with 2 ranks, and one job that partitions on the fly with a
# cache override and a FIFO level; then compares every file (.npy byte for byte, JSON without its
# timings).
# Usage: scripts/bench/same-results.sh OLD_DSP NEW_DSP [WORKDIR]  (exit 1 when any differs).
set -euo pipefail
old=$1 new=$2 work=${3:-$(mktemp -d)}
cora=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/../shared/datasets/cora/raw
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

run() {  # BINARY OUT
  local b=$1 o=$2
  rm -rf "$o" && mkdir -p "$o"
  "$b" convert --from ogb "$cora" "$o/cora" > /dev/null
  "$b" generate community "$o/comm" --nodes 20000 --edges 200000 -f 32 -c 8 --seed 5 > /dev/null
  "$b" generate rmat "$o/rmat" --nodes 20000 --edges 200000 --seed 5 > /dev/null
  for ds in cora comm; do
    "$b" partition "$o/$ds" "$o/$ds-p2" --parts 2 > /dev/null 2>&1
    "$b" partition "$o/$ds" "$o/$ds-pg" --parts 2 --method pagraph --halo-cap 5 > /dev/null 2>&1
  done
  local t=(--no-progress --hidden 32)
  for m in sage gcn gat; do
    mpirun -np 2 --oversubscribe "$b" train "$o/cora-p2" --model $m --fanouts 10,10 --epochs 3 \
      --batch-size 64 --seed 3 "${t[@]}" --result "$o/cora-$m.json" > /dev/null 2>&1
  done
  mpirun -np 2 --oversubscribe "$b" train "$o/comm-p2" --fanouts 10,5 --epochs 2 --batch-size 256 \
    --seed 3 "${t[@]}" --result "$o/comm-sage.json" > /dev/null 2>&1
  mpirun -np 2 --oversubscribe "$b" train "$o/comm" --fanouts 10,5 --epochs 1 --batch-size 256 \
    --seed 4 --cache-policy random --cache-ratio 0.3 --fifo-rows 100 "${t[@]}" \
    --result "$o/comm-fly.json" > /dev/null 2>&1
}

run "$old" "$work/old"
run "$new" "$work/new"
python3 - "$work/old" "$work/new" <<'PY'
import filecmp, json, pathlib, sys
a, b = map(pathlib.Path, sys.argv[1:3])
timings = ("mean_epoch_s",)
extra_timings = ("method_report", "generate_s", "write_s", "import_s")
bad = n = 0
for f in sorted(p for p in a.rglob("*") if p.is_file()):
    g = b / f.relative_to(a)
    n += 1
    if not g.exists():
        bad += 1; print("MISSING", g); continue
    if f.suffix == ".json":
        ja, jb = json.loads(f.read_text()), json.loads(g.read_text())
        for j in (ja, jb):
            for k in timings: j.pop(k, None)
            for rec in j.get("history", []):
                if isinstance(rec, dict): rec.pop("epoch_s", None)
            if isinstance(j.get("extra"), dict):
                for k in extra_timings: j["extra"].pop(k, None)
        keys = set(ja) | set(jb)
        diff = {k: (ja.get(k), jb.get(k)) for k in keys if ja.get(k) != jb.get(k)}
        if diff:
            bad += 1; print("DIFF", f.relative_to(a), diff)
    elif not filecmp.cmp(f, g, shallow=False):
        bad += 1; print("DIFF", f.relative_to(a))
print(f"{n} files compared, {bad} differ ({a} vs {b})")
sys.exit(1 if bad else 0)
PY
