#!/usr/bin/env bash
# GPU check of the CUDA build: one command on a GPU machine (the device tool's `run`), e.g.
#
#   run(command="bash scripts/gpu-check.sh", carry=[".gpu-deps"], timeout_s=600)
#
# 1. Unpacks the Debian packages the device image lacks (.gpu-deps/*.deb, fetched here with
#    `scripts/gpu-check.sh --fetch`; ~6 MB) into /tmp/dsp-deps with dpkg -x (never into /):
#    fmt, nlohmann-json, CLI11, Random123, gtest, METIS, OpenMPI (headers + libmpi and the libraries
#    it loads; single-rank runs never call MPI_Init), zlib headers.
# 2. Configures build-gpu/ with -DDSP_WITH_CUDA=ON against the image's CUDA torch
#    (python3 -c 'import torch; print(torch.utils.cmake_prefix_path)'), for sm_90 (DSP_CUDA_ARCHS),
#    and builds the GPU test targets with every core. With DSP_GPU_PREBUILT=<dir> (binaries packed
#    here by `scripts/gpu-check.sh --pack` from scripts/build-cuda.sh's build, carried as well) it
#    skips the build and runs those, with the image's torch libraries (the same torch 2.11.0+cu130).
# 3. Runs: test_cuda (RNG, sampling for every scheme and relabelling vs the CPU sampler, gather vs
#    features[ids]); compute-sanitizer memcheck on the sampling / relabel / gather tests;
#    test_csp's CPU-side check of the shared logic; cuda_bench (GPU vs CPU sampling and gather);
#    test_cuda_train (GraphSAGE on Cora on the GPU; DSP_GPU_MODELS=all adds GCN and GAT).
# 4. Prints a short table last. Full logs go to $OUT (they come back with the reply).
#
# Here (no GPU): `--fetch` downloads the .debs; `--pack` copies the build-cuda/ test binaries to
# .gpu-prebuilt/; DSP_GPU_CHECK_CONFIGURE_ONLY=1 stops after the configure step (a local dry run of
# steps 1-2 with DSP_GPU_PYTHON=.venv-cuda/bin/python).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
debs=(libfmt-dev libfmt9 nlohmann-json3-dev libcli11-dev librandom123-dev libgtest-dev libmetis-dev
      libmetis5 libopenmpi-dev libopenmpi3 libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7
      zlib1g-dev)
bins=(test_cuda cuda_bench test_csp test_cuda_train)

if [[ "${1:-}" == "--fetch" ]]; then
  mkdir -p .gpu-deps && cd .gpu-deps && apt-get download "${debs[@]}" && du -sh . && exit 0
  exit 1
fi
if [[ "${1:-}" == "--pack" ]]; then
  src="${DSP_CUDA_BUILD_DIR:-build-cuda}/tests"
  rm -rf .gpu-prebuilt && mkdir -p .gpu-prebuilt
  for b in "${bins[@]}"; do
    [[ -x "$src/$b" ]] && strip -o ".gpu-prebuilt/$b" "$src/$b"
  done
  du -sh .gpu-prebuilt && ls .gpu-prebuilt
  exit 0
fi

OUT="${OUT:-$here/out/gpu-check}"
mkdir -p "$OUT"
declare -a rows=()
row() { rows+=("$(printf '%-34s %-5s %s' "$1" "$2" "$3")"); }
elapsed() { echo "$(( $(date +%s) - $1 )) s"; }
table() {
  echo
  echo "==== dsp gpu-check ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)) ===="
  printf '%-34s %-5s %s\n' step result detail
  for r in "${rows[@]}"; do echo "$r"; done
}
trap table EXIT

# ---- 1. dependencies ----------------------------------------------------------------------------
D=/tmp/dsp-deps
ML=$D/usr/lib/x86_64-linux-gnu
t=$(date +%s)
if ls .gpu-deps/*.deb >/dev/null 2>&1; then
  mkdir -p "$D"
  for f in .gpu-deps/*.deb; do dpkg -x "$f" "$D" || { row deps FAIL "dpkg -x $f"; exit 1; }; done
  row "unpack .gpu-deps ($(ls .gpu-deps/*.deb | wc -l) debs)" ok "$(elapsed $t)"
else
  row "unpack .gpu-deps" WARN "no .debs carried: relying on the image"
fi
export LD_LIBRARY_PATH="$ML:$ML/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
PY="${DSP_GPU_PYTHON:-python3}"
torch_prefix="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)"
torch_lib="$("$PY" -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)"
torch_ver="$("$PY" -c 'import torch; print(torch.__version__, torch.cuda.is_available())' 2>/dev/null)"
[[ -n "$torch_prefix" ]] || { row torch FAIL "$PY cannot import torch"; exit 1; }
row "torch ($PY)" ok "$torch_ver"
export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$torch_lib"
cuda="${CUDA_HOME:-/usr/local/cuda}"
[[ -x "$cuda/bin/nvcc" ]] || cuda="$(dirname "$(dirname "$(command -v nvcc)")")"
export PATH="$cuda/bin:$PATH"

# ---- 2. build -----------------------------------------------------------------------------------
B="${DSP_GPU_BUILD_DIR:-build-gpu}/tests"
if [[ -n "${DSP_GPU_PREBUILT:-}" ]]; then
  B="$DSP_GPU_PREBUILT"
  row "prebuilt binaries" ok "$B"
else
  t=$(date +%s)
  zlib=()
  if [[ ! -f /usr/include/zlib.h ]]; then
    # zlib1g-dev's libz.so points at an absolute path; link the image's runtime library directly.
    zlib=(-DZLIB_INCLUDE_DIR="$D/usr/include"
          -DZLIB_LIBRARY="$(ls /usr/lib/x86_64-linux-gnu/libz.so.1 /lib/x86_64-linux-gnu/libz.so.1 2>/dev/null | head -1)")
  fi
  gen=()
  command -v ninja >/dev/null && [[ ! -f "${DSP_GPU_BUILD_DIR:-build-gpu}/CMakeCache.txt" ]] && gen=(-G Ninja)
  export CUDAToolkit_ROOT="$cuda" CUDACXX="$cuda/bin/nvcc"
  if ! cmake -S . -B "${DSP_GPU_BUILD_DIR:-build-gpu}" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
       -DDSP_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${DSP_CUDA_ARCHS:-90}" \
       -DCMAKE_CUDA_COMPILER="$cuda/bin/nvcc" -DCUDAToolkit_ROOT="$cuda" \
       -DCMAKE_PREFIX_PATH="$torch_prefix;$D/usr" -DDSP_WITH_PYTHON=OFF \
       -DMPI_SKIP_COMPILER_WRAPPER=ON -DMPI_C_HEADER_DIR="$ML/openmpi/include" \
       -DMPI_C_LIB_NAMES=mpi -DMPI_mpi_LIBRARY="$ML/libmpi.so.40" "${zlib[@]}" \
       >"$OUT/configure.log" 2>&1; then
    row configure FAIL "see configure.log"; tail -n 40 "$OUT/configure.log"; exit 1
  fi
  row configure ok "$(elapsed $t)"
  [[ "${DSP_GPU_CHECK_CONFIGURE_ONLY:-0}" == 1 ]] && exit 0
  t=$(date +%s)
  if ! cmake --build "${DSP_GPU_BUILD_DIR:-build-gpu}" -j "$(nproc)" --target "${bins[@]}" \
       >"$OUT/build.log" 2>&1; then
    row build FAIL "see build.log"; grep -E "error" "$OUT/build.log" | head -n 30; tail -n 20 "$OUT/build.log"
    exit 1
  fi
  row "build -j$(nproc)" ok "$(elapsed $t)"
fi

# ---- 3. tests and benchmarks ------------------------------------------------------------------
status=0
gtest_summary() {  # "<passed> passed, <failed> failed, <skipped> skipped" of a gtest log
  local p f s
  p=$(grep -oE '\[  PASSED  \] [0-9]+' "$1" | grep -oE '[0-9]+$' | tail -1)
  f=$(grep -cE '^\[  FAILED  \] [A-Za-z]' "$1")
  s=$(grep -oE '\[  SKIPPED \] [0-9]+' "$1" | grep -oE '[0-9]+$' | tail -1)
  echo "${p:-0} passed, ${f:-0} failed, ${s:-0} skipped"
}
run_gtest() {  # name log binary args...
  local name=$1 log=$2 t; shift 2
  t=$(date +%s)
  if "$@" >"$OUT/$log" 2>&1; then
    row "$name" ok "$(gtest_summary "$OUT/$log"), $(elapsed $t)"
  else
    row "$name" FAIL "$(gtest_summary "$OUT/$log"), $(elapsed $t), see $log"; status=1
    grep -E '^\[  FAILED  \]|Failure|error' "$OUT/$log" | head -n 20
  fi
}
nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || true

run_gtest "test_cuda (kernels vs CPU)" test_cuda.log "$B/test_cuda"
if command -v compute-sanitizer >/dev/null; then
  t=$(date +%s)
  if compute-sanitizer --tool memcheck --error-exitcode 3 --leak-check no "$B/test_cuda" \
       --gtest_filter='CudaSampling.*:CudaRelabel.*:CudaGather.*' >"$OUT/memcheck.log" 2>&1; then
    row "memcheck (sample/relabel/gather)" ok "$(grep -m1 -oE 'ERROR SUMMARY: [0-9]+ errors' "$OUT/memcheck.log"), $(elapsed $t)"
  else
    row "memcheck (sample/relabel/gather)" FAIL "$(grep -m1 -oE 'ERROR SUMMARY: [0-9]+ errors' "$OUT/memcheck.log"), see memcheck.log"
    status=1
  fi
else
  row memcheck SKIP "compute-sanitizer not on PATH"
fi
run_gtest "test_csp (shared logic, CPU)" test_csp.log "$B/test_csp" \
  --gtest_filter='GpuPathOnHost.*:SharedKernels.*'
t=$(date +%s)
if "$B/cuda_bench" ${DSP_GPU_BENCH_ARGS:-} >"$OUT/bench.log" 2>&1; then
  while read -r _ name value unit; do row "  $name" "" "$value $unit"; done < <(grep '^bench ' "$OUT/bench.log")
  row "cuda_bench" ok "$(elapsed $t)"
else
  row "cuda_bench" FAIL "see bench.log"; tail -n 5 "$OUT/bench.log"; status=1
fi
if [[ -x "$B/test_cuda_train" ]]; then
  filter='*sage*'
  [[ "${DSP_GPU_MODELS:-sage}" == all ]] && filter='*'
  run_gtest "Cora on GPU ($filter)" cora_gpu.log "$B/test_cuda_train" --gtest_filter="$filter"
  while read -r line; do row "  ${line%% mean*}" "" "mean test ${line##*=}"; done < \
    <(grep -oE 'model=[a-z]+ mean test=[0-9.]+' "$OUT/cora_gpu.log")
else
  row "Cora on GPU" SKIP "test_cuda_train not built (needs a CUDA LibTorch)"
fi
exit $status
