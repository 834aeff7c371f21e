#!/usr/bin/env bash
# Sets up dsp and runs the main job on the embedded default: a generated community graph (100k
# nodes, 1M edges, 16 classes; no download, nothing outside the repo), trained with GraphSAGE on 2
# ranks (mpirun) through collective sampling and the three-worker pipeline. Prints the accuracy;
# the generator's attainable bound is printed first, for comparison. Builds only the CLI (no
# tests; the CUDA backends only where a GPU is, or with DSP_WITH_CUDA=ON).
# Usage: scripts/demo.sh [OUT_DIR=out/demo]   (4 minutes on a fresh 2-core Debian, apt and the
# build included, most of it compiling; docs/benchmarks.md, "The test tiers and the demo")
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
out="${1:-out/demo}"
start=$SECONDS
bash scripts/setup.sh --target dsp ${DSP_WITH_CUDA:+-DDSP_WITH_CUDA=$DSP_WITH_CUDA}
echo "demo: set up in $((SECONDS - start)) s"
dsp=build/tools/dsp
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$dsp" generate community "$out/community" --overwrite
"$dsp" partition "$out/community" "$out/community-2parts" --parts 2 --overwrite
mpirun --oversubscribe -np 2 "$dsp" train "$out/community-2parts" --model sage --fanouts 10,5 \
  --hidden 64 --batch-size 256 --epochs 8 --seed 0 --metrics "$out/metrics.jsonl"
/usr/bin/python3 scripts/bench/plot_metrics.py "$out/metrics.jsonl" "$out/metrics.png" >/dev/null &&
  echo "demo: per-epoch metrics in $out/metrics.jsonl, curves in $out/metrics.png"
echo "demo: done in $((SECONDS - start)) s"
