#!/bin/bash
# expect_fault.sh <max seconds> <message regex> <cmd...>
# A fault case of the conformance suite (conformance_faults.hpp) passes when the command exits with
# code 1 (or $EXPECT_FAULT_RC) within the limit and its output has exactly one line starting
# "dsp: ", which matches the regex from start to end (the job's one message: no rank adds another,
# none is lost). Exit code 77 (the probe cannot run here and said why) is passed on: ctest counts
# the case as skipped.
limit=$1 regex=$2 want_rc=${EXPECT_FAULT_RC:-1}
shift 2
start=$(date +%s%N)
out=$(timeout -k 5 "$((limit + 30))" "$@" 2>&1)
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "$out"
# The probe cannot run here (a CUDA probe without the GPUs it needs) and said so: skipped.
[ "$rc" -eq 77 ] && { echo "expect_fault: skipped"; exit 77; }
lines=$(printf '%s\n' "$out" | grep -c '^dsp: ')
echo "expect_fault: exit $rc after ${elapsed_ms} ms (limit ${limit} s), $lines 'dsp:' line(s)"
ok=1
[ "$rc" -eq "$want_rc" ] || { echo "expect_fault: FAIL: exit code $rc, expected $want_rc"; ok=0; }
[ "$lines" -eq 1 ] || { echo "expect_fault: FAIL: $lines 'dsp:' lines, expected 1"; ok=0; }
printf '%s\n' "$out" | grep -qE -- "^(${regex})\$" ||
  { echo "expect_fault: FAIL: no line is exactly '${regex}'"; ok=0; }
(( elapsed_ms < limit * 1000 )) || { echo "expect_fault: FAIL: took longer than $limit s"; ok=0; }
[ $ok -eq 1 ] && echo "expect_fault: PASS"
[ $ok -eq 1 ]
