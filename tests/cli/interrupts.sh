#!/usr/bin/env bash
# Interrupts read as interrupts: Ctrl-C (SIGINT) or SIGTERM ends dsp train with one line, "dsp:
# interrupted after epoch N of M; continue from the checkpoint of epoch K (...) with the same
# command and --resume auto" (or what to give for a run that can be continued), exit 130 / 143,
# and a checkpoint directory that --resume auto continues from; under mpirun the line is printed
# once for the job (no "vanished", no error), every rank ends within seconds, and a usage error
# under `mpirun -q` prints dsp's one line and nothing of the launcher's.
# Usage: interrupts.sh DSP MPIEXEC DATA_DIR
set -u
dsp="$1" mpiexec="$2" data="$3"
tmp="$(mktemp -d)"
job=""
cleanup() {
  [[ -n "$job" ]] && kill -KILL -- "-$job" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
failed=0
fail() {
  echo "FAIL: $*"
  echo "---- stderr"
  tail -n 20 "$tmp/err"
  failed=1
}

"$dsp" convert --from ogb "$data/cora" "$tmp/cora" >/dev/null 2>&1 || exit 1
"$dsp" partition "$tmp/cora" "$tmp/p1" --parts 1 --quiet >/dev/null 2>&1 || exit 1
"$dsp" partition "$tmp/cora" "$tmp/p2" --parts 2 --quiet >/dev/null 2>&1 || exit 1
opts=(--batch-size 8 --threads 1 --no-progress)
train=(train "${opts[@]}" --epochs 100000)

# start CMD...: runs CMD in a session of its own (as a terminal's job: Ctrl-C reaches its
# process group), stdout and stderr to files, emptied here first (a redirection in the child
# would truncate them only after this shell has gone on to read the last job's lines).
start() {
  : >"$tmp/out"
  : >"$tmp/err"
  setsid "$@" >>"$tmp/out" 2>>"$tmp/err" &
  job=$!
}

# interrupt SIGNAL TARGET: once the job has finished two epochs, sends SIGNAL to TARGET (group:
# the job's process group, as Ctrl-C does; leader: its first process only); waits at most 10 s
# for the whole group to end and sets `rc` to its exit status.
interrupt() {
  local i
  for ((i = 0; i < 600; ++i)); do
    grep -q '^epoch   2 ' "$tmp/out" 2>/dev/null && break
    sleep 0.1
  done
  grep -q '^epoch   2 ' "$tmp/out" || fail "no second epoch within 60 s"
  if [[ "$2" == group ]]; then kill "-$1" -- "-$job"; else kill "-$1" "$job"; fi
  for ((i = 0; i < 100; ++i)); do
    pgrep -g "$job" >/dev/null || break
    sleep 0.1
  done
  if pgrep -g "$job" >/dev/null; then
    fail "the job's processes outlived a SIG$1 by 10 s"
    kill -KILL -- "-$job"
  fi
  wait "$job"
  rc=$?
  job=""
}

# one_line REGEX: stderr holds exactly one "dsp: " line, "dsp: interrupted...", matching REGEX.
one_line() {
  local lines
  lines="$(grep -E '(^|\] )dsp: ' "$tmp/err")"
  if [[ $(grep -c . <<<"$lines") -ne 1 ]] || ! grep -qE -- "$1" <<<"$lines"; then
    fail "expected one line /$1/, got: $lines"
  else
    echo "ok: $lines"
  fi
}

ck="$tmp/ck"
# resume N: the note's way to continue, its epoch the regex's group N.
resume() {
  echo "continue from the checkpoint of epoch ([0-9]+) \($ck/checkpoint-\\$1\.pt\) with the same command and --resume auto"
}

# One rank, Ctrl-C: exit 130, the epoch and the checkpoint to continue from.
start "$dsp" "${train[@]}" "$tmp/p1" --checkpoint-dir "$ck" --checkpoint-every 1
interrupt INT group
[[ $rc -eq 130 ]] || fail "SIGINT: exit $rc, expected 130"
one_line "^dsp: interrupted after epoch ([0-9]+) of 100000; $(resume 2)$"
done_epochs=$(grep -oE 'after epoch [0-9]+' "$tmp/err" | grep -oE '[0-9]+$')
# The command it names continues the run: from that epoch, to the end.
"$dsp" train "${opts[@]}" "$tmp/p1" --checkpoint-dir "$ck" --checkpoint-every 1 --resume auto \
  --epochs $((done_epochs + 1)) >"$tmp/out" 2>"$tmp/err"
rc=$?
if [[ $rc -ne 0 ]] || ! grep -q "resumed from .* after epoch $done_epochs$" "$tmp/err" ||
   ! grep -q "^epoch *$((done_epochs + 1)) " "$tmp/out"; then
  fail "--resume auto after the interrupt: exit $rc, not continued from epoch $done_epochs"
fi

# One rank, SIGTERM, --overwrite: exit 143, and the way to continue drops --overwrite.
start "$dsp" "${train[@]}" "$tmp/p1" --checkpoint-dir "$ck" --checkpoint-every 1 --overwrite
interrupt TERM leader
[[ $rc -eq 143 ]] || fail "SIGTERM: exit $rc, expected 143"
one_line "^dsp: interrupted after epoch ([0-9]+) of 100000; $(resume 2) in place of --overwrite$"

# No checkpoint directory: what to give next time.
start "$dsp" "${train[@]}" "$tmp/p1"
interrupt INT group
[[ $rc -eq 130 ]] || fail "SIGINT without checkpoints: exit $rc, expected 130"
one_line "^dsp: interrupted after epoch [0-9]+ of 100000; nothing was saved \(--checkpoint-dir DIR --checkpoint-every 1 keeps a checkpoint a run continues from with --resume auto\)$"

# Two ranks: Ctrl-C reaches every process of the job; SIGTERM only the launcher, which ends its
# ranks with SIGTERM. Either way rank 0 says it once; no rank names another as vanished.
for how in "INT group" "TERM leader"; do
  start "$mpiexec" -q --oversubscribe -n 2 "$dsp" "${train[@]}" "$tmp/p2" --checkpoint-dir "$ck" \
    --checkpoint-every 1 --overwrite
  interrupt $how
  one_line "^(\[r0\] )?dsp: interrupted after epoch ([0-9]+) of 100000; $(resume 3) in place of --overwrite$"
  [[ $rc -ne 0 ]] || fail "mpirun exited 0 after SIG${how% *}"
done

# A usage error under `mpirun -q`: dsp's one line and nothing else (no launcher banner).
"$mpiexec" -q --oversubscribe -n 2 "$dsp" train "$tmp/p2" --epoch 3 >"$tmp/out" 2>"$tmp/err"
rc=$?
all="$(cat "$tmp/out" "$tmp/err")"
if [[ $rc -ne 2 || "$all" != "dsp: error: unknown option '--epoch' (did you mean '--epochs'?)" ]]; then
  fail "usage error under mpirun -q: exit $rc (expected 2), output: $all"
else
  echo "ok: mpirun -q: $all (exit 2)"
fi
exit $failed
