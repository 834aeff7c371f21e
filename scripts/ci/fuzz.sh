#!/usr/bin/env bash
# Builds the libFuzzer targets (clang 14, ASan + UBSan) into build-fuzz/ and runs each for the given
# number of seconds, two at a time. Exits non-zero on any crash, leak or sanitizer report.
# Usage: scripts/ci/fuzz.sh [SECONDS=20] [TARGET...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$here"
secs="${1:-20}"; shift || true
targets=("$@")
((${#targets[@]})) || targets=(npy_header csv_numbers edge_list dataset_json dataset_validate
                               dataset_dir hetero_dir partition_dir checkpoint)

log="$(mktemp)"
# -O1 -g1: line tables for the reports, half the compile time of -O2 -g.
if ! { cmake -S . -B build-fuzz -G Ninja -DDSP_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
         -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
         -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 &&
       cmake --build build-fuzz -j "$(nproc)"; } >"$log" 2>&1; then
  echo "fuzz.sh: building the fuzz targets failed:" >&2; tail -n 60 "$log" >&2; exit 1
fi
rm -f "$log"

run_one() {
  local t="$1" work="build-fuzz/corpus/$1" out="build-fuzz/fuzz_$1.log" rc=0
  mkdir -p "$work"
  # The directory targets unpack each input into a private directory under TMPDIR (fuzz_dir.hpp):
  # one per target in the build tree, removed after the run, even after a crash.
  local tmp="build-fuzz/tmp-$1"
  rm -rf "$tmp" && mkdir -p "$tmp"
  # Seeds from the repo, new inputs into the build tree (the repo corpus stays small).
  TMPDIR="$PWD/$tmp" ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "build-fuzz/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="build-fuzz/crash-$t-" "$work" "fuzz/corpus/$t" >"$out" 2>&1 || rc=$?
  rm -rf "$tmp"
  return $rc
}

fail=0
pids=(); names=()
for t in "${targets[@]}"; do
  run_one "$t" & pids+=($!); names+=("$t")
  if ((${#pids[@]} == 2)); then
    for i in 0 1; do
      if ! wait "${pids[$i]}"; then echo "fuzz.sh: ${names[$i]} FAILED" >&2; tail -n 40 "build-fuzz/fuzz_${names[$i]}.log" >&2; fail=1;
      else echo "fuzz.sh: ${names[$i]}: $(grep -Eo 'Done [0-9]+ runs in [0-9]+ second' "build-fuzz/fuzz_${names[$i]}.log" | tail -1)"; fi
    done
    pids=(); names=()
  fi
done
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then echo "fuzz.sh: ${names[$i]} FAILED" >&2; tail -n 40 "build-fuzz/fuzz_${names[$i]}.log" >&2; fail=1;
  else echo "fuzz.sh: ${names[$i]}: $(grep -Eo 'Done [0-9]+ runs in [0-9]+ second' "build-fuzz/fuzz_${names[$i]}.log" | tail -1)"; fi
done
exit $fail
