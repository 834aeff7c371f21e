#!/usr/bin/env bash
# dsp across machines, on two hosts made on this machine with network namespaces: host A and
# host B joined by a veth pair (addresses 10.77.0.1 and .2 inside the namespaces, nothing else
# on any network), each with its own host name. mpirun runs on A and starts B's daemon through a
# launch agent that enters B's namespace instead of ssh; MPI traffic goes over TCP on the veth.
#   1. Cora on 2 ranks (one per host) equals the single-host run, epoch by epoch (loss and train,
#      validation and test accuracy).
#   2. With delay and loss on the link (tc netem; where the kernel has no netem, a token bucket
#      that queues and drops packets), training completes with the same result.
#   3. B's link cut mid-epoch: every rank ends within the collective timeout plus its grace
#      period, each naming the other as not responding (B's output is read from the files its
#      daemon writes, since B can no longer reach the launcher), and mpirun itself returns,
#      non-zero, within 20 s of the cut (TCP's limits bounded on host A, below).
#   4. B's rank killed mid-epoch: the job ends within seconds and dsp's one message names rank 1
#      and host B.
# Needs root and iproute2 (ip netns, tc) and util-linux (unshare); exits 77 (skipped) with the
# reason otherwise. Usage: netns_hosts.sh DSP DATA_DIR [CASE...]   (cases: equal degraded cut kill)
set -u
dsp="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")" data="$2"
shift 2
cases=("$@")
((${#cases[@]})) || cases=(equal degraded cut kill)
skip() { echo "SKIP: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "network namespaces need root"
for tool in ip tc unshare mpirun; do
  command -v "$tool" >/dev/null || skip "$tool is not installed"
done

A="dsp$$a" B="dsp$$b"
tmp="$(mktemp -d)"
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
cleanup() {
  for ns in "$A" "$B"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
    rm -rf "/etc/netns/$ns"
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; [[ -f "$tmp/log" ]] && { echo "---- output"; cat "$tmp/log"; }; exit 1; }

ip netns add "$A" 2>/dev/null || skip "cannot create network namespaces here"
ip netns add "$B" || fail "ip netns add"
ip link add "${A}v" type veth peer name "${B}v" || skip "cannot create a veth pair"
ip link set "${A}v" netns "$A" && ip link set "${B}v" netns "$B" || fail "moving the veth ends"
ip -n "$A" addr add 10.77.0.1/24 dev "${A}v" && ip -n "$B" addr add 10.77.0.2/24 dev "${B}v" ||
  fail "addresses"
for ns in "$A" "$B"; do
  ip -n "$ns" link set lo up && ip -n "$ns" link set "${ns}v" up || fail "link up in $ns"
  # `ip netns exec` binds /etc/netns/<ns>/hosts over /etc/hosts: the two hosts know each other.
  mkdir -p "/etc/netns/$ns"
  printf '127.0.0.1 localhost\n10.77.0.1 %s\n10.77.0.2 %s\n' "$A" "$B" >"/etc/netns/$ns/hosts"
done
cat >"$tmp/agent.sh" <<'EOF'
#!/bin/bash
# mpirun's rsh agent: "agent.sh [options] HOST COMMAND..." runs the daemon's command line in the
# network namespace HOST, under HOST as its host name (instead of ssh HOST COMMAND...).
while [[ "$1" == -* ]]; do shift; done
host="$1"; shift
exec ip netns exec "$host" unshare --uts sh -c "hostname $host; $*"
EOF
chmod +x "$tmp/agent.sh"

"$dsp" convert --from ogb "$data/cora" "$tmp/cora" >/dev/null || fail "convert"
"$dsp" partition "$tmp/cora" "$tmp/part" --parts 2 >/dev/null 2>&1 || fail "partition"
train_args=(--batch-size 8 --hidden 32 --fanouts 10,10 --no-progress --seed 1)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# $across ARGS...: mpirun on host A with one rank on A and one on B, over TCP on the veth only.
# mpirun learns that the daemon behind a cut link is gone only from TCP: from keepalives while
# its connection is idle, from retransmissions once it has something to send there (the job's
# end, after the ranks abort). With Linux's defaults that takes minutes (300 s idle + 9 x 20 s
# probes; tcp_retries2=15: ~15 min), and mpirun hangs with its ranks gone. Both bounded here as
# they can be on a cluster: keepalives through mpirun's options, retransmissions through host
# A's sysctl in the cut case (3 retries: a few seconds), both slower than dsp's collective timeout.
keepalive="--mca oob_tcp_keepalive_time 10 --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 3"
across="$tmp/across.sh"
{
  echo '#!/bin/bash'
  echo "exec ip netns exec $A unshare --uts sh -c 'hostname $A; exec \"\$@\"' sh \\"
  echo "  mpirun --allow-run-as-root -H $A:1,$B:1 -np 2 --mca plm_rsh_agent $tmp/agent.sh \\"
  echo "  --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 \\"
  echo "  --mca oob_tcp_if_include 10.77.0.0/24 $keepalive -x OMPI_ALLOW_RUN_AS_ROOT \\"
  echo "  -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM -x DSP_COMM_TIMEOUT \"\$@\""
} >"$across"
chmod +x "$across"

# Per-epoch loss and accuracies of a --metrics file, one line each.
epochs_of() {
  python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l); print(r["epoch"], r["loss"], r["train_acc"], r["val_acc"], r["test_acc"])' "$1"
}

reference() {
  [[ -f "$tmp/local.jsonl" ]] && return
  DSP_COMM_TIMEOUT=60 mpirun --allow-run-as-root -np 2 "$dsp" train "$tmp/part" --epochs 5 \
    "${train_args[@]}" --metrics "$tmp/local.jsonl" >"$tmp/log" 2>&1 || fail "single-host run"
}

run_equal() {  # run_equal NAME: 5 epochs across the two hosts must equal the single-host run
  reference
  local t0
  t0=$(now_ms)
  DSP_COMM_TIMEOUT=60 timeout 300 "$across" "$dsp" train "$tmp/part" --epochs 5 "${train_args[@]}" \
    --metrics "$tmp/$1.jsonl" >"$tmp/log" 2>&1 || fail "$1: the run across hosts failed"
  [[ "$(epochs_of "$tmp/$1.jsonl")" == "$(epochs_of "$tmp/local.jsonl")" ]] ||
    fail "$1: across hosts differs from the single-host run:
$(diff <(epochs_of "$tmp/local.jsonl") <(epochs_of "$tmp/$1.jsonl"))"
  echo "$1: 5 epochs across 2 hosts in $(( $(now_ms) - t0 )) ms equal the single-host run:"
  epochs_of "$tmp/$1.jsonl" | sed 's/^/  epoch loss train val test: /'
}

# Starts a long run across the hosts (output also per rank under $tmp/out) and waits for epoch 1.
start_long() {
  rm -rf "$tmp/out"
  timeout 120 "$across" --output-filename "$tmp/out" "$dsp" train "$tmp/part" --epochs 500 \
    "${train_args[@]}" >"$tmp/log" 2>&1 &
  job=$!
  local t0
  t0=$(now_ms)
  until grep -qs '^epoch' "$tmp/log" "$tmp"/out/1/rank.0/stderr; do
    (( $(now_ms) - t0 < 60000 )) || fail "training did not start"
    sleep 0.05
  done
}

# Waits until no dsp rank process is left in either namespace; prints the milliseconds since $1.
wait_ranks_gone() {
  local t0=$1 limit_ms=$2 left
  while :; do
    left=0
    for ns in "$A" "$B"; do
      for p in $(ip netns pids "$ns"); do
        [[ "$(readlink "/proc/$p/exe" 2>/dev/null)" == "$dsp" ]] && left=$((left + 1))
      done
    done
    ((left == 0)) && break
    (( $(now_ms) - t0 < limit_ms )) || fail "$left rank(s) still running $limit_ms ms after the fault"
    sleep 0.05
  done
  echo $(( $(now_ms) - t0 ))
}

for c in "${cases[@]}"; do
  case "$c" in
    equal)
      run_equal equal
      ;;
    degraded)
      if ip netns exec "$B" tc qdisc add dev "${B}v" root netem delay 20ms 5ms loss 2% 2>/dev/null &&
         ip netns exec "$A" tc qdisc add dev "${A}v" root netem delay 20ms 5ms loss 2%; then
        how="netem delay 20 ms +- 5 ms, loss 2% each way"
      else
        # No netem in this kernel: a 100 Mbit/s token bucket with a 2 ms queue delays bursts and
        # drops what overflows the queue (TCP retransmits it).
        for ns in "$A" "$B"; do
          ip netns exec "$ns" tc qdisc add dev "${ns}v" root tbf rate 100mbit burst 32kb latency 2ms ||
            fail "tc tbf"
        done
        how="no netem in this kernel: token bucket 100 Mbit/s, 2 ms queue, drops on overflow"
      fi
      run_equal degraded
      echo "degraded: $how; dropped packets: $(ip netns exec "$A" tc -s qdisc show dev "${A}v" |
        grep -o 'dropped [0-9]*' | head -1) (A), $(ip netns exec "$B" tc -s qdisc show dev "${B}v" |
        grep -o 'dropped [0-9]*' | head -1) (B)"
      for ns in "$A" "$B"; do ip netns exec "$ns" tc qdisc del dev "${ns}v" root; done
      ;;
    cut)
      export DSP_COMM_TIMEOUT=3
      ip netns exec "$A" sysctl -qw net.ipv4.tcp_retries2=3 || fail "sysctl tcp_retries2 in $A"
      start_long
      t0=$(now_ms)
      ip -n "$B" link set "${B}v" down
      ms=$(wait_ranks_gone "$t0" 15000)
      # The launcher itself must return (non-zero) soon after its ranks, not hang on the daemon
      # it can no longer reach.
      while kill -0 "$job" 2>/dev/null && (( $(now_ms) - t0 < 20000 )); do sleep 0.05; done
      launcher_ms=$(( $(now_ms) - t0 ))
      if kill -0 "$job" 2>/dev/null; then
        for ns in "$A" "$B"; do
          for p in $(ip netns pids "$ns"); do kill -9 "$p" 2>/dev/null; done
        done
        fail "cut: mpirun still running 20000 ms after B's link went down (its ranks ended after $ms ms)"
      fi
      wait "$job"
      launcher_rc=$?
      ((launcher_rc != 0 && launcher_rc != 124)) || fail "cut: mpirun exited with $launcher_rc"
      ip -n "$B" link set "${B}v" up
      ip netns exec "$A" sysctl -qw net.ipv4.tcp_retries2=15
      grep -qs 'on rank 0; ranks that did not arrive: 1 (not responding' "$tmp"/out/1/rank.0/stderr ||
        fail "cut: rank 0 did not name rank 1: $(cat "$tmp"/out/1/rank.0/stderr)"
      grep -qs 'on rank 1; ranks that did not arrive: 0 (not responding' "$tmp"/out/1/rank.1/stderr ||
        fail "cut: rank 1 did not name rank 0: $(cat "$tmp"/out/1/rank.1/stderr)"
      grep -h '^dsp: ' "$tmp"/out/1/rank.*/stderr
      echo "cut: every rank ended $ms ms after B's link went down (DSP_COMM_TIMEOUT=3), mpirun" \
        "$launcher_ms ms after (exit code $launcher_rc)"
      ;;
    kill)
      export DSP_COMM_TIMEOUT=60
      start_long
      pid=""
      for _ in $(seq 100); do
        for p in $(ip netns pids "$B"); do
          [[ "$(readlink "/proc/$p/exe" 2>/dev/null)" == "$dsp" ]] && pid=$p
        done
        [[ -n "$pid" ]] && break
        sleep 0.05
      done
      [[ -n "$pid" ]] || fail "kill: no rank on host B: $(ip netns pids "$B" | xargs -r ps -o pid,args -p)"
      t0=$(now_ms)
      kill -9 "$pid"
      ms=$(wait_ranks_gone "$t0" 5000)
      wait "$job" 2>/dev/null
      # dsp's own line, once: rank 0 saw rank 1's liveness connection close (ccc/mpi/peer_watch.hpp).
      want="dsp: rank 1 vanished (host $B): its connection to rank 0 closed without a word (killed by a signal, or crashed)"
      [[ "$(grep '^dsp: ' "$tmp/log")" == "$want" ]] || fail "kill: not the one line '$want'"
      grep -hE "rank 1 .*(signal 9|vanished)" "$tmp/log"
      echo "kill: every rank ended $ms ms after rank 1 on host B was killed"
      ;;
    *)
      fail "unknown case $c"
      ;;
  esac
done
echo "PASS: ${cases[*]}"
