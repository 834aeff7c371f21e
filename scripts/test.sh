#!/usr/bin/env bash
# Sets up (dependencies + build) and runs the whole test suite: unit and multi-rank tests (ctest),
# the fuzz smoke run, the ASan+UBSan unit tests, and the python tests (tests/python, pytest).
# Usage: scripts/test.sh   (DSP_FUZZ_SECONDS=0 skips fuzzing, DSP_SANITIZE_TESTS=0 the ASan build)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
# The CUDA sources compile for one architecture here (CUDAARCHS, unless set; a build for users
# compiles sm_80 and sm_90): no kernel runs on this machine, and nvcc's device passes are about a
# fifth of a cold build's compile time. The wheel of test-python.sh inherits it, so its objects
# are build/'s (ccache).
export CUDAARCHS="${CUDAARCHS:-90}"
bash scripts/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "test.sh: running ctest"
ctest_log="$(mktemp)"
(cd build && ctest --output-on-failure -j 2 --timeout 600) 2>&1 | tee "$ctest_log"
# A test that could not run here (a CUDA suite without a GPU, network namespaces without root) is
# reported skipped by ctest, never passed: say how many, and which.
skipped=$(grep -cE '^[[:space:]]*[0-9]+ - .* \(Skipped\)$' "$ctest_log" || true)
echo "test.sh: ctest skipped ${skipped} test(s) (not run here, not counted as passed)"
grep -E '^[[:space:]]*[0-9]+ - .* \(Skipped\)$' "$ctest_log" | sed -E 's/^[[:space:]]*[0-9]+ - /  skipped: /' | head -n 20 || true
rm -f "$ctest_log"
if [[ -x scripts/fuzz.sh && "${DSP_FUZZ_SECONDS:-20}" != "0" ]]; then
  echo "test.sh: fuzzing each target for ${DSP_FUZZ_SECONDS:-20} s"
  bash scripts/fuzz.sh "${DSP_FUZZ_SECONDS:-20}"
fi
if [[ "${DSP_SANITIZE_TESTS:-1}" != "0" ]]; then
  echo "test.sh: unit tests under ASan + UBSan"
  bash scripts/sanitize.sh
fi
if grep -q '^DSP_WITH_PYTHON:BOOL=ON' build/CMakeCache.txt; then
  # The package as pip installs it: a wheel in a fresh venv, tests/python against it.
  echo "test.sh: python tests"
  bash scripts/test-python.sh
else
  echo "test.sh: python module not configured (DSP_WITH_PYTHON=OFF or no pybind11): skipped"
fi
echo "test.sh: all tests passed"
