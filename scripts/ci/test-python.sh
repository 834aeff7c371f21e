#!/usr/bin/env bash
# The Python tests against the package as a user installs it: builds a wheel of dsp (pip,
# scikit-build-core), installs it into a venv that sees Debian's numpy and torch
# (--system-site-packages) and holds torch_geometric, scikit-learn and DGL when they install, and runs
# tests/python
# from outside the source tree, so `import dsp` can only find the installed package. The wheel's
# CMake tree, build-<wheel tag>/, compiles what build/ compiled with the same commands, so with
# ccache and the same CCACHE_BASEDIR (scripts/test.sh sets it to the checkout) it costs little
# more than the links.
# Usage: scripts/ci/test-python.sh [pytest args...]
#   DSP_PYTHON   the interpreter (default /usr/bin/python3: Debian's, with python3-torch)
#   DSP_PYG      the torch_geometric requirement for the test venv (default: a release that
#                supports torch 1.13); "none" skips it (its tests are then skipped and counted)
#   DSP_DGL      the DGL requirement (default 1.1.2: the last release whose version check accepts
#                Debian's torch, 1.13.0a0; the interop tests build DGL graphs and models from
#                the loader's batches); "none" skips it (those tests skipped, counted)
#   DSP_SKLEARN  the scikit-learn requirement (default: a release for Debian's numpy and scipy),
#                against which ROC-AUC is checked; "none" skips it (those checks skipped, named)
#   DSP_TEST_VENVS  where the test venvs are kept between runs on one machine, one per interpreter
#                and set of requirements (default ~/.cache/dsp/test-venvs): the PyPI extras are
#                installed once, and each run replaces only the dsp package in it (pip
#                --force-reinstall: its files are the new wheel's and only those)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$here"
py="${DSP_PYTHON:-/usr/bin/python3}"
pyg="${DSP_PYG:-torch_geometric==2.5.3}"
sklearn="${DSP_SKLEARN:-scikit-learn==1.3.2}"
dgl="${DSP_DGL:-dgl==1.1.2}"
tools=build/python-tools       # kept: a venv with scikit-build-core, to build without isolation
wheels=build/python-wheelhouse
key="$(printf '%s\n' "$("$py" -c 'import sys; print(sys.version)')" "$py" "$pyg" "$sklearn" "$dgl" | sha256sum | cut -c1-16)"
venv="$(realpath -m "${DSP_TEST_VENVS:-${XDG_CACHE_HOME:-$HOME/.cache}/dsp/test-venvs}/$key")"

run_quiet() {  # run a command, show its log only if it fails
  local log; log="$(mktemp)"
  if ! "$@" >"$log" 2>&1; then
    echo "test-python.sh: '$*' failed:" >&2; tail -n 60 "$log" >&2; rm -f "$log"; return 1
  fi
  rm -f "$log"
}

if ! "$tools/bin/python" -c "import scikit_build_core" 2>/dev/null; then
  echo "test-python.sh: creating $tools (scikit-build-core from PyPI)"
  rm -rf "$tools"
  "$py" -m venv --system-site-packages "$tools"
  run_quiet "$tools/bin/pip" install "scikit-build-core>=0.10"
fi

# The wheel compiles with build/'s compilers: scikit-build-core otherwise sets CC and CXX from
# Python's sysconfig (x86_64-linux-gnu-gcc/g++ on Debian), and under another compiler name no
# object of build/ is found in ccache, so the wheel recompiled the whole project.
if [[ -f build/CMakeCache.txt ]]; then
  CC="${CC:-$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' build/CMakeCache.txt)}"
  CXX="${CXX:-$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' build/CMakeCache.txt)}"
  export CC CXX
fi
echo "test-python.sh: building the wheel"
rm -rf "$wheels"
start=$SECONDS
run_quiet "$tools/bin/pip" wheel --no-build-isolation --no-deps -w "$wheels" .
wheel=("$wheels"/dsp-*.whl)
echo "test-python.sh: built $(basename "${wheel[0]}") in $((SECONDS - start)) s"

if [[ ! -x "$venv/bin/python" ]]; then
  echo "test-python.sh: creating the test venv $venv (kept for later runs)"
  rm -rf "$venv" && mkdir -p "$(dirname "$venv")"
  "$py" -m venv --system-site-packages "$venv"
fi
touch "$venv/installed"
for req in "$pyg" "$sklearn" "$dgl"; do  # each once; one that failed is tried again next run
  [[ "$req" == "none" ]] && continue
  grep -qxF "$req" "$venv/installed" && continue
  if run_quiet "$venv/bin/pip" install "$req"; then
    echo "$req" >>"$venv/installed"
    echo "test-python.sh: installed $req into the test venv"
  else
    echo "test-python.sh: $req did not install: its tests are skipped"
  fi
done
echo "test-python.sh: test venv $venv holds: $(tr '\n' ' ' <"$venv/installed")"
run_quiet "$venv/bin/pip" install --force-reinstall --no-deps "${wheel[0]}"

echo "test-python.sh: pytest on the installed package"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
DSP_TEST_INSTALLED=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider -rs \
  "$here/tests/python" "$@"
