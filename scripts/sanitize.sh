#!/usr/bin/env bash
# Builds the unit tests with AddressSanitizer + UndefinedBehaviorSanitizer (DSP_SANITIZE=ON, into
# build-asan/) and runs them. The LibTorch trainer is left out (its tests take minutes without
# sanitizers; LibTorch itself is not instrumented). Leak checking is off: OpenMPI's own allocations
# are reported as leaks.
# -O1 -g1 (ASan's recommended level, line tables for the reports): half the compile time of -O2 -g;
# the test sources at -O0 (tests/CMakeLists.txt, DSP_TEST_OPTIMIZE).
# Usage: scripts/sanitize.sh [ctest args...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
log="$(mktemp)"
if ! { cmake -S . -B build-asan -G Ninja -DDSP_SANITIZE=ON -DDSP_WITH_CUDA=OFF -DDSP_WITH_TRAIN=OFF \
         -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
         -DDSP_TEST_OPTIMIZE=-O0 &&
       cmake --build build-asan -j "$(nproc)"; } >"$log" 2>&1; then
  echo "sanitize.sh: build failed:" >&2; tail -n 60 "$log" >&2; exit 1
fi
rm -f "$log"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd build-asan && ctest --output-on-failure -j 2 --timeout 900 "$@"
