# shellcheck shell=bash
# Shared by the GPU kit's steps (sourced by scripts/gpu/check.sh): the summary rows, the deadline,
# and the kit unpacked and put on the library path exactly as the device will have it.

declare -a rows=()
status=0
T0=$(date +%s)
# A summary row, kept for the table and appended at once to $OUT/rows.txt (when OUT is set), so a
# run cut short by the lease still returns every row it made.
row() {
  rows+=("$(printf '%-40s %-5s %s' "$1" "$2" "$3")")
  [[ -n "${OUT:-}" && -d "${OUT:-}" ]] && printf '%s\n' "${rows[-1]}" >>"$OUT/rows.txt"
  return 0
}
elapsed() { echo "$(($(date +%s) - $1)) s"; }
# Seconds left before the deadline (DSP_KIT_DEADLINE, counted from the script's start).
left() { echo $((${DSP_KIT_DEADLINE:-480} - ($(date +%s) - T0))); }
# timed SECONDS cmd...: cmd under `timeout`, cut to the time left; 124 without running it when
# the deadline has passed.
timed() {
  local secs=$1 l
  shift
  l=$(left)
  ((l < 5)) && return 124
  ((secs > l)) && secs=$l
  timeout -k 10 "$secs" "$@"
}
table() {
  local gpu
  gpu="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
  echo
  echo "==== dsp gpu-check $step (${gpu:-no GPU}), $(elapsed "$T0") ===="
  printf '%-40s %-5s %s\n' step result detail
  for r in "${rows[@]}"; do echo "$r"; done
}

# A digest of the sources a kit is built from (src, tools, tests, python, cmake, the top
# CMakeLists.txt), the same here and on the device, where the tree arrives without .git: the run
# refuses a kit whose digest is not the tree's (built from another commit).
source_digest() {
  (cd "$here" && find src tools tests python cmake CMakeLists.txt -type f ! -name '*.pyc' \
    ! -path '*/__pycache__/*' -print0 2>/dev/null | LC_ALL=C sort -z | xargs -0 sha256sum |
    sha256sum | cut -c1-16)
}

# Unpacks the kit's .debs (dpkg -x, never into /) and binaries into $KR and exports the variables
# the device needs: OpenMPI relocated into $KR (OPAL_PREFIX, PMIx's prefix), launched without
# ssh (plm isolated: one node), shared memory between ranks without CMA (refused in VMs and
# containers), and the library path: the kit, then torch's and its CUDA libraries, then CUDA's.
kit_unpack() {
  local t f
  t=$(date +%s)
  [[ -d "$KIT/debs" && -f "$KIT/bin.tar.xz" ]] || { row kit FAIL "no $KIT (scripts/gpu/check.sh bundle)"; return 1; }
  rm -rf "$KR" && mkdir -p "$KR/root" "$KR/bin"
  for f in "$KIT"/debs/*.deb; do dpkg -x "$f" "$KR/root" || { row kit FAIL "dpkg -x $f"; return 1; }; done
  for f in "$KIT"/debs-dev/*.deb; do dpkg -x "$f" "$KR/root" || { row kit FAIL "dpkg -x $f"; return 1; }; done
  mkdir -p "$KR/py"
  tar -xJf "$KIT/bin.tar.xz" -C "$KR/bin" && tar -xJf "$KIT/py.tar.xz" -C "$KR/py" ||
    { row kit FAIL "tar -xJf bin.tar.xz / py.tar.xz"; return 1; }
  row "unpack kit ($(ls "$KIT"/debs/*.deb | wc -l) debs, ${#bins[@]} binaries)" ok "$(elapsed "$t")"
}

kit_env() {
  local R="$KR/root" ML="$KR/root/usr/lib/x86_64-linux-gnu" py torch_lib nv cuda
  # PMIx ignores its prefix variable for plugins: their folder is given (zlib compression).
  export OPAL_PREFIX="$R/usr" PMIX_PREFIX="$ML/pmix2" PMIX_MCA_mca_base_component_path="$ML/pmix2/lib/pmix"
  export OMPI_MCA_plm=isolated OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
  export OMPI_MCA_pml=ob1 OMPI_MCA_osc=sm OMPI_MCA_mtl=^ofi OMPI_MCA_btl_base_warn_component_unused=0
  export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export PMIX_MCA_gds=hash PMIX_MCA_psec=native PMIX_MCA_pcompress_base_silence_warning=1
  # mpiexec gives ranks a pseudo-terminal: gtest would colour its summary lines, which the
  # counts below read.
  export GTEST_COLOR=no
  MPIEXEC="$R/usr/bin/mpiexec.openmpi"
  PY="${DSP_GPU_PYTHON:-python3}"
  torch_lib="$("$PY" -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)"
  [[ -n "$torch_lib" ]] || { row torch FAIL "$PY cannot import torch"; return 1; }
  nv="$(dirname "$(dirname "$torch_lib")")/nvidia"
  cuda="${CUDA_HOME:-/usr/local/cuda}"
  export LD_LIBRARY_PATH="$ML:$R/lib/x86_64-linux-gnu:$ML/openmpi/lib:$torch_lib:$nv/cu13/lib:$nv/nccl/lib:$cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$KR/bin:$cuda/bin:$PATH"
  row "torch ($PY)" ok "$("$PY" -c 'import torch; print(torch.__version__, "cuda available:", torch.cuda.is_available())' 2>&1 | tail -1)"
}
