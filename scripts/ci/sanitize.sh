#!/usr/bin/env bash
# Builds tests with AddressSanitizer + UndefinedBehaviorSanitizer (DSP_SANITIZE=ON, into
# build-asan/) and runs them.
#   --scope io (the gate's): the modules that parse input and move bytes, core, graph, ccc and
#     layout (readers, partition files, the feature store, the communicators), their unit and MPI
#     tests and the communicators' fault probes; tests/graph runs build/'s CLI (DSP_TEST_CLI), so no
#     other library is compiled. The quick and gate tests of those modules, but their *_jobs_*
#     shards (whole CLI runs: their work is in build/'s CLI, which is not instrumented).
#   --scope all (the full tier's): every library but the LibTorch trainer (its tests take minutes
#     without sanitizers; LibTorch itself is not instrumented), every test of the build.
# Leak checking is off: OpenMPI's own allocations are reported as leaks.
# -O1 -g1 (ASan's recommended level, line tables for the reports): half the compile time of -O2 -g;
# the test sources at -O0 (tests/CMakeLists.txt, DSP_TEST_OPTIMIZE). One source at a time
# (DSP_UNITY_BUILD=OFF): the one build that shows a source missing an include of its own.
# Usage: scripts/ci/sanitize.sh [--scope io|all] [ctest args...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$here"
scope=all
if [[ "${1:-}" == "--scope" ]]; then scope="$2"; shift 2; fi
io_modules="core;graph;ccc;layout"
case "$scope" in
  io)
    [[ -x build/tools/dsp ]] || { echo "sanitize.sh --scope io: needs build/tools/dsp (scripts/setup.sh)" >&2; exit 1; }
    extra=(-DDSP_TEST_MODULES="$io_modules" -DDSP_TEST_CLI="$here/build/tools/dsp")
    targets=(--target test_core test_graph test_ccc test_ccc_mpi test_layout test_layout_mpi
             ccc_fault_probe ccc_timeout_probe)
    select=(-L '^(quick|gate)$' -E '_jobs_') ;;
  all) extra=(-DDSP_TEST_MODULES= -DDSP_TEST_CLI=); targets=(); select=() ;;
  *) echo "usage: scripts/ci/sanitize.sh [--scope io|all] [ctest args...]" >&2; exit 2 ;;
esac
log="$(mktemp)"
if ! { cmake -S . -B build-asan -G Ninja -DDSP_SANITIZE=ON -DDSP_WITH_CUDA=OFF -DDSP_WITH_TRAIN=OFF \
         -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DDSP_UNITY_BUILD=OFF \
         -DDSP_TEST_OPTIMIZE=-O0 "${extra[@]}" &&
       cmake --build build-asan -j "$(nproc)" "${targets[@]}"; } >"$log" 2>&1; then
  echo "sanitize.sh: build failed:" >&2; tail -n 60 "$log" >&2; exit 1
fi
rm -f "$log"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd build-asan && ctest --output-on-failure -j 2 --timeout 900 "${select[@]}" "$@"
