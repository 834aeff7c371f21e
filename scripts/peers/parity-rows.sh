#!/usr/bin/env bash
# The standard rows of docs/benchmarks.md's accuracy parity table (dsp against DGL 2.1,
# scripts/peers/parity.py): each graph with its models, seeds and epochs, one row at a time, one
# thread, every run's record in OUT/<row>.json and the summary in OUT/<row>.md. Not part of CI
# (hours on this machine; the DGL venv: /work/shared/peerbench/README.md).
#
# Usage: scripts/peers/parity-rows.sh [ROW...]   (default: every row)
#   rows: cora, photo, community, facebook, facebook-gat
# Env: DSP_PEER_VENV (the DGL venv; default ~/.cache/dsp/dgl-venv), DSP (default build/tools/dsp),
#      DATASETS (default ../shared/datasets), OUT (default out/parity), SEEDS (override every row's
#      seeds, e.g. 0 for a smoke run), EPOCHS (override every row's epochs).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$here"
venv="${DSP_PEER_VENV:-$HOME/.cache/dsp/dgl-venv}"
dsp="${DSP:-build/tools/dsp}"
datasets="${DATASETS:-../shared/datasets}"
out="${OUT:-out/parity}"
ten=0,1,2,3,4,5,6,7,8,9
five=0,1,2,3,4
[[ -x "$venv/bin/python" ]] || { echo "parity-rows: no DGL venv at $venv" >&2; exit 2; }
mkdir -p "$out"

# data NAME: the dataset directory of a row, converted or generated once into OUT.
data() {
  local dir="$out/data/$1"
  if [[ ! -f "$dir/dataset.json" ]]; then
    case "$1" in
      community) "$dsp" generate community "$dir" -n 20000 -m 200000 -f 32 -c 8 -k 16 \
                   --train-frac 0.01 --valid-frac 0.02 -s 4 >/dev/null ;;
      *) "$dsp" convert --from ogb "$datasets/$1" "$dir" >/dev/null ;;
    esac
  fi
  echo "$dir"
}

# run ROW DATASET SEEDS EPOCHS ARGS...: one row of the table.
run() {
  local row="$1" dir="$2" seeds="${SEEDS:-$3}" epochs="${EPOCHS:-$4}"
  shift 4
  echo "parity-rows: $row (seeds $seeds, $epochs epochs)" >&2
  OMP_NUM_THREADS=1 "$venv/bin/python" scripts/peers/parity.py "$dir" --dsp "$dsp" --threads 1 \
    --seeds "$seeds" --epochs "$epochs" --fanouts 10,10 --batch 32 --dsp-args "--eval full" \
    --out "$out/$row.json" --markdown "$out/$row.md" "$@"
}

rows=("$@")
((${#rows[@]})) || rows=(cora photo community facebook facebook-gat)
for row in "${rows[@]}"; do
  case "$row" in
    cora) run cora "$(data cora)" "$five" 100 --models sage,gcn,gat --hidden 64 ;;
    photo) run photo "$(data amazon-photo)" "$five" 100 --models sage,gcn,gat --hidden 64 ;;
    community) run community "$(data community)" "$five" 30 --models sage,gcn,gat --hidden 64 ;;
    # Facebook Page-Page: SAGE and GCN as the other rows; GAT as its issue measured it, 8 heads of
    # 8 (one output head), over 10 seeds.
    facebook) run facebook "$(data facebook)" "$ten" 100 --models sage,gcn --hidden 64 ;;
    facebook-gat) run facebook-gat "$(data facebook)" "$ten" 100 --models gat --hidden 8 --heads 8 ;;
    *) echo "parity-rows: unknown row '$row' (cora, photo, community, facebook, facebook-gat)" >&2
       exit 2 ;;
  esac
done
