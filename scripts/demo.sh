#!/usr/bin/env bash
# Sets up dsp and runs the main job on the embedded default: a generated community graph (no
# download, nothing outside the repo). Training lands with the training issue; today the demo
# generates the graph, validates it and prints its statistics.
# Usage: scripts/demo.sh [OUT_DIR=out/demo]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
out="${1:-out/demo}"
bash scripts/setup.sh
dsp=build/tools/dsp
"$dsp" generate community "$out/community" --overwrite
"$dsp" info "$out/community"
