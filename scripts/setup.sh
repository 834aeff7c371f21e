#!/usr/bin/env bash
# Installs the Debian packages of dsp's stack (idempotent), then configures and builds into build/.
# Usage: scripts/setup.sh [--deps-only | --target T] [extra cmake args...]
#   --target T  builds only T and what it needs (scripts/demo.sh: the CLI, `dsp`): installs only the
#               packages that build it (not the test stack: GoogleTest, clang, pybind11, pytest)
#               and, in a new build/, configures without the tests
# Quiet unless something fails: the full log of each step is printed only on failure.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
deps_only=0
targets=()
if [[ "${1:-}" == "--deps-only" ]]; then deps_only=1; shift; fi
if [[ "${1:-}" == "--target" ]]; then targets=(--target "$2"); shift 2; fi

pkgs=(  # what builds the library and the CLI
  build-essential cmake ninja-build ccache pkg-config git
  libtorch-dev python3-torch python3-numpy python3-matplotlib libopenblas0-pthread
  libopenmpi-dev openmpi-bin
  libmetis-dev libhwloc-dev libfmt-dev
  librandom123-dev libcli11-dev nlohmann-json3-dev zlib1g-dev
)
test_pkgs=(  # the tests, the Python module, the fuzz and sanitizer builds
  python3-pytest libgtest-dev libgmock-dev
  pybind11-dev python3-dev python3-venv python3-pip
  clang-14 libclang-rt-14-dev libomp-14-dev
)
((${#targets[@]})) || pkgs+=("${test_pkgs[@]}")

run_quiet() {  # run a command, show its log only if it fails
  local log; log="$(mktemp)"
  if ! "$@" >"$log" 2>&1; then
    echo "setup.sh: '$*' failed:" >&2; tail -n 60 "$log" >&2; rm -f "$log"; return 1
  fi
  rm -f "$log"
}

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
if ((${#missing[@]})); then
  echo "setup.sh: installing ${#missing[@]} Debian packages..."
  run_quiet $SUDO apt-get update -q
  run_quiet env DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# LibTorch calls BLAS through Debian's alternatives; the reference BLAS is several times slower than
# OpenBLAS for the dense layers of the models, so make sure OpenBLAS is the one selected.
if [[ -e /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 ]] &&
   ! update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | grep -q "^Value: .*openblas"; then
  ${SUDO:-} update-alternatives --set libblas.so.3-x86_64-linux-gnu \
    /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 >/dev/null 2>&1 || true
fi
((deps_only)) && exit 0

cd "$here"
echo "setup.sh: configuring and building into build/ ..."
configure=()
if ((${#targets[@]})) && [[ ! -f build/CMakeCache.txt ]]; then configure=(-DDSP_BUILD_TESTS=OFF); fi
run_quiet cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${configure[@]}" "$@"
run_quiet cmake --build build -j "$(nproc)" "${targets[@]}"
echo "setup.sh: done (binary: build/tools/dsp)"
