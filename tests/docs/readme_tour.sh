#!/usr/bin/env bash
# README.md's "## A tour" runs as written: every shell command of its ```bash block, in order, in an
# empty directory holding only build/tools/dsp (the binary under test), build/python (the Python
# module beside it) and tests/data (the repository's), then its ```python block with that module,
# then the ```bash block under "## Try it" of each docs/*.md page that has one (file name order;
# a guide's block may use what README's tour wrote), in the same directory and shell. So a command
# that fails, or that reads a file no earlier command wrote, fails this test. Scaled down to run in
# about a minute on 2 cores, by these substitutions of the shell commands only:
#   --nodes X             -> --nodes 4096       (generators; a power of two suits rmat too)
#   --edges X             -> --edges 30000
#   --epochs X            -> --epochs 2
#   --batches X           (bench sample) -> --batches 3,  --iters X (bench gather) -> --iters 3
#   ogbn_papers100M       -> tests/data/cora    (an OGB download: Cora has OGB's raw layout)
#   mpirun                -> MPIEXEC, with OMPI_MCA_rmaps_base_oversubscribe=1 (4 ranks, 2 cores)
# and `--batches 3` / `--iters 3` appended to `dsp bench sample` / `dsp bench gather` when not
# given. Skipped, each with a line saying so: commands with `--device cuda` when there is no GPU;
# the Python block when no module was built beside DSP (a build configured with DSP_WITH_PYTHON=ON
# that lacks it fails).
# Also: README's "## Two commands" names scripts that exist, and its test command is the one
# .ci/run runs; the partition methods of the table in docs/guide-multi-gpu-multi-node.md are
# those `dsp partition --help` offers.
# Usage: readme_tour.sh README DSP MPIEXEC DATA_DIR [PYTHON_DIR = DSP's ../python]
#   (PYTHON_DIR: the folder holding the dsp package, build/python of a build; the interpreter is
#   $DSP_PYTHON, default /usr/bin/python3)
set -u
readme="$(realpath "$1")" dsp_bin="$(realpath "$2")" data="$(realpath "$4")"
mpiexec="$(command -v "$3")" || { echo "FAIL: MPIEXEC '$3' not found"; exit 1; }
# (The tour sets $dsp itself: the binary under test is $dsp_bin.)
pydir="$(realpath -m "${5:-$(dirname "$dsp_bin")/../python}")"
build_cache="$(dirname "$dsp_bin")/../CMakeCache.txt"
python="${DSP_PYTHON:-/usr/bin/python3}"
[[ -x "$python" ]] || python=python3
root="$(dirname "$readme")"
guides=("$root"/docs/*.md)
methods_page="$root/docs/guide-multi-gpu-multi-node.md"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# The lines of the first ```LANG block after the heading line "## HEADING" of FILE (before the
# next "## " heading), shell continuation lines joined.
block() {
  awk -v h="## $2" -v fence="\`\`\`$3" \
      '$0 == h { in_section = 1; next }
       in_section && /^## / { exit }
       in_section && $0 == fence { in_block = 1; next }
       in_block && /^```/ { exit }
       in_block { print }' "$1" |
    sed -e ':a' -e '/\\$/N; s/\\\n//; ta'
}

# A shell command `$1`, scaled down (see the header).
scaled() {
  local line="$1"
  line=$(sed -E -e 's/--nodes [^ ]+/--nodes 4096/g' -e 's/--edges [^ ]+/--edges 30000/g' \
    -e 's/--epochs [^ ]+/--epochs 2/g' -e 's/--batches [^ ]+/--batches 3/g' \
    -e 's/--iters [^ ]+/--iters 3/g' -e 's#ogbn_papers100M#tests/data/cora#g' <<<"$line")
  # A bench command's timed repetitions, when the tour leaves them at their defaults.
  line=$(sed -E -e '/bench sample/{/--batches/!s/(bench sample [^&;|]*)/\1 --batches 3/}' \
    -e '/bench gather/{/--iters/!s/(bench gather [^&;|]*)/\1 --iters 3/}' <<<"$line")
  echo "$line"
}

# The methods of the "Partition methods" table and of `dsp partition --help`, sorted, one a line.
page_methods() {
  awk '/^Partition methods/ { on = 1; next } on && /^$/ && seen { exit }
       on && /^\| `/ { seen = 1; print }' "$methods_page" | sed -E 's/^\| `([^`]+)`.*/\1/' | sort
}
help_methods() {
  "$dsp_bin" partition --help | sed -nE 's/.*--method TEXT:\{([^}]*)\}.*/\1/p' | tr ',' '\n' | sort
}

has_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }

if [[ "$(page_methods)" != "$(help_methods)" ]] || [[ -z "$(help_methods)" ]]; then
  echo "FAIL: the partition methods of ${methods_page#"$root"/} [$(page_methods | xargs)] are" \
    "not dsp partition --help's [$(help_methods | xargs)]"
  exit 1
fi

# "## Two commands": each `bash scripts/...` exists, and the test command is .ci/run's.
mapfile -t two < <(block "$readme" "Two commands" bash | sed -E 's/[[:space:]]+#.*$//')
ci_command="$(grep -vE '^[[:space:]]*(#|$|set |cd )' "$root/.ci/run" | tail -1)"
for cmd in "${two[@]}"; do
  script="$(awk '$1 == "bash" { print $2 }' <<<"$cmd")"
  if [[ -z "$script" || ! -f "$root/$script" ]]; then
    echo "FAIL: README's \"Two commands\": '$cmd' does not run a script of the repository"
    exit 1
  fi
done
printf '%s\n' "${two[@]}" | grep -qxF -- "$ci_command" || {
  echo "FAIL: .ci/run runs '$ci_command', which is not a command of README's \"Two commands\""
  exit 1
}

mkdir -p "$tmp/build/tools" "$tmp/tests"
ln -s "$dsp_bin" "$tmp/build/tools/dsp"
ln -s "$data" "$tmp/tests/data"
[[ -d "$pydir" ]] && ln -s "$pydir" "$tmp/build/python"
cd "$tmp" || exit 1
export OMPI_MCA_rmaps_base_oversubscribe=1
mpirun() { "$mpiexec" "$@"; }

ran=0 skipped=0 start=$(date +%s)
fail() {  # fail WHERE WRITTEN RAN: the command's exit status and the end of its output
  echo "FAIL: exit $rc from the command of $1"
  echo "  written: $2"
  echo "  ran:     $3"
  sed 's/^/  | /' "$tmp/.out" | tail -20
  exit 1
}

# run_shell WHERE LINE...: each line as the tour's reader would type it, scaled down.
run_shell() {
  local where="$1" raw cmd t0
  shift
  for raw in "$@"; do
    # A comment: '#' at a word's start.
    cmd="$(sed -E -e 's/(^|[[:space:]])#.*$//' -e 's/[[:space:]]+$//' <<<"$raw")"
    [[ "$cmd" =~ ^[[:space:]]*$ ]] && continue
    if [[ "$cmd" == *"--device cuda"* ]] && ! has_gpu; then
      echo "SKIP (no GPU): $raw"
      skipped=$((skipped + 1))
      continue
    fi
    cmd="$(scaled "$cmd")"
    echo "\$ $cmd"
    t0=$(date +%s)
    eval "$cmd" >"$tmp/.out" 2>&1
    rc=$?
    (( rc == 0 )) || fail "$where" "$raw" "$cmd"
    echo "  ok ($(( $(date +%s) - t0 )) s)"
    ran=$((ran + 1))
  done
}

mapfile -t lines < <(block "$readme" "A tour" bash)
(( ${#lines[@]} > 0 )) || { echo "FAIL: no \`\`\`bash block under '## A tour' in $readme"; exit 1; }
run_shell "README's tour" "${lines[@]}"

block "$readme" "A tour" python >"$tmp/.tour.py"
if [[ ! -s "$tmp/.tour.py" ]]; then
  echo "FAIL: no \`\`\`python block under '## A tour' in $readme"
  exit 1
elif [[ ! -f "$pydir/dsp/__init__.py" ]]; then
  # Skipped only where no module was asked for: a build of DSP configured with the Python module
  # must have it there.
  if grep -qs '^DSP_WITH_PYTHON:BOOL=ON' "$build_cache"; then
    echo "FAIL: the build of $dsp_bin has DSP_WITH_PYTHON=ON but no Python module in $pydir"
    exit 1
  fi
  echo "SKIP (no Python module in $pydir): README's Python block"
  skipped=$((skipped + 1))
else
  echo "\$ $python <README's Python block>"
  t0=$(date +%s)
  PYTHONPATH="$tmp/build/python" "$python" "$tmp/.tour.py" >"$tmp/.out" 2>&1
  rc=$?
  (( rc == 0 )) || fail "README's tour" "its \`\`\`python block" "PYTHONPATH=build/python $python"
  echo "  ok ($(( $(date +%s) - t0 )) s)"
  ran=$((ran + 1))
fi

guides_run=0
for page in "${guides[@]}"; do
  mapfile -t lines < <(block "$page" "Try it" bash)
  (( ${#lines[@]} > 0 )) || continue
  echo "-- ${page#"$root"/}, \"Try it\""
  run_shell "${page#"$root"/}'s \"Try it\"" "${lines[@]}"
  guides_run=$((guides_run + 1))
done
if (( guides_run == 0 )); then
  echo "FAIL: no docs/*.md page has a \`\`\`bash block under '## Try it'"
  exit 1
fi
echo "tour: $ran commands ran (README and $guides_run guides), $skipped skipped," \
  "$(( $(date +%s) - start )) s"
