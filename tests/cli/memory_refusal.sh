#!/usr/bin/env bash
# Memory refused, not killed: each entry point that plans memory in proportion to the graph, given
# a --memory-budget below its estimate, exits 1 with one line "dsp: error: <what> needs about X of
# memory but the budget is 1.0 MiB (Y available): <what lowers the need>" naming --memory-budget,
# before it allocates, and leaves nothing behind: no output directory, no temporary partition.
# Usage: memory_refusal.sh DSP MPIEXEC DATA_DIR
set -u
dsp="$1" mpiexec="$2" data="$3"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export TMPDIR="$tmp/tmpdir"  # where an on-the-fly partition would go: must stay empty
mkdir -p "$TMPDIR"
failed=0
size='[0-9.]+ [KMG]?i?B'
budget="but the budget is 1\.0 MiB \($size available\)"

# expect REGEX CMD...: CMD exits 1 and prints exactly one "dsp: error" line, matching REGEX.
expect() {
  local regex="$1" rc n
  shift
  "$@" >"$tmp/out" 2>&1
  rc=$?
  n=$(grep -c 'dsp: error' "$tmp/out")
  if [[ $rc -ne 1 || $n -ne 1 ]] || ! grep 'dsp: error' "$tmp/out" | grep -qE -- "$regex"; then
    echo "FAIL: $* (exit $rc, $n 'dsp: error' lines, expected exit 1 and one line /$regex/)"
    cat "$tmp/out"
    failed=1
  else
    echo "ok: $* -> $(grep 'dsp: error' "$tmp/out")"
  fi
}

# nothing_left WHAT PATH...: none of the paths exists and TMPDIR is empty.
nothing_left() {
  local what="$1" p
  shift
  for p in "$@"; do
    if [[ -e "$p" ]]; then
      echo "FAIL: $what left $p behind"
      failed=1
    fi
  done
  if [[ -n "$(ls -A "$TMPDIR")" ]]; then
    echo "FAIL: $what left $(ls -A "$TMPDIR" | xargs) in TMPDIR"
    failed=1
  fi
}

"$dsp" convert --from ogb "$data/cora" "$tmp/cora" >/dev/null || exit 1
"$dsp" partition "$tmp/cora" "$tmp/p1" --parts 1 --quiet >/dev/null || exit 1

# dsp train on a dataset directory: the partition on the fly is refused before it is loaded.
expect "^dsp: error: the partition of $tmp/cora on the fly \(1 part by metis\) needs about $size of memory $budget: raise --memory-budget$" \
  "$dsp" train "$tmp/cora" --epochs 1 --memory-budget 1M --checkpoint-dir "$tmp/ck0"
nothing_left "dsp train (on the fly)" "$tmp/ck0"
# Two ranks: rank 0 names the methods that need less; the job ends, nothing is left.
"$mpiexec" --oversubscribe -n 2 "$dsp" train "$tmp/cora" --epochs 1 --memory-budget 1M \
  >"$tmp/out" 2>&1
rc=$?
if [[ $rc -eq 0 ]] || ! grep -qE "the partition of $tmp/cora on the fly \(2 parts by metis\) needs about $size of memory $budget: raise --memory-budget, or partition it beforehand: dsp partition --method bfs-blocks \(about $size\) or --method random \(about $size\)$" "$tmp/out"; then
  echo "FAIL: mpirun -n 2 dsp train --memory-budget 1M (exit $rc)"
  cat "$tmp/out"
  failed=1
else
  echo "ok: mpirun -n 2 dsp train --memory-budget 1M -> refused on rank 0"
fi
nothing_left "mpirun -n 2 dsp train (on the fly)"

# dsp train on a partition: the learnable embedding table is checked against the same budget.
expect "^dsp: error: the embedding table \(2708 rows x 16, adam\) needs about $size of memory $budget: lower --embedding-dim, use more ranks or raise --memory-budget$" \
  "$dsp" train "$tmp/p1" --epochs 1 --embedding-dim 16 --memory-budget 1M \
  --checkpoint-dir "$tmp/ck1"
nothing_left "dsp train --embedding-dim" "$tmp/ck1"

# The benches: refused before the store, the sampler or the batches allocate.
expect "^dsp: error: dsp bench gather needs about $size of memory $budget: lower --batch or raise --memory-budget$" \
  "$dsp" bench gather "$tmp/p1" --memory-budget 1M --json "$tmp/g.json"
nothing_left "dsp bench gather" "$tmp/g.json"
expect "^dsp: error: dsp bench sample needs about $size of memory $budget: lower --batch-size, --fanouts or raise --memory-budget$" \
  "$dsp" bench sample "$tmp/p1" --memory-budget 1M --json "$tmp/s.json"
nothing_left "dsp bench sample" "$tmp/s.json"
expect "^dsp: error: dsp bench pipeline needs about $size of memory $budget: lower --batch-size, --fanouts, --hidden or raise --memory-budget$" \
  "$dsp" bench pipeline "$tmp/p1" --memory-budget 1M --json "$tmp/b.json"
nothing_left "dsp bench pipeline" "$tmp/b.json"
# A bench on a dataset directory partitions it on the fly: refused as dsp train's.
expect "^dsp: error: the partition of $tmp/cora on the fly \(1 part by metis\) needs about $size of memory $budget: raise --memory-budget$" \
  "$dsp" bench gather "$tmp/cora" --memory-budget 1M
nothing_left "dsp bench gather (on the fly)"

# dsp predict and dsp embed: layer-wise inference against the budget.
"$dsp" train "$tmp/p1" --epochs 1 --fanouts 5,5 --hidden 16 --eval sampled --no-progress \
  --checkpoint-dir "$tmp/ck" >/dev/null 2>&1 || { echo "FAIL: training the checkpoint"; exit 1; }
for cmd in predict embed; do
  expect "^dsp: error: layer-wise inference over 2708 nodes needs an estimated $size on the busiest rank but 1\.0 MiB is the budget of a rank \(--memory-budget\): run more ranks \(mpirun -np\), give a smaller --batch-size or raise --memory-budget$" \
    "$dsp" "$cmd" "$tmp/p1" --checkpoint "$tmp/ck/best.pt" --out "$tmp/$cmd" --memory-budget 1M
  nothing_left "dsp $cmd" "$tmp/$cmd"
done
exit $failed
