# shellcheck shell=bash
# `scripts/gpu/check.sh bundle` (here) and the device's fallback build (sourced by gpu/check.sh).

# The NCCL of torch's wheel: its folder (header and libnccl.so.2 side by side in lib/ in 2.28).
nccl_of() {  # PYTHON -> "LIBRARY INCLUDE_DIR"
  local root inc
  root="$("$1" -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)"
  [[ -n "$root" && -e "$root/lib/libnccl.so.2" ]] || return 1
  inc="$root/include"
  [[ -f "$inc/nccl.h" ]] || inc="$root/lib"
  [[ -f "$inc/nccl.h" ]] || return 1
  echo "$root/lib/libnccl.so.2 $inc"
}

fetch_debs() {  # DIR PACKAGES...: Debian's .debs of this machine's release
  local dir=$1
  shift
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$dir" && apt-get download "$@" >/dev/null 2>&1) || { echo "bundle: apt-get download failed: $*" >&2; return 1; }
}

# Bytes of what a device call carries: tracked and untracked-not-ignored files, plus the kit.
carried_mb() {
  local tree kit
  tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null | awk '{s+=$1} END {print s+0}')
  kit=$(du -sb "$KIT" | cut -f1)
  echo $(((tree + kit + 1048575) / 1048576))
}

bundle() {
  local t py lib inc stage b
  t=$(date +%s)
  py="$here/.venv-cuda/bin/python"
  DSP_CUDA_BUILD_DIR="${DSP_KIT_BUILD_DIR:-build-kit}"
  # The kit's build: CMakePresets.json's gpu-kit (sm_90, no RPATH, tests/data relative, ...), with
  # this machine's torch and NCCL, the Python module, and source paths relative in every message
  # (-ffile-prefix-map).
  [[ -x "$py" ]] || bash scripts/gpu/build-cuda.sh --venv-only || return 1
  read -r lib inc < <(nccl_of "$py") || { echo "bundle: no nvidia-nccl wheel beside $py's torch" >&2; return 1; }
  DSP_CUDA_BUILD_DIR="$DSP_CUDA_BUILD_DIR" DSP_CUDA_PRESET=gpu-kit DSP_CUDA_TARGETS="${bins[*]} _dsp" \
    bash scripts/gpu/build-cuda.sh "-j${DSP_KIT_JOBS:-2}" \
    -DDSP_WITH_PYTHON=ON -DPython_EXECUTABLE="$py" \
    -DDSP_NCCL_LIBRARY="$lib" -DDSP_NCCL_INCLUDE_DIR="$inc" \
    "-DCMAKE_CXX_FLAGS=-ffile-prefix-map=$here/=" "-DCMAKE_CUDA_FLAGS=-Xcompiler=-ffile-prefix-map=$here/=" ||
    return 1
  rm -rf "$KIT" && mkdir -p "$KIT"
  stage="$(mktemp -d)"
  for b in "${bins[@]}"; do
    find "$DSP_CUDA_BUILD_DIR" -name "$b" -type f -perm -u+x -exec cp {} "$stage/" \; -quit
    [[ -f "$stage/$b" ]] || { echo "bundle: $b was not built" >&2; return 1; }
    strip --strip-unneeded "$stage/$b"
  done
  tar -cJf "$KIT/bin.tar.xz" -C "$stage" . && rm -rf "$stage"
  # The Python extension is compiled on the device for its Python (py_recipe.py).
  stage="$(mktemp -d)"
  python3 scripts/gpu/kit/py_recipe.py record "$here/$DSP_CUDA_BUILD_DIR" "$here" "$stage" || return 1
  tar -cJf "$KIT/py.tar.xz" -C "$stage" . && rm -rf "$stage"
  if [[ -n "${DSP_KIT_WHEEL:-}" ]]; then bundle_wheel || return 1
  else echo "bundle: no pip wheel (DSP_KIT_WHEEL=1 to carry one)"; fi
  fetch_debs "$KIT/debs" "${runtime_debs[@]}" && fetch_debs "$KIT/debs-dev" "${dev_debs[@]}" || return 1
  {
    echo "commit: $(git rev-parse HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)')"
    echo "source: $(source_digest)"
    echo "built: $(date -u +%FT%TZ) on $(. /etc/os-release; echo "$PRETTY_NAME"), sm_90, in $(elapsed "$t")"
    echo "torch: $("$py" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)')"
    echo "nccl: $lib"
    echo "nvcc: $(nvcc --version | tail -1)"
    echo "binaries: ${bins[*]}"
  } >"$KIT/KIT.txt"
  echo "bundle: $KIT in $(elapsed "$t"): $(du -sh "$KIT" | cut -f1), with the tree $(carried_mb) MiB (limit $MAX_KIT_MB)"
  (($(carried_mb) <= MAX_KIT_MB)) || { echo "bundle: over $MAX_KIT_MB MiB" >&2; return 1; }
}

# The CPython of the device image (3.12) here: DSP_KIT_WHEEL_PYTHON, else python3.12 on PATH or
# pyenv's; empty when there is none.
wheel_python() {
  local c
  for c in "${DSP_KIT_WHEEL_PYTHON:-}" "$(command -v python3.12)" "$HOME"/.pyenv/versions/3.12*/bin/python3.12; do
    [[ -n "$c" && -x "$c" ]] && "$c" -c 'import sys, venv; assert sys.version_info[:2] == (3, 12)' 2>/dev/null &&
      { echo "$c"; return; }
  done
}

# The package as `pip install .` builds it where nvcc is (sm_90 here), for the device image's
# CPython 3.12, into $KIT/wheel: the lease installs it with pip and runs the Loader check on it
# (run.sh wheel_step). Its build venv (scikit-build-core) and CMake tree persist in build-kit-wheel*.
# Without a CPython 3.12 here the kit carries no wheel, and says so.
bundle_wheel() {
  local wpy venv="$here/build-kit-wheel-venv" t
  t=$(date +%s)
  wpy="$(wheel_python)"
  [[ -n "$wpy" ]] || { echo "bundle: no CPython 3.12 here (DSP_KIT_WHEEL_PYTHON): the kit carries no wheel"; return 0; }
  if ! "$venv/bin/python" -c "import scikit_build_core" 2>/dev/null; then
    rm -rf "$venv" && "$wpy" -m venv "$venv" &&
      "$venv/bin/pip" install -q "scikit-build-core>=0.10" || { echo "bundle: venv for the wheel failed" >&2; return 1; }
  fi
  mkdir -p "$KIT/wheel" "$here/build-kit-wheel"
  "$venv/bin/pip" wheel -q --no-build-isolation --no-deps -w "$KIT/wheel" \
    -C build-dir=build-kit-wheel -C cmake.define.DSP_WITH_CUDA=ON \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 . >"$here/build-kit-wheel/pip-wheel.log" 2>&1 ||
    { echo "bundle: pip wheel failed, see build-kit-wheel/pip-wheel.log" >&2; tail -n 20 "$here/build-kit-wheel/pip-wheel.log" >&2; return 1; }
  echo "bundle: $(basename "$KIT"/wheel/dsp-*.whl) in $(elapsed "$t")"
}

# The fallback's configure (on the device; the dry run checks it here): CMakePresets.json's
# gpu-kit, as the bundle's build, with the kit's -dev packages, the image's torch, NCCL from its
# wheel, MPI from the kit. BUILD_DIR LOG.
configure_on_device() {
  local R="$KR/root" ML="$KR/root/usr/lib/x86_64-linux-gnu" lib inc torch_prefix torch_lib
  read -r lib inc < <(nccl_of "$PY") || { echo "no nvidia-nccl wheel beside $PY's torch" >"$2"; return 1; }
  torch_prefix="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
  torch_lib="$(cd "$torch_prefix/../../lib" && pwd)"
  cmake -S . --preset gpu-kit -B "$1" -DTORCH_LIBRARY="$torch_lib/libtorch.so" -Dc10_LIBRARY="$torch_lib/libc10.so" \
    -DCMAKE_PREFIX_PATH="$torch_prefix;$R/usr" -DDSP_WITH_PYTHON=OFF \
    -DDSP_NCCL_LIBRARY="$lib" -DDSP_NCCL_INCLUDE_DIR="$inc" -DMPI_SKIP_COMPILER_WRAPPER=ON \
    -DMPI_C_HEADER_DIR="$ML/openmpi/include" -DMPI_C_LIB_NAMES=mpi -DMPI_mpi_LIBRARY="$ML/libmpi.so.40" \
    -DMPIEXEC_EXECUTABLE="$MPIEXEC" -DZLIB_INCLUDE_DIR="$R/usr/include" \
    -DZLIB_LIBRARY="$(ls /usr/lib/x86_64-linux-gnu/libz.so.1 /lib/x86_64-linux-gnu/libz.so.1 2>/dev/null | head -1)" \
    >"$2" 2>&1
}

# The fallback on the device: build as configured above, then put the binaries where `run`
# takes them.
build_on_device() {
  local t b
  kit_unpack || return 1
  t=$(date +%s)
  kit_env || return 1
  if ! configure_on_device build-gpu "$KR/configure.log"; then
    row "build on the device" FAIL "configure, see configure.log"; tail -n 30 "$KR/configure.log"; return 1
  fi
  if ! timed 420 cmake --build build-gpu -j "$(nproc)" --target "${bins[@]}" >"$KR/build.log" 2>&1; then
    row "build on the device" FAIL "see build.log"; grep -m 20 error "$KR/build.log"; return 1
  fi
  for b in "${bins[@]}"; do find build-gpu -name "$b" -type f -perm -u+x -exec cp {} "$KR/bin/" \; -quit; done
  row "build on the device" ok "$(elapsed "$t")"
  KIT_READY=1
}
