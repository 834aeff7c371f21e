#!/usr/bin/env bash
# Sets up (dependencies + build) and runs the whole test suite: unit and multi-rank tests (ctest),
# the fuzz smoke run, and the python tests once they exist.
# Usage: scripts/test.sh            (set DSP_FUZZ_SECONDS=0 to skip the fuzz run)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
bash scripts/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "test.sh: running ctest"
(cd build && ctest --output-on-failure -j 2 --timeout 600)
if [[ -x scripts/fuzz.sh && "${DSP_FUZZ_SECONDS:-20}" != "0" ]]; then
  echo "test.sh: fuzzing each target for ${DSP_FUZZ_SECONDS:-20} s"
  bash scripts/fuzz.sh "${DSP_FUZZ_SECONDS:-20}"
fi
echo "test.sh: all tests passed"
