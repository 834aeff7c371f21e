#!/usr/bin/env bash
# GPU check of the CUDA build: one command per step on a GPU machine (the device tool's `run`):
#
#   run(command="bash scripts/gpu-check.sh build", carry=[".gpu-deps"], timeout_s=600)
#   run(command="bash scripts/gpu-check.sh test", carry=[".gpu-deps"], timeout_s=600)
#
# (`all` does both in one call.) The image has nvcc, CMake, ninja, Python with a CUDA torch and NCCL
# only as the nvidia-nccl wheel (libnccl.so.2, no libnccl.so), no Debian packages and no internet:
#   --fetch      here: downloads the Debian packages the image lacks into .gpu-deps/ (~8 MB):
#                fmt, nlohmann-json, CLI11, Random123, gtest, METIS, OpenMPI, hwloc, zlib headers;
#   --dry-run    here: steps 1-2 against PyPI's torch 2.11 (cu130) in .venv-cuda (scripts/build-cuda.sh
#                makes it) with NCCL taken only from its wheel, so the device cannot fail on what
#                can be checked here;
#   build        unpacks .gpu-deps with dpkg -x into /tmp/dsp-deps (never into /), configures
#                build-gpu/ (-DDSP_WITH_CUDA=ON, the image's torch, NCCL from its wheel, sm_90) and
#                builds the test targets and the CLI with every core; the build stays on the warm
#                machine for `test`;
#   test         runs every CUDA test group (counts printed; a group that ran zero tests fails),
#                compute-sanitizer memcheck on the sampling and gather suites, GraphSAGE on Cora
#                on the GPU, and `dsp bench` sample / gather / pipeline with --device cuda on a
#                generated community graph (DSP_GPU_BENCH_NODES / _EDGES, default products-sized).
# A short table comes last (the device's reply shows the end of the output); full logs go to $OUT.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
debs=(libfmt-dev libfmt9 nlohmann-json3-dev libcli11-dev librandom123-dev libgtest-dev libmetis-dev
      libmetis5 libopenmpi-dev libopenmpi3 libhwloc-dev libhwloc15 libevent-core-2.1-7
      libevent-pthreads-2.1-7 zlib1g-dev)
targets=(dsp test_cuda test_csp_backends_cuda test_layout_backends_cuda test_csp_mpi_cuda
         test_layout_mpi_cuda test_nccl test_cuda_train)
step="${1:-all}"

if [[ "$step" == "--fetch" ]]; then
  mkdir -p .gpu-deps && cd .gpu-deps && apt-get download "${debs[@]}" && du -sh . && exit 0
  exit 1
fi
BUILD="${DSP_GPU_BUILD_DIR:-build-gpu}"
if [[ "$step" == "--dry-run" ]]; then
  export DSP_GPU_PYTHON="${DSP_GPU_PYTHON:-$here/.venv-cuda/bin/python}"
  BUILD="${DSP_GPU_BUILD_DIR:-build-gpu-dry}"
  [[ -x "$DSP_GPU_PYTHON" ]] || { echo "gpu-check: no $DSP_GPU_PYTHON (run scripts/build-cuda.sh once)" >&2; exit 1; }
fi
case "$step" in all | build | test | --dry-run) ;; *)
  echo "usage: scripts/gpu-check.sh [all|build|test|--fetch|--dry-run]" >&2; exit 2 ;;
esac

OUT="${OUT:-$here/out/gpu-check}"
mkdir -p "$OUT"
declare -a rows=()
row() { rows+=("$(printf '%-36s %-5s %s' "$1" "$2" "$3")"); }
elapsed() { echo "$(( $(date +%s) - $1 )) s"; }
table() {
  echo
  echo "==== dsp gpu-check $step ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)) ===="
  printf '%-36s %-5s %s\n' step result detail
  for r in "${rows[@]}"; do echo "$r"; done
}
trap table EXIT

# ---- 1. environment: Debian packages unpacked, torch, CUDA, NCCL from its wheel -------------------
D=/tmp/dsp-deps
ML=$D/usr/lib/x86_64-linux-gnu
t=$(date +%s)
if [[ "$step" != "--dry-run" ]] && ls .gpu-deps/*.deb >/dev/null 2>&1; then
  mkdir -p "$D"
  for f in .gpu-deps/*.deb; do dpkg -x "$f" "$D" || { row deps FAIL "dpkg -x $f"; exit 1; }; done
  row "unpack .gpu-deps ($(ls .gpu-deps/*.deb | wc -l) debs)" ok "$(elapsed $t)"
  export LD_LIBRARY_PATH="$ML:$ML/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$D/usr/bin:$PATH" OPAL_PREFIX="$D/usr/lib/x86_64-linux-gnu/openmpi"
elif [[ "$step" != "--dry-run" ]]; then
  row "unpack .gpu-deps" WARN "no .debs carried: relying on the image"
fi
PY="${DSP_GPU_PYTHON:-python3}"
torch_prefix="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)"
torch_lib="$("$PY" -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)"
torch_ver="$("$PY" -c 'import torch; print(torch.__version__, "cuda", torch.cuda.is_available())' 2>/dev/null)"
[[ -n "$torch_prefix" ]] || { row torch FAIL "$PY cannot import torch"; exit 1; }
row "torch ($PY)" ok "$torch_ver"
nccl_root="$("$PY" -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)"
if [[ -z "$nccl_root" || ! -e "$nccl_root/lib/libnccl.so.2" ]]; then
  row nccl FAIL "no nvidia.nccl wheel with lib/libnccl.so.2 next to $PY's torch"; exit 1
fi
row "nccl (wheel)" ok "$nccl_root"
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$torch_lib:$nccl_root/lib"
cuda="${CUDA_HOME:-/usr/local/cuda}"
[[ -x "$cuda/bin/nvcc" ]] || cuda="$(dirname "$(dirname "$(command -v nvcc)")")"
export PATH="$cuda/bin:$PATH"

# ---- 2. configure and build ---------------------------------------------------------------------
configure_and_build() {
  local t zlib=() mpi=() gen=()
  t=$(date +%s)
  if [[ ! -f /usr/include/zlib.h && -d "$D/usr/include" ]]; then
    # zlib1g-dev's libz.so points at an absolute path; link the image's runtime library directly.
    zlib=(-DZLIB_INCLUDE_DIR="$D/usr/include"
          -DZLIB_LIBRARY="$(ls /usr/lib/x86_64-linux-gnu/libz.so.1 /lib/x86_64-linux-gnu/libz.so.1 2>/dev/null | head -1)")
  fi
  if [[ -d "$ML/openmpi/include" ]]; then
    mpi=(-DMPI_SKIP_COMPILER_WRAPPER=ON -DMPI_C_HEADER_DIR="$ML/openmpi/include" -DMPI_C_LIB_NAMES=mpi
         -DMPI_mpi_LIBRARY="$ML/libmpi.so.40" -DMPIEXEC_EXECUTABLE="$D/usr/bin/mpiexec")
  fi
  command -v ninja >/dev/null && [[ ! -f "$BUILD/CMakeCache.txt" ]] && gen=(-G Ninja)
  export CUDAToolkit_ROOT="$cuda" CUDACXX="$cuda/bin/nvcc"
  # NCCL only from the wheel: the library and header are given, nothing is searched.
  if ! cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
       -DDSP_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${DSP_CUDA_ARCHS:-90}" \
       -DCMAKE_CUDA_COMPILER="$cuda/bin/nvcc" -DCUDAToolkit_ROOT="$cuda" \
       -DCMAKE_PREFIX_PATH="$torch_prefix;$D/usr" -DDSP_WITH_PYTHON=OFF \
       -DDSP_NCCL_LIBRARY="$nccl_root/lib/libnccl.so.2" -DDSP_NCCL_INCLUDE_DIR="$nccl_root/include" \
       "${mpi[@]}" "${zlib[@]}" >"$OUT/configure.log" 2>&1; then
    row configure FAIL "see configure.log"; tail -n 40 "$OUT/configure.log"; return 1
  fi
  if ! grep -q "dsp: NCCL $nccl_root" "$OUT/configure.log"; then
    row configure FAIL "NCCL not taken from the wheel: $(grep -m1 'dsp: NCCL' "$OUT/configure.log")"
    return 1
  fi
  row configure ok "$(elapsed $t)"
  t=$(date +%s)
  local jobs="${DSP_GPU_JOBS:-$(nproc)}"
  if ! cmake --build "$BUILD" -j "$jobs" --target "${targets[@]}" >"$OUT/build.log" 2>&1; then
    row build FAIL "see build.log"; grep -E "error" "$OUT/build.log" | head -n 30
    tail -n 20 "$OUT/build.log"; return 1
  fi
  row "build -j$jobs" ok "$(elapsed $t)"
}
if [[ "$step" == all || "$step" == build || "$step" == --dry-run ]]; then
  configure_and_build || exit 1
fi
[[ "$step" == build || "$step" == --dry-run ]] && exit 0

# ---- 3. tests and benchmarks ------------------------------------------------------------------
B="$BUILD/tests"
status=0
gtest_counts() {  # "<passed> <failed> <skipped>" summed over a (possibly multi-rank) gtest log
  local p f s
  p=$(grep -oE '\[  PASSED  \] [0-9]+ test' "$1" | grep -oE '[0-9]+' | awk '{s+=$1} END {print s+0}')
  f=$(grep -cE '^\[  FAILED  \] [A-Za-z]' "$1")
  s=$(grep -oE '\[  SKIPPED \] [0-9]+ test' "$1" | grep -oE '[0-9]+' | awk '{s+=$1} END {print s+0}')
  echo "${p:-0} ${f:-0} ${s:-0}"
}
group() {  # name log command...: a test group; fails on a non-zero exit or zero tests run
  local name=$1 log=$2 t p f s; shift 2
  t=$(date +%s)
  "$@" >"$OUT/$log" 2>&1
  local rc=$?
  read -r p f s < <(gtest_counts "$OUT/$log")
  local detail="$p passed, $f failed, $s skipped, $(elapsed $t)"
  if [[ $rc -ne 0 || $f -ne 0 ]]; then
    row "$name" FAIL "$detail, see $log"; status=1
    grep -E '^\[  FAILED  \]|Failure|error' "$OUT/$log" | head -n 10
  elif [[ $((p + f)) -eq 0 ]]; then
    row "$name" FAIL "ran zero tests ($s skipped), see $log"; status=1
  else
    row "$name" ok "$detail"
  fi
}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
MPIEXEC="$(command -v mpiexec || echo "$D/usr/bin/mpiexec")"
nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || true

group "test_cuda (RNG, registration)" test_cuda.log "$B/test_cuda"
group "sampler backends vs CPU" csp_backends.log "$B/test_csp_backends_cuda"
group "feature backends vs features[ids]" layout_backends.log "$B/test_layout_backends_cuda"
for np in 1 2; do
  group "P-invariance, $np rank(s) on the GPU" "csp_mpi_np$np.log" "$MPIEXEC" -n $np "$B/test_csp_mpi_cuda"
  group "gathers, $np rank(s) on the GPU" "layout_mpi_np$np.log" "$MPIEXEC" -n $np "$B/test_layout_mpi_cuda"
done
group "NCCL conformance, 1 rank" nccl.log "$MPIEXEC" -n 1 "$B/test_nccl"
for np in 1 2; do  # the MPI transport of device buffers (pinned staging): ranks share the GPU
  group "staged MPI conformance, $np rank(s)" "staged_np$np.log" "$MPIEXEC" -n $np "$B/test_nccl" --staged
done
if command -v compute-sanitizer >/dev/null; then
  for suite in csp_backends layout_backends; do
    t=$(date +%s)
    if compute-sanitizer --tool memcheck --error-exitcode 3 --leak-check no \
         "$B/test_${suite}_cuda" --gtest_filter='*cuda*' >"$OUT/memcheck_$suite.log" 2>&1; then
      row "memcheck $suite" ok "$(grep -m1 -oE 'ERROR SUMMARY: [0-9]+ errors' "$OUT/memcheck_$suite.log"), $(elapsed $t)"
    else
      row "memcheck $suite" FAIL "$(grep -m1 -oE 'ERROR SUMMARY: [0-9]+ errors' "$OUT/memcheck_$suite.log"), see memcheck_$suite.log"
      status=1
    fi
  done
else
  row memcheck FAIL "compute-sanitizer not on PATH"; status=1
fi
if [[ -x "$B/test_cuda_train" ]]; then
  filter='Models/CudaCoraAccuracy.*/sage'
  [[ "${DSP_GPU_MODELS:-sage}" == all ]] && filter='Models/CudaCoraAccuracy.*'
  group "Cora on the GPU ($filter)" cora_gpu.log "$B/test_cuda_train" --gtest_filter="$filter"
  while read -r line; do row "  ${line%% mean*}" "" "mean test ${line##*=}"; done < \
    <(grep -oE 'model=[a-z]+ mean test=[0-9.]+' "$OUT/cora_gpu.log")
else
  row "Cora on the GPU" FAIL "test_cuda_train not built (needs a CUDA LibTorch)"; status=1
fi

DSP="$BUILD/tools/dsp"
# `dsp train --device cuda` end to end on Cora: 1 rank (NCCL channels), 2 ranks on the one GPU
# (the MPI transport, staged through pinned memory); the accuracy band of the CPU build (>= 0.78).
for np in 1 2; do
  t=$(date +%s)
  if tests/train/e2e/cora_mpi.sh "$DSP" "$MPIEXEC" tests/data $np sage default --device cuda \
       >"$OUT/cora_e2e_np$np.log" 2>&1; then
    row "dsp train cora --device cuda, $np rank(s)" ok \
      "test acc $(awk '/test acc at best/ {print $NF}' "$OUT/cora_e2e_np$np.log"), $(elapsed $t)"
  else
    row "dsp train cora --device cuda, $np rank(s)" FAIL "see cora_e2e_np$np.log"; status=1
  fi
done

# Benchmarks on a generated products-sized community graph (one part), CPU and GPU in one run.
G=/tmp/dsp-gpu-bench
t=$(date +%s)
if [[ ! -f $G/p1/partition.json ]] &&
   ! { "$DSP" generate community $G/ds --nodes "${DSP_GPU_BENCH_NODES:-2.4M}" \
         --edges "${DSP_GPU_BENCH_EDGES:-62M}" --classes 47 >"$OUT/bench_data.log" 2>&1 &&
       "$DSP" partition $G/ds $G/p1 --parts 1 >>"$OUT/bench_data.log" 2>&1; }; then
  row "bench graph" FAIL "see bench_data.log"; exit 1
fi
row "bench graph" ok "$(elapsed $t)"
bench() {  # name log args...
  local name=$1 log=$2 t; shift 2
  t=$(date +%s)
  if "$DSP" bench "$@" --json "$OUT/$log.json" >"$OUT/$log.log" 2>&1; then
    row "$name" ok "$(grep -E 'M sampled edges/s|FeatureStore::gather|gather / d2d|speedup' "$OUT/$log.log" | head -n 2 | tr -s ' ' | paste -sd ';'), $(elapsed $t)"
  else
    row "$name" FAIL "see $log.log"; status=1
  fi
}
for dev in cpu cuda; do
  bench "sample $dev" "sample_$dev" sample $G/p1 --device $dev --batches 40 --threads "$(nproc)"
  bench "gather $dev" "gather_$dev" gather $G/p1 --device $dev --threads "$(nproc)"
done
# The neighbour array read from pinned host memory through UVA (none of it on the device).
bench "sample cuda uva" sample_cuda_uva sample $G/p1 --device cuda --batches 40 \
  --threads "$(nproc)" --topology-memory 0
# TurboGNN's schedule (degree-sorted snake order, shared-memory positions) vs the default kernel
# above: its blocks are checked equal by the cuda-turbo cases of the test groups.
bench "sample cuda turbo" sample_cuda_turbo sample $G/p1 --device cuda --batches 40 \
  --threads "$(nproc)" --sample-kernel turbo
bench "pipeline cuda (sage 15,10,5 h256)" pipeline_cuda pipeline $G/p1 --device cuda --hidden 256 --epochs 1
exit $status
