#!/usr/bin/env bash
# Usage errors as a newcomer meets them: a mistyped flag, command or choice gets one line
# "dsp: error: ..." with the nearest known spelling, and exit code 2; under mpirun the line is
# printed once for the whole job (by rank 0), not once per rank, and the job exits non-zero.
# Usage: usage_errors.sh DSP MPIEXEC DATA_DIR
set -u
dsp="$1" mpiexec="$2" data="$3"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failed=0

# expect WANT_RC REGEX CMD...: CMD exits WANT_RC (any non-zero for "nonzero") and prints exactly
# one "dsp: error" line, which matches REGEX.
expect() {
  local want="$1" regex="$2" rc n
  shift 2
  "$@" >"$tmp/out" 2>&1
  rc=$?
  n=$(grep -c 'dsp: error' "$tmp/out")
  if { [[ "$want" == nonzero && $rc -eq 0 ]] || [[ "$want" != nonzero && $rc -ne "$want" ]]; } ||
     [[ $n -ne 1 ]] || ! grep 'dsp: error' "$tmp/out" | grep -qE -- "$regex"; then
    echo "FAIL: $* (exit $rc, $n 'dsp: error' lines, expected exit $want and one line /$regex/)"
    cat "$tmp/out"
    failed=1
  else
    echo "ok: $* -> $(grep 'dsp: error' "$tmp/out")"
  fi
}

cora="$data/cora"
expect 2 "^dsp: error: unknown option '--epoch' \(did you mean '--epochs'\?\)$" \
  "$dsp" train "$cora" --epoch 3
expect 2 "did you mean '--fanouts'\?" "$dsp" train "$cora" --fanout 10,10
expect 2 "^dsp: error: unknown command 'trian' \(did you mean 'train'\?\)$" "$dsp" trian "$cora"
expect 2 "did you mean 'sample'\?" "$dsp" bench smaple "$cora"
expect 2 "unknown option '--bogus' \(dsp train --help lists the options\)" \
  "$dsp" train "$cora" --bogus
expect 2 "unknown model 'sgae'.*did you mean 'sage'\?" "$dsp" train "$cora" --model sgae
# Other frameworks' spellings: the value they mean, not the nearest letters ('hsage', 'cpu').
expect 2 "unknown model 'graphsage'.*did you mean 'sage'\?$" "$dsp" train "$cora" --model graphsage
expect 2 "unknown device 'gpu'.*did you mean 'cuda'\?$" "$dsp" train "$cora" --device gpu
expect nonzero "^dsp: error: $tmp: a directory; give the JSON files \`dsp bench volumes --json\` wrote$" \
  "$dsp" bench project "$tmp"
expect 2 "unknown pipeline mode 'onn'.*did you mean 'on'\?" "$dsp" train "$cora" --pipeline onn
expect 2 "^dsp: error: unknown evaluation 'fulll' \\(auto, full, sampled\\); did you mean 'full'\\?$" "$dsp" train "$cora" --eval fulll
expect 2 "did you mean 'metis'\?" "$dsp" partition "$cora" "$tmp/p" --method metsi
# DSP_ERROR_TYPE=1 (the Python package) names the class of a usage error too.
DSP_ERROR_TYPE=1 expect 2 "^dsp: error \(InvalidArgument\): unknown option '--epoch'" \
  "$dsp" train "$cora" --epoch 3

# Once per job: a parse error (CLI11) and a rejected choice (the config's check).
expect nonzero "^dsp: error: unknown option '--epoch' \(did you mean '--epochs'\?\)$" \
  "$mpiexec" --oversubscribe -n 2 "$dsp" train "$cora" --epoch 3
expect nonzero "^dsp: error: unknown model 'sgae'.*did you mean 'sage'\?" \
  "$mpiexec" --oversubscribe -n 2 "$dsp" train "$cora" --model sgae
if grep -q MPI_ABORT "$tmp/out"; then
  echo "FAIL: a usage error aborted the job with MPI_Abort"
  failed=1
fi
exit $failed
