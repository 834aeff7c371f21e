#!/usr/bin/env bash
# The full CUDA build (DSP_WITH_CUDA=ON, kernels for sm_80 + sm_90, the trainer against a CUDA
# LibTorch) on a machine without a GPU: everything compiles and links here, so a GPU lease is spent
# running (scripts/gpu/check.sh), not building.
#
# LibTorch: PyPI's torch==2.11.0 (the cu130 build, the device image's version, ~5 GB with its
# nvidia-* CUDA libraries) in a venv in .venv-cuda/ (ignored), created on first use and reused.
# DSP_TORCH_PREFIX=<dir with TorchConfig.cmake> uses another LibTorch instead (no venv).
#
# Prerequisites: the Debian packages of scripts/setup.sh --deps-only, the CUDA toolkit (nvcc, CUB,
# NCCL) under /usr/local/cuda (CUDA_HOME overrides) and python3 with venv (Debian: python3-venv).
#
# Usage: scripts/gpu/build-cuda.sh [-jN] [extra cmake args...]   (default -j1: a shared 2-core box)
#        scripts/gpu/build-cuda.sh --venv-only                  (only the torch venv)
# Env: DSP_CUDA_BUILD_DIR (default build-cuda), DSP_CUDA_ARCHS (default "80;90"), DSP_CUDA_TARGETS
# (space-separated targets to build; default all), DSP_CUDA_PRESET (a configure preset of
# CMakePresets.json, as gpu-kit: it states the build type, CUDA and its architectures, and this
# script adds only this machine's paths; DSP_CUDA_ARCHS is then not used).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$here"
jobs=1
if [[ "${1:-}" == -j* ]]; then jobs="${1#-j}"; shift; fi
build="${DSP_CUDA_BUILD_DIR:-build-cuda}"
archs="${DSP_CUDA_ARCHS:-80;90}"
cuda="${CUDA_HOME:-/usr/local/cuda}"
venv="$here/.venv-cuda"
[[ -x "$cuda/bin/nvcc" ]] || { echo "build-cuda.sh: no nvcc under $cuda (set CUDA_HOME)" >&2; exit 1; }

venv_only=0
[[ "${1:-}" == --venv-only ]] && venv_only=1

t0=$(date +%s)
if [[ -n "${DSP_TORCH_PREFIX:-}" ]]; then
  torch_prefix="$DSP_TORCH_PREFIX"
else
  if [[ ! -x "$venv/bin/python" ]]; then
    py=/usr/bin/python3
    [[ -x $py ]] || py=python3
    "$py" -c 'import venv, ensurepip' 2>/dev/null ||
      { echo "build-cuda.sh: $py has no venv module (apt install python3-venv)" >&2; exit 1; }
    echo "build-cuda.sh: creating $venv ..."
    "$py" -m venv "$venv"
  fi
  if ! "$venv/bin/python" -c 'import numpy, torch, sys; sys.exit(torch.__version__.split("+")[0] != "2.11.0")' 2>/dev/null; then
    echo "build-cuda.sh: installing torch==2.11.0 (cu130, ~5 GB) and numpy into $venv ..."
    "$venv/bin/python" -m pip install -q torch==2.11.0 numpy
  fi
  torch_prefix="$("$venv/bin/python" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)"
fi
((venv_only)) && exit 0
t1=$(date +%s)

# TorchConfig finds libtorch and libc10 with a plain find_library, so the system's (Debian's
# LibTorch 1.13 in /usr/lib) would win over the prefix's: name this LibTorch's own.
torch_lib="$(cd "$torch_prefix/../../lib" && pwd)"
# Torch's CMake config looks for the CUDA toolkit itself (FindCUDAToolkit): point it at the one
# nvcc belongs to. It links the CUDA runtime libraries of the wheel by absolute path (nvidia-*).
export CUDAToolkit_ROOT="$cuda" CUDA_TOOLKIT_ROOT_DIR="$cuda" CUDACXX="$cuda/bin/nvcc"
# The build's description: a preset's, or Release with CUDA for $archs.
if [[ -n "${DSP_CUDA_PRESET:-}" ]]; then
  what=(--preset "$DSP_CUDA_PRESET")
else
  what=(-DCMAKE_BUILD_TYPE=Release -DDSP_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$archs")
  command -v ninja >/dev/null && [[ ! -f "$build/CMakeCache.txt" ]] && what+=(-G Ninja)
fi
log="$(mktemp)"
if ! cmake -S . -B "$build" "${what[@]}" \
     -DCMAKE_CUDA_COMPILER="$cuda/bin/nvcc" \
     -DCUDAToolkit_ROOT="$cuda" -DCMAKE_PREFIX_PATH="$torch_prefix" \
     -DTORCH_LIBRARY="$torch_lib/libtorch.so" -Dc10_LIBRARY="$torch_lib/libc10.so" \
     -DDSP_WITH_PYTHON=OFF "$@" >"$log" 2>&1; then
  echo "build-cuda.sh: configure failed:" >&2; tail -n 60 "$log" >&2; exit 1
fi
grep -E "^-- (dsp:|Found CUDA|Found CUDAToolkit|Found Torch|Caffe2: CUDA)" "$log" | sed 's/^/  /' || true
t2=$(date +%s)
read -r -a targets <<<"${DSP_CUDA_TARGETS:-}"
if ! cmake --build "$build" -j "$jobs" ${targets[@]:+--target "${targets[@]}"} >"$log" 2>&1; then
  echo "build-cuda.sh: build failed:" >&2; grep -E "error|Error" "$log" | head -n 40 >&2
  tail -n 40 "$log" >&2; exit 1
fi
t3=$(date +%s)
rm -f "$log"
echo "build-cuda.sh: done in $build/ (torch: $((t1 - t0)) s, configure: $((t2 - t1)) s," \
     "build -j$jobs: $((t3 - t2)) s)"
