# Stage timing for scripts/test.sh (sourced). `stage NAME CMD...` runs CMD and records its wall
# time and result; when the script exits, however it exits, the stages' table is printed, then the
# 20 slowest tests of the run (scripts/ci/slowest.py over build/test-reports).
_stage_rows=()
_stage_start=$SECONDS

stage() {
  local name="$1" t0=$SECONDS rc=0
  shift
  echo "test.sh: ==== $name"
  "$@" || rc=$?
  local result=ok
  ((rc == 0)) || result="FAILED (exit $rc)"
  _stage_rows+=("$(printf '%-34s %6d s  %s' "$name" $((SECONDS - t0)) "$result")")
  return $rc
}

_stages_report() {
  local rc=$?
  echo
  echo "test.sh: stage times"
  local row
  for row in "${_stage_rows[@]}"; do echo "  $row"; done
  printf '  %-34s %6d s\n' "total" $((SECONDS - _stage_start))
  if [[ -d "${reports:-}" ]]; then
    /usr/bin/python3 "$here/scripts/ci/slowest.py" "$reports" 20 || true
  fi
  return $rc
}
trap _stages_report EXIT
