#!/usr/bin/env python3
"""Chaos test of dsp train --resume auto: a multi-rank job SIGKILLed at seeded random moments.

A small job (Cora, a checkpoint every epoch, --metrics, one thread per rank, the pipeline off)
runs once uninterrupted (the reference), then again in another directory where a random rank is
SIGKILLed at a random moment (seeded) K times; after each kill the same command, which always
carries --resume auto, is started again, until the job completes. It must end with:
  * the final checkpoint's parameters bit-identical to the reference's (the checksums its header
    records for every tensor, which load verifies), its optimizer state's tensors too (compared
    inside the nested archive: its bytes hold addresses), epoch and step equal;
  * the same --metrics records (one per epoch, in order, equal but for timing fields);
  * no more than --keep-checkpoints rotated checkpoints left, checkpoint.pt the newest.
Prints the figures (kills, starts, wall time vs the reference's). Exit 77: skipped, with why.

Usage: chaos.py DSP MPIEXEC DATA_DIR [--ranks N] [--kills K] [--epochs E] [--seed S] [--long]
  --long: the by-hand variant, 4 ranks and 20 kills (minutes).
"""
import argparse
import hashlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile

from ranks import rank_pids

# Fields of a metrics record that measure time, not what was computed (and those named t_*).
TIMING = ("_s", "_ms", "_ns", "seconds", "per_s", "time")


def untimed(v):
    if isinstance(v, dict):
        return {k: untimed(x) for k, x in v.items()
                if not k.endswith(TIMING) and not k.startswith("t_")}
    if isinstance(v, list):
        return [untimed(x) for x in v]
    return v


def header(path):
    """The JSON header of a dsp checkpoint (a uint8 tensor of the archive, sorted keys)."""
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            with z.open(name) as f:
                head = f.read(14)
            if head == b'{"checksums":{':
                return json.loads(z.read(name))
    raise AssertionError(f"{path}: no checkpoint header found")


def optimizer_tensors(path):
    """The optimizer state's tensors of a dsp checkpoint, as a sorted list of their bytes' digests.

    The state is a nested LibTorch archive (a uint8 tensor) that keys each parameter's state by
    its address in memory, so its bytes, and the checksum the header records for them, differ
    between any two processes; the tensors it holds (Adam's moments) are compared instead."""
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            blob = z.read(name)
            if blob[:2] == b"PK" and "/data/" in name:
                with zipfile.ZipFile(io.BytesIO(blob)) as inner:
                    return sorted(hashlib.sha256(inner.read(n)).hexdigest()
                                  for n in inner.namelist() if "/data/" in n)
    raise AssertionError(f"{path}: no optimizer state found")



class Job:
    def __init__(self, a, work):
        self.a, self.work = a, work
        self.ck, self.metrics = f"{work}/ck", f"{work}/metrics.jsonl"
        self.log = open(f"{work}/log", "a")

    def command(self):
        a = self.a
        return [a.mpiexec, "--oversubscribe", "-n", str(a.ranks), a.dsp, "train", a.part,
                "--epochs", str(a.epochs), "--batch-size", str(a.batch_size), "--fanouts", "5,5",
                "--hidden", "32", "--seed", "3", "--threads", "1", "--pipeline", "off",
                "--no-progress", "--checkpoint-dir", self.ck, "--checkpoint-every", "1",
                "--metrics", self.metrics, "--resume", "auto", "--embedding-dim",
                str(a.embedding_dim)]

    def start(self):
        self.log.write(f"---- start at {time.strftime('%H:%M:%S')}\n")
        self.log.flush()
        p = subprocess.Popen(self.command(), stdout=self.log, stderr=subprocess.STDOUT,
                             start_new_session=True)
        RUNNING.append(p)
        return p


RUNNING = []  # every job started: ended (its whole session) when the script ends


def end_jobs():
    for p in RUNNING:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def fail(msg, work=None):
    print(f"FAIL: {msg}")
    if work and os.path.exists(f"{work}/log"):
        print("---- output (last 60 lines)")
        with open(f"{work}/log") as f:
            print("".join(f.readlines()[-60:]))
    sys.exit(1)


def wait_polling(p, log, limit):
    """Waits for the job; returns (exit code, seconds until its first epoch line or None)."""
    t0 = time.monotonic()
    first = None
    while p.poll() is None:
        if time.monotonic() - t0 > limit:
            os.killpg(p.pid, signal.SIGKILL)
            return None, first
        if first is None:
            with open(log) as f:
                if "\nepoch " in f.read():
                    first = time.monotonic() - t0
        time.sleep(0.01)
    return p.returncode, first


def run_reference(a, tmp):
    """The uninterrupted run: (job, seconds until training, seconds of training)."""
    ref = Job(a, f"{tmp}/ref")
    t0 = time.monotonic()
    rc, startup = wait_polling(ref.start(), f"{ref.work}/log", a.limit)
    if rc != 0 or startup is None:
        fail("the uninterrupted run failed", ref.work)
    return ref, startup, time.monotonic() - t0 - startup


def epochs_done(job):
    """The newest complete checkpoint's epoch (0: none) as the next start will find it."""
    done = [int(n[len("checkpoint-"):-3]) for n in os.listdir(job.ck)
            if n.startswith("checkpoint-") and n.endswith(".pt")] if os.path.isdir(job.ck) else []
    return max(done, default=0)


def records(path):
    try:
        with open(path) as f:
            return f.read().count("\n")
    except OSError:
        return 0


def trains(job, offset):
    """Whether the start whose output begins at `offset` of the log has printed an epoch line."""
    with open(f"{job.work}/log") as f:
        f.seek(offset)
        return "\nepoch " in f.read()


def overran(job, offset, moment):
    """Whether this start is past where `moment` aimed: training began (a startup kill), or the
    epoch after E finished (an epoch kill)."""
    if moment[0] == "startup":
        return trains(job, offset)
    return records(job.metrics) > moment[1]


def kill_moment(a, job, rng, kills_left, startup_s, epoch_s):
    """Where this start is killed: ("startup", seconds) a quarter of the time, else ("epoch", E,
    seconds): that long after the metrics file holds E records (none half of the time), so the
    kill lands in epoch E's checkpoint write, the next epoch's steps or its evaluation whatever
    the machine's speed. E is drawn from
    the next (epochs left but the last) / (kills left) epochs, so every kill finds epochs to
    interrupt."""
    done = epochs_done(job)
    left = a.epochs - 2 - done
    if rng.random() < 0.25 or left < 1:
        return ("startup", rng.uniform(0.1, 0.7) * startup_s)
    span = max(1, left // max(1, kills_left))
    # Half of them at once: rank 0 is then writing epoch E's checkpoint (its record comes first).
    return ("epoch", done + rng.randint(1, span), rng.choice([0.0, rng.uniform(0, epoch_s)]))


def run_chaos(a, tmp, startup_s, train_s):
    """Kills and restarts until the job completes; returns (job, kills, starts, seconds)."""
    rng = random.Random(a.seed)
    job = Job(a, f"{tmp}/chaos")
    kills = starts = 0
    t0 = time.monotonic()
    while True:
        moment = kill_moment(a, job, rng, a.kills - kills, startup_s, train_s / a.epochs)
        victim = rng.randrange(a.ranks)
        offset = os.path.getsize(f"{job.work}/log")
        p = job.start()
        starts += 1
        if kills < a.kills:
            pid = None  # looked up while waiting, so that a kill "at once" is within ms
            if moment[0] == "epoch":
                # Records counted once this start trains (it first cuts the file to its checkpoint).
                while not (trains(job, offset) and records(job.metrics) >= moment[1]) and \
                        p.poll() is None:
                    pid = pid or rank_pids(p.pid, a.ranks, job.ck).get(victim)
                    time.sleep(0.002)
            deadline = time.monotonic() + moment[-1]
            # The moment was scaled by the reference run, which a loaded machine slows: a delay
            # that outlasts this start's startup (or its next epoch) ends there, so every kill
            # lands before the job can complete.
            while time.monotonic() < deadline and p.poll() is None and \
                    not overran(job, offset, moment):
                time.sleep(0.002)
            while pid is None and p.poll() is None:  # an early moment: the ranks not yet there
                pid = rank_pids(p.pid, a.ranks, job.ck).get(victim)
            if p.poll() is not None:
                pid = None
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
                kills += 1
                where = "in startup" if moment[0] == "startup" else f"after epoch {moment[1]}"
                job.log.write(f"---- SIGKILL rank {victim} {where} + {moment[-1]:.3f} s\n")
                job.log.flush()
        try:
            rc = p.wait(timeout=a.limit)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            fail("a start of the job hung", job.work)
        if rc == 0:
            if kills < a.kills:
                fail(f"the job completed after {kills} of {a.kills} kills", job.work)
            return job, kills, starts, time.monotonic() - t0
        if starts > 2 * a.kills + 3:
            fail(f"the job failed (exit {rc}) without a kill, or never completed", job.work)


def check(a, ref, job):
    last = f"{job.ck}/checkpoint-{a.epochs}.pt"
    if not os.path.exists(last):
        fail(f"{last} missing", job.work)
    want, got = header(f"{ref.ck}/checkpoint-{a.epochs}.pt"), header(last)
    want["checksums"].pop("optimizer")
    got["checksums"].pop("optimizer")
    want["optimizer"] = optimizer_tensors(f"{ref.ck}/checkpoint-{a.epochs}.pt")
    got["optimizer"] = optimizer_tensors(last)
    for key in ("checksums", "optimizer", "epoch", "step", "world_size"):
        if want[key] != got[key]:
            fail(f"{key} differs from the uninterrupted run's: {got[key]} vs {want[key]}",
                 job.work)
    if header(f"{job.ck}/checkpoint.pt") != header(last):
        fail("checkpoint.pt is not the newest checkpoint", job.work)
    rotated = sorted(n for n in os.listdir(job.ck) if n.startswith("checkpoint-")
                     and n.endswith(".pt"))
    if len(rotated) > 2:
        fail(f"more checkpoints kept than --keep-checkpoints 2: {rotated}", job.work)
    with open(ref.metrics) as f:
        want_m = [untimed(json.loads(x)) for x in f]
    with open(job.metrics) as f:
        got_m = [untimed(json.loads(x)) for x in f]
    if [r["epoch"] for r in got_m] != list(range(1, a.epochs + 1)):
        fail(f"metrics epochs {[r['epoch'] for r in got_m]}", job.work)
    for w, g in zip(want_m, got_m):
        if w != g:
            diff = {k: (g.get(k), w.get(k)) for k in set(w) | set(g) if w.get(k) != g.get(k)}
            fail(f"epoch {w['epoch']}'s metrics record differs (got, want): {diff}", job.work)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dsp")
    ap.add_argument("mpiexec")
    ap.add_argument("data")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--kills", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--embedding-dim", type=int, default=8,
                    help="learnt embedding columns (each rank's shard beside each checkpoint)")
    ap.add_argument("--limit", type=float, default=120, help="seconds one start may take")
    ap.add_argument("--long", action="store_true", help="4 ranks, 20 kills, 200 epochs")
    ap.add_argument("--keep", help="keep the work directory here")
    a = ap.parse_args()
    if a.long:
        a.ranks, a.kills, a.epochs = 4, 20, 200
    if shutil.which(a.mpiexec) is None and not os.path.exists(a.mpiexec):
        print(f"SKIP: no {a.mpiexec}")
        sys.exit(77)
    os.environ.setdefault("DSP_COMM_TIMEOUT", "60")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a timeout's TERM: end the jobs too
    tmp = tempfile.mkdtemp(prefix="dsp-chaos-")
    try:
        for d in ("ref", "chaos"):
            os.makedirs(f"{tmp}/{d}")
        subprocess.run([a.dsp, "convert", "--from", "ogb", f"{a.data}/cora", f"{tmp}/cora"],
                       check=True, stdout=subprocess.DEVNULL)
        a.part = f"{tmp}/part"
        subprocess.run([a.dsp, "partition", f"{tmp}/cora", a.part, "--parts", str(a.ranks)],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ref, startup_s, train_s = run_reference(a, tmp)
        ref_s = startup_s + train_s
        job, kills, starts, chaos_s = run_chaos(a, tmp, startup_s, train_s)
        check(a, ref, job)
        with open(f"{job.work}/log") as f:
            lines = f.readlines()
        skipped = sum("--resume auto: skipping" in x for x in lines)
        # Restarts that dropped a metrics record: killed after epoch E's record, resumed before E.
        redone, killed_after = 0, None
        for x in lines:
            if x.startswith("---- SIGKILL") and "after epoch" in x:  # a startup kill: no change
                killed_after = int(x.split("after epoch ")[1].split()[0])
            elif "resumed from" in x and killed_after is not None:
                redone += int(x.split("after epoch ")[1].split()[0]) < killed_after
                killed_after = None
        print(f"chaos: {a.ranks} ranks, {a.epochs} epochs, seed {a.seed}: {kills} kills, "
              f"{starts} starts, {redone} epoch record(s) dropped and trained again, {skipped} "
              f"incomplete or damaged checkpoint(s) skipped; {chaos_s:.1f} s vs "
              f"{ref_s:.1f} s uninterrupted; parameters, optimizer state and metrics records "
              "identical")
    finally:
        end_jobs()
        if a.keep:
            shutil.copytree(tmp, a.keep, dirs_exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
