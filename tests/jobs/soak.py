#!/usr/bin/env python3
"""Soak test of dsp train: a long 4-rank job (pipeline on) whose every rank's resident memory, open
file descriptors and thread count stay flat once it has warmed up.

A small community graph is generated and partitioned (steps of a few milliseconds), then trained
under mpirun (4 ranks, --pipeline on, one thread per rank, evaluation every epoch, a checkpoint
every few epochs) for a fixed wall time; the script samples each rank once a second:
/proc/<pid>/status VmRSS, the entries of /proc/<pid>/fd and of /proc/<pid>/task. The samples
taken once training runs (its first --metrics record) are cut into quarters: the first quarter is
the warm-up (allocator arenas, caches and queues reaching their working size) and is ignored; the
second is the baseline; over the last half, each rank's maximum must not exceed the baseline's
maximum by more than the bound: --rss-bound MiB of resident memory (8: allocator noise is well
under 1 MiB), --count-bound descriptors and threads (2: one a checkpoint write holds open, a
short-lived helper thread caught by a sample; a leak grows without end). A leak of L bytes per step raises the last half's maximum over the baseline's by about L
times the steps of the last half, so the run reports the smallest leak per step it would catch
(the bound over those steps). The job is ended (SIGTERM, then SIGKILL) after the wall time; it
must not exit on its own before.

--inject KIND:RATE preloads tests/jobs/soak_leak.c into the ranks (built here with the system C
compiler), which leaks RATE bytes (rss), descriptors (fd) or threads (thread) per second: the run
must then fail; --expect-leak turns that into the test's success (exit 0 only when the check
fails naming that quantity), so the check itself is tested.

Prints the figures (per rank: first and last value of each quantity, the growth, steps, steps/s).
Exit 1: a quantity grew past its bound, the job failed or trained too few steps. Exit 77: skipped.

Usage: soak.py DSP MPIEXEC [--seconds S] [--long] [--rss-bound MiB] [--inject KIND:RATE]
                           [--expect-leak] [--keep DIR]
  --long: the by-hand variant, 12 minutes.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from ranks import rank_pids

RANKS = 4
QUANTITIES = ("rss_mib", "fds", "threads")
RUNNING = []  # the job's process (its own session), ended when the script ends


def end_jobs():
    for p in RUNNING:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            except ProcessLookupError:
                pass


def fail(msg, work=None):
    print(f"FAIL: {msg}")
    if work and os.path.exists(f"{work}/log"):
        print("---- output (last 40 lines)")
        with open(f"{work}/log") as f:
            print("".join(f.readlines()[-40:]))
    sys.exit(1)



def sample(pid):
    """(VmRSS in MiB, open descriptors, threads) of `pid`; None when it has gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            rss_kib = next(int(x.split()[1]) for x in f if x.startswith("VmRSS:"))
        return (rss_kib / 1024, len(os.listdir(f"/proc/{pid}/fd")),
                len(os.listdir(f"/proc/{pid}/task")))
    except (OSError, StopIteration):
        return None


def steps_done(metrics):
    """Steps trained so far (rank 0's --metrics records, one per epoch) and the records."""
    try:
        with open(metrics) as f:
            lines = [x for x in f.read().split("\n") if x.strip()]
    except OSError:
        return 0, 0
    steps = 0
    for x in lines:
        try:
            steps += json.loads(x)["pipeline"]["steps"]
        except (ValueError, KeyError, TypeError):
            pass  # the last line while it is being written
    return steps, len(lines)


def setup(a, tmp):
    """Generates and partitions the graph; returns the partition's directory."""
    graph, part = f"{tmp}/graph", f"{tmp}/part"
    run = lambda *cmd: subprocess.run([a.dsp, *cmd], check=True, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
    run("generate", "community", graph, "--nodes", str(a.nodes), "--edges", str(8 * a.nodes),
        "--features", "16", "--classes", "4", "--train-frac", "0.8", "--valid-frac", "0.1",
        "--seed", "1")
    run("partition", graph, part, "--parts", str(RANKS))
    return part


def build_leak(tmp):
    here = os.path.dirname(os.path.abspath(__file__))
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        print("SKIP: --inject needs a C compiler (cc)")
        sys.exit(77)
    lib = f"{tmp}/soak_leak.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-pthread", f"{here}/soak_leak.c", "-o", lib],
                   check=True)
    return lib


def start(a, tmp, part):
    env = dict(os.environ)
    if a.inject:
        env["LD_PRELOAD"] = build_leak(tmp)
        env["DSP_SOAK_LEAK"] = a.inject
    cmd = [a.mpiexec, "--oversubscribe", "-n", str(RANKS), a.dsp, "train", part,
           "--epochs", "1000000", "--batch-size", "16", "--fanouts", "5,5", "--hidden", "16",
           "--threads", "1", "--pipeline", "on", "--no-progress", "--metrics",
           f"{tmp}/metrics.jsonl", "--eval-max-nodes", "64", "--checkpoint-dir", f"{tmp}/ck",
           "--checkpoint-every", "5", "--keep-checkpoints", "2"]
    log = open(f"{tmp}/log", "w")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                         start_new_session=True)
    RUNNING.append(p)
    return p


def soak(a, tmp, p):
    """Samples every rank once a second from the first --metrics record for a.seconds; returns
    {rank: [(t, steps, rss_mib, fds, threads)]} and the seconds training took to start."""
    t0 = time.monotonic()
    while steps_done(f"{tmp}/metrics.jsonl")[1] == 0:
        if p.poll() is not None:
            fail(f"the job exited ({p.returncode}) before its first epoch ended", tmp)
        if time.monotonic() - t0 > 120:
            fail("no epoch ended within 120 s", tmp)
        time.sleep(0.2)
    startup = time.monotonic() - t0
    pids = rank_pids(p.pid, RANKS)
    if len(pids) != RANKS:
        fail(f"found the processes of ranks {sorted(pids)} only", tmp)
    samples = {r: [] for r in pids}
    t1 = time.monotonic()
    while (now := time.monotonic()) - t1 < a.seconds:
        if p.poll() is not None:
            fail(f"the job exited ({p.returncode}) during the soak", tmp)
        steps = steps_done(f"{tmp}/metrics.jsonl")[0]
        for r, pid in pids.items():
            s = sample(pid)
            if s is None:
                fail(f"rank {r} (pid {pid}) has gone", tmp)
            samples[r].append((now - t1, steps) + s)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - now)))
    return samples, startup


def growth(rows, column):
    """The last half's maximum of `column` over the second quarter's (the first is warm-up)."""
    n = len(rows)
    base = [r[column] for r in rows[n // 4:n // 2]]
    last = [r[column] for r in rows[n // 2:]]
    return max(last) - max(base)


def check(samples, bounds):
    """The quantities that grew past their bound: [(rank, quantity, growth)]."""
    faults = []
    for r, rows in sorted(samples.items()):
        for i, q in enumerate(QUANTITIES):
            g = growth(rows, 2 + i)
            if g > bounds[q]:
                faults.append((r, q, g))
    return faults


def report(a, samples, startup):
    rows0 = samples[0]
    n = len(rows0)
    steps, half = rows0[-1][1], rows0[-1][1] - rows0[n // 2][1]
    print(f"soak: {RANKS} ranks, pipeline on, {a.nodes} nodes: {n} samples over "
          f"{rows0[-1][0]:.0f} s after a {startup:.1f} s start, {steps} steps "
          f"({steps / max(rows0[-1][0], 1e-9):.1f}/s), {half} in the last half")
    for r, rows in sorted(samples.items()):
        figs = ", ".join(
            f"{q} {rows[0][2 + i]:.1f} -> {rows[-1][2 + i]:.1f} (growth {growth(rows, 2 + i):+.1f})"
            if q == "rss_mib" else
            f"{q} {rows[0][2 + i]} -> {rows[-1][2 + i]} (range {min(x[2 + i] for x in rows)}.."
            f"{max(x[2 + i] for x in rows)}, growth {growth(rows, 2 + i):+d})"
            for i, q in enumerate(QUANTITIES))
        print(f"  rank {r}: {figs}")
    if half > 0:
        print(f"  bounds: growth of rss <= {a.rss_bound} MiB, of fds and threads <= "
              f"{a.count_bound}: a leak of {a.rss_bound * 2**20 / half:.0f} bytes/step, or of "
              f"one descriptor or thread per {half // (a.count_bound + 1)} steps, exceeds them")
    return half


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dsp")
    ap.add_argument("mpiexec")
    ap.add_argument("--seconds", type=float, default=40, help="sampled wall time after warm-up")
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--rss-bound", type=float, default=8.0, help="MiB per rank")
    ap.add_argument("--count-bound", type=int, default=2,
                    help="descriptors and threads per rank (a checkpoint write's file, a helper "
                         "thread of the pipeline's that happens to be sampled)")
    ap.add_argument("--min-steps", type=int, default=1000, help="steps the soak must train")
    ap.add_argument("--long", action="store_true", help="12 minutes of sampling")
    ap.add_argument("--inject", help="KIND:RATE, a leak preloaded into the ranks (soak_leak.c)")
    ap.add_argument("--expect-leak", action="store_true",
                    help="succeed only when the check fails on the --inject'ed quantity")
    ap.add_argument("--keep", help="keep the work directory here")
    a = ap.parse_args()
    if a.long:
        a.seconds, a.min_steps = 720, 10000
    if a.expect_leak and not a.inject:
        ap.error("--expect-leak needs --inject")
    if shutil.which(a.mpiexec) is None and not os.path.exists(a.mpiexec):
        print(f"SKIP: no {a.mpiexec}")
        sys.exit(77)
    os.environ.setdefault("DSP_COMM_TIMEOUT", "60")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a timeout's TERM: end the job too
    tmp = tempfile.mkdtemp(prefix="dsp-soak-")
    try:
        p = start(a, tmp, setup(a, tmp))
        samples, startup = soak(a, tmp, p)
        half = report(a, samples, startup)
        bounds = {"rss_mib": a.rss_bound, "fds": a.count_bound, "threads": a.count_bound}
        faults = check(samples, bounds)
        for r, q, g in faults:
            print(f"rank {r}: {q} grew by {g:.1f} after warm-up (bound {bounds[q]})")
        if a.expect_leak:
            kind = {"rss": "rss_mib", "fd": "fds", "thread": "threads"}[a.inject.split(":")[0]]
            if not any(q == kind for _, q, _ in faults):
                fail(f"the injected leak ({a.inject}) was not caught")
            print(f"the injected leak ({a.inject}) was caught")
            return
        if faults:
            fail("a quantity grew after warm-up", tmp)
        if samples[0][-1][1] < a.min_steps or half <= 0:
            fail(f"{samples[0][-1][1]} steps trained, fewer than {a.min_steps}", tmp)
        print("flat after warm-up")
    finally:
        end_jobs()
        if a.keep:
            shutil.copytree(tmp, a.keep, dirs_exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
