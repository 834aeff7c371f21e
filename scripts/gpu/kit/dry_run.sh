# shellcheck shell=bash
# `scripts/gpu/check.sh --dry-run` (sourced by gpu/check.sh): the device path as far as a CPU can
# run it, in a mount namespace that hides what the device image does not have.

dry_run() {
  [[ $(id -u) -eq 0 ]] || { echo "gpu/check.sh --dry-run: needs root (a private mount namespace)" >&2; exit 1; }
  [[ -f "$KIT/bin.tar.xz" ]] || { echo "gpu/check.sh --dry-run: no $KIT (scripts/gpu/check.sh bundle)" >&2; exit 1; }
  export DSP_GPU_PYTHON="${DSP_GPU_PYTHON:-$here/.venv-cuda/bin/python}"
  [[ -x "$DSP_GPU_PYTHON" ]] || { echo "gpu/check.sh --dry-run: no $DSP_GPU_PYTHON (scripts/gpu/build-cuda.sh --venv-only)" >&2; exit 1; }
  exec unshare --mount --propagation private bash "$here/scripts/gpu/check.sh" --dry-run-inner
}

# What the device image lacks and this machine has: the system's OpenMPI, PMIx and hwloc plugins
# (their libraries stay visible: the library check below catches any that is loaded), ssh, rsh.
hide_system() {
  local H=/tmp/dsp-kit-hide p
  mkdir -p "$H/dir" && : >"$H/file" && chmod 644 "$H/file"
  for p in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /etc/openmpi /usr/share/openmpi \
           /usr/lib/x86_64-linux-gnu/hwloc; do
    [[ -d $p ]] && mount --bind "$H/dir" "$p"
  done
  for p in ssh rsh mpiexec mpirun orterun orted mpiexec.openmpi mpirun.openmpi; do
    p="$(command -v $p 2>/dev/null)" && p="$(readlink -f "$p")" && [[ -f $p ]] && mount --bind "$H/file" "$p"
  done
  command -v ssh >/dev/null && [[ -x "$(readlink -f "$(command -v ssh)")" ]] && { echo "dry run: ssh still visible" >&2; return 1; }
  return 0
}

# Every shared library a kit program loaded (LD_DEBUG=libs logs) came from the kit, torch and its
# CUDA libraries, CUDA, or the C/C++ runtime every image has. In a log, a program's "calling init"
# lines come before its "initialize program" line (a process that exec'd has several programs).
kit_loads() {  # LOG_PREFIX -> the libraries kit programs loaded, one per line
  cat "$1".* 2>/dev/null | awk -v kr="$KR/" '
    /calling init: / { sub(/.*calling init: /, ""); libs[n++] = $0; next }
    /initialize program: / { p = $0; sub(/.*initialize program: /, "", p)
                             if (index(p, kr) == 1) { progs++; for (i = 0; i < n; i++) print libs[i] }
                             n = 0 }
    END { print "#programs " progs + 0 }' | sort -u
}

library_check() {
  local loads torch_dir bad
  loads="$(kit_loads "$1")"
  torch_dir="$(dirname "$(dirname "$("$PY" -c 'import torch; print(torch.__file__)')")")"
  bad="$(echo "$loads" | grep -v '^#' | grep -vE "^($KR/|$torch_dir/|/usr/local/cuda)" |
    grep -vE '/(libc|libm|libdl|libpthread|librt|libutil|libresolv|ld-linux-x86-64|libstdc\+\+|libgcc_s|libz|libnss_[a-z]+)\.so')"
  if [[ -n "$bad" ]]; then
    row "libraries from outside the kit" FAIL "$(echo "$bad" | xargs -n1 basename | paste -sd ' ')"; status=1
  else
    row "libraries from outside the kit" ok "none ($(echo "$loads" | grep -c -v '^#') libraries, $(echo "$loads" | sed -n 's/^#programs //p') kit programs)"
  fi
}

# The fallback build's configure: every dependency it found must come from the kit's packages
# (this machine's /usr has them all too, the device's image does not), but the C runtime's librt,
# the compiler's OpenMP and pybind11 (the fallback builds no Python module).
fallback_configure_check() {
  local B=/tmp/dsp-kit-configure outside
  rm -rf "$B"
  if ! configure_on_device "$B" "$LOGS/fallback_configure.log"; then
    row "fallback build: configure" FAIL "see fallback_configure.log"; status=1; return
  fi
  outside="$(grep -E '^[A-Za-z0-9_]+_(DIR|LIBRARY|INCLUDE_DIR|LIBRARY_RELEASE|INCLUDE_DIRS)[:A-Z]*=' "$B/CMakeCache.txt" |
    grep -vE "=($KR/|/usr/local/cuda|$(dirname "$(dirname "$("$PY" -c 'import torch; print(torch.__file__)')")")|.*-NOTFOUND$|$)" |
    grep -E '=/usr/(lib|include|share)' | cut -d= -f1 |
    grep -vE '^(CUDAToolkit_rt_LIBRARY|OpenMP_[a-z]+_LIBRARY|pybind11_)' | paste -sd ' ')"
  if [[ -n "$outside" ]]; then row "fallback build: configure" FAIL "found outside the kit: $outside"; status=1
  else row "fallback build: configure" ok "every dependency from the kit, torch or CUDA"; fi
}

dry_checks() {
  local b hits mb
  unset LD_DEBUG LD_DEBUG_OUTPUT
  hits=""
  for b in "$KR"/bin/*; do grep -q -F "$here" "$b" && hits+=" $(basename "$b")"; done
  if [[ -n "$hits" ]]; then row "no path of this machine in binaries" FAIL "$here in:$hits"; status=1
  else row "no path of this machine in binaries" ok "$here absent"; fi
  source "$here/scripts/gpu/kit/bundle.sh"
  fallback_configure_check
  mb=$(carried_mb)
  if ((mb <= MAX_KIT_MB)); then row "tree + kit carried" ok "$mb MiB (limit $MAX_KIT_MB)"
  else row "tree + kit carried" FAIL "$mb MiB (limit $MAX_KIT_MB)"; status=1; fi
  library_check "$LDDBG/ld"
}

dry_run_inner() {
  step=--dry-run  # the summary's title
  hide_system || exit 1
  export DSP_KIT_DRY=1 DSP_KIT_DEADLINE="${DSP_KIT_DEADLINE:-1800}"
  export DSP_GPU_BENCH_NODES="${DSP_GPU_BENCH_NODES:-100k}" DSP_GPU_BENCH_EDGES="${DSP_GPU_BENCH_EDGES:-1M}"
  export OUT="${OUT:-$here/out/gpu-check-dry}"
  LDDBG="$KR-ld"
  rm -rf "$LDDBG" && mkdir -p "$LDDBG"
  export LD_DEBUG=libs LD_DEBUG_OUTPUT="$LDDBG/ld"
  run_kit dry_checks
}
