#!/bin/bash
# expect_failure.sh <max seconds> <message regex> <expected count of matching lines> <cmd...>
# Passes when the command exits non-zero within the limit and exactly <count> output lines match
# the message (0: at least one). Used for whole-job failure behaviour under mpiexec.
limit=$1 regex=$2 count=$3
shift 3
start=$(date +%s%N)
out=$(timeout -k 5 "$((limit + 30))" "$@" 2>&1)
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "$out"
matches=$(printf '%s\n' "$out" | grep -cE -- "$regex")
echo "expect_failure: exit $rc after ${elapsed_ms} ms, $matches line(s) match '$regex'"
ok=1
[ "$rc" -ne 0 ] || { echo "expect_failure: FAIL: exit code 0"; ok=0; }
[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || { echo "expect_failure: FAIL: hung"; ok=0; }
if [ "$count" -eq 0 ]; then
  [ "$matches" -ge 1 ] || { echo "expect_failure: FAIL: message not printed"; ok=0; }
else
  [ "$matches" -eq "$count" ] || { echo "expect_failure: FAIL: message printed $matches times, expected $count"; ok=0; }
fi
(( elapsed_ms < limit * 1000 )) || { echo "expect_failure: FAIL: took longer than $limit s"; ok=0; }
[ $ok -eq 1 ] && echo "expect_failure: PASS"
[ $ok -eq 1 ]
