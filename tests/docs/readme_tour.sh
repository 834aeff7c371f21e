#!/usr/bin/env bash
# README.md's "## A tour" runs as written: every shell command of its code block, in order, in an
# empty directory holding only build/tools/dsp (the binary under test) and tests/data (the
# repository's), so a command that fails, or that reads a file no earlier command wrote, fails this
# test. Scaled down to run in about a minute on 2 cores, by these substitutions only:
#   --nodes X             -> --nodes 4096       (generators; a power of two suits rmat too)
#   --edges X             -> --edges 30000
#   --epochs X            -> --epochs 2
#   --batches X           (bench sample) -> --batches 3,  --iters X (bench gather) -> --iters 3
#   ogbn_papers100M       -> tests/data/cora    (an OGB download: Cora has OGB's raw layout)
#   mpirun                -> MPIEXEC, with OMPI_MCA_rmaps_base_oversubscribe=1 (4 ranks, 2 cores)
# and `--batches 3` / `--iters 3` appended to `dsp bench sample` / `dsp bench gather` when not
# given. Skipped, each with a line saying so: commands with `--device cuda` when there is no GPU.
# Also: the partition methods of README's table are those `dsp partition --help` offers.
# Usage: readme_tour.sh README DSP MPIEXEC DATA_DIR
set -u
readme="$(realpath "$1")" dsp="$(realpath "$2")" mpiexec="$3" data="$(realpath "$4")"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# The lines of the first ```bash block after "## A tour", continuation lines joined.
tour_lines() {
  awk '/^## A tour/ { in_tour = 1; next }
       in_tour && /^## / { exit }
       in_tour && /^```bash/ { in_block = 1; next }
       in_block && /^```/ { exit }
       in_block { print }' "$readme" |
    sed -e ':a' -e '/\\$/N; s/\\\n//; ta'
}

# The tour's command `$1`, scaled down (see the header).
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

# The methods of README's "Partition methods" table and of `dsp partition --help`, sorted, one a line.
readme_methods() {
  awk '/^Partition methods/ { on = 1; next } on && /^$/ && seen { exit }
       on && /^\| `/ { seen = 1; print }' "$readme" | sed -E 's/^\| `([^`]+)`.*/\1/' | sort
}
help_methods() {
  "$dsp" partition --help | sed -nE 's/.*--method TEXT:\{([^}]*)\}.*/\1/p' | tr ',' '\n' | sort
}

has_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }

if [[ "$(readme_methods)" != "$(help_methods)" ]] || [[ -z "$(help_methods)" ]]; then
  echo "FAIL: README's partition methods [$(readme_methods | xargs)] are not dsp partition" \
    "--help's [$(help_methods | xargs)]"
  exit 1
fi

mkdir -p "$tmp/build/tools" "$tmp/tests"
ln -s "$dsp" "$tmp/build/tools/dsp"
ln -s "$data" "$tmp/tests/data"
cd "$tmp" || exit 1
export OMPI_MCA_rmaps_base_oversubscribe=1
mpirun() { "$mpiexec" "$@"; }

mapfile -t lines < <(tour_lines)
(( ${#lines[@]} > 0 )) || { echo "FAIL: no code block under '## A tour' in $readme"; exit 1; }
ran=0 skipped=0 start=$(date +%s)
for raw in "${lines[@]}"; do
  cmd="$(sed -E -e 's/(^|[[:space:]])#.*$//' -e 's/[[:space:]]+$//' <<<"$raw")"  # a comment: '#' at a word's start
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
  if (( rc != 0 )); then
    echo "FAIL: exit $rc from the tour's command"
    echo "  README: $raw"
    echo "  ran:    $cmd"
    sed 's/^/  | /' "$tmp/.out" | tail -20
    exit 1
  fi
  echo "  ok ($(( $(date +%s) - t0 )) s)"
  ran=$((ran + 1))
done
echo "tour: $ran commands ran, $skipped skipped, $(( $(date +%s) - start )) s"
