#!/usr/bin/env bash
# The test suite, in three tiers (labels in tests/CMakeLists.txt, pytest markers in
# tests/python/conftest.py); every run ends with each stage's wall time and the 20 slowest tests.
# Usage: scripts/test.sh [--quick | --gate | --full]
#   --gate   the default and what CI runs (.ci/run): installs the dependencies, builds build/ (the
#            CUDA sources too, for sm_90 only, so that they keep compiling), ctest's quick and gate
#            tests, the fuzz targets 10 s each, ASan + UBSan over the modules that parse input and
#            move bytes (core, graph, ccc, layout), and pytest without the `full` tests against
#            the wheel built from build/'s objects.
#   --quick  a developer's loop, after an incremental build of build/ (no apt, no configure):
#            ctest's quick tests (unit cases without whole jobs, the MPI suites at 2 ranks) and
#            pytest without `slow` on build/python; no fuzz, no sanitizers, no wheel.
#   --full   everything: the gate's stages, then every ctest test (every rank count, soak, chaos
#            --long, network namespaces), fuzz 30 s a target, ASan + UBSan over every library but
#            the trainer, and every pytest test (torchrun, DGL and PyG interop where they install).
# DSP_FUZZ_SECONDS=0 skips fuzzing, DSP_SANITIZE_TESTS=0 the sanitizer build.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
tier=gate
case "${1:-}" in
  --quick) tier=quick ;; --gate | "") tier=gate ;; --full) tier=full ;;
  *) echo "usage: scripts/test.sh [--quick | --gate | --full]" >&2; exit 2 ;;
esac
source scripts/ci/stages.sh
# The CUDA sources compile for one architecture here (CUDAARCHS, unless set; a build for users
# compiles sm_80 and sm_90): no kernel runs on this machine, and nvcc's device passes are about a
# fifth of a cold build's compile time. The wheel of test-python.sh inherits it, so its objects
# are build/'s (ccache).
export CUDAARCHS="${CUDAARCHS:-90}"
# Paths under the checkout enter ccache's hashes relative to the build directory, so the wheel's
# tree (build-<tag>/, scripts/ci/test-python.sh) finds build/'s objects: a unity source lives in
# its build tree, and with absolute paths every one of them missed (the wheel took 157 s, not 40).
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$here}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
reports="$here/build/test-reports"

run_ctest() {  # ctest over the labels of this tier; skipped tests are named, never counted passed
  local log; log="$(mktemp)"
  local rc=0
  (cd build && ctest --output-on-failure -j 2 --timeout 900 --output-junit "$reports/ctest.xml" \
     "$@") 2>&1 | tee "$log" || rc=$?
  local skipped
  skipped=$(grep -cE '^[[:space:]]*[0-9]+ - .* \(Skipped\)$' "$log" || true)
  echo "test.sh: ctest skipped ${skipped} test(s) (not run here, not counted as passed)"
  grep -E '^[[:space:]]*[0-9]+ - .* \(Skipped\)$' "$log" | sed -E 's/^[[:space:]]*[0-9]+ - /  skipped: /' | head -n 20 || true
  rm -f "$log"
  return $rc
}

run_pytest_build() {  # tests/python against build/python (quick tier: no wheel)
  PYTHONPATH="$here/build/python" /usr/bin/python3 -m pytest -q -p no:cacheprovider -rs \
    --junitxml="$reports/pytest.xml" "$@" tests/python
}

if [[ $tier == quick ]]; then
  [[ -f build/build.ninja ]] || { echo "test.sh --quick: no build/ yet: run scripts/setup.sh (or scripts/test.sh) first" >&2; exit 1; }
  stage "incremental build" cmake --build build -j "$(nproc)"
  rm -rf "$reports" && mkdir -p "$reports"
  stage "ctest (quick)" run_ctest -L '^quick$'
  if grep -q '^DSP_WITH_PYTHON:BOOL=ON' build/CMakeCache.txt; then
    stage "pytest (not slow)" run_pytest_build -m "not slow and not full"
  else
    echo "test.sh: python module not configured (DSP_WITH_PYTHON=OFF): pytest skipped"
  fi
  echo "test.sh: the quick tier passed"
  exit 0
fi

# The CUDA sources compile wherever nvcc is (a GPU or not), so a change that breaks them fails here.
cuda="${DSP_WITH_CUDA:-}"
if [[ -z "$cuda" ]]; then
  cuda=OFF
  if command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]]; then cuda=ON; fi
  [[ $cuda == OFF ]] && echo "test.sh: nvcc not found: the CUDA sources are not compiled in this run"
fi
# Tests and the Python module asked for by name: a build/ that scripts/demo.sh configured first
# has neither.
stage "setup (apt + build)" bash scripts/setup.sh -DDSP_WITH_CUDA="$cuda" -DDSP_BUILD_TESTS=ON \
  -DDSP_WITH_PYTHON=ON
rm -rf "$reports" && mkdir -p "$reports"
labels='^(quick|gate|cuda)$'
[[ $tier == full ]] && labels='.'
stage "ctest ($tier)" run_ctest -L "$labels"
fuzz_seconds="${DSP_FUZZ_SECONDS:-10}"
[[ $tier == full ]] && fuzz_seconds="${DSP_FUZZ_SECONDS:-30}"
if [[ "$fuzz_seconds" != "0" ]]; then
  stage "fuzz (${fuzz_seconds} s a target)" bash scripts/ci/fuzz.sh "$fuzz_seconds"
fi
if [[ "${DSP_SANITIZE_TESTS:-1}" != "0" ]]; then
  scope=io
  [[ $tier == full ]] && scope=all
  stage "ASan + UBSan ($scope)" bash scripts/ci/sanitize.sh --scope "$scope" \
    --output-junit "$reports/ctest-asan.xml"
fi
if grep -q '^DSP_WITH_PYTHON:BOOL=ON' build/CMakeCache.txt; then
  # The package as pip installs it: a wheel in a venv, tests/python against it.
  markers="not full"
  [[ $tier == full ]] && markers=""
  stage "wheel + pytest" bash scripts/ci/test-python.sh --junitxml="$reports/pytest.xml" \
    ${markers:+-m "$markers"}
else
  echo "test.sh: python module not configured (DSP_WITH_PYTHON=OFF or no pybind11): skipped"
fi
echo "test.sh: the $tier tier passed"
