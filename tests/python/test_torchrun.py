"""dsp.Loader under torchrun: its collectives over the torch.distributed process group (gloo
groups of its own, no MPI) give the batches mpirun gives, the DDP example trains to the same
accuracy, a failing rank ends the job, and a partition of the wrong size is one clear error.

Debian's torchrun 1.13 needs --redirects/--tee on Python 3.11 (its default "0" parses to None),
and takes --nproc_per_node (newer torch accepts both spellings)."""
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import time

import pytest

import dsp

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
# Multi-process jobs: not in the quick tier; the gate keeps 2 processes, the collectives, a failing
# rank and the missing-backend refusal, the full tier the rest (scripts/test.sh).
pytestmark = [pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                 reason="torch.distributed with gloo is not available"),
              pytest.mark.slow]

HERE = pathlib.Path(__file__).resolve().parent
EXAMPLES = HERE.parents[1] / "examples"
SCRIPT = HERE / "torchrun_loader.py"
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1"}
needs_mpirun = pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun not installed")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(nproc, *args, env=None, timeout=240):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
           "--redirects", "1", "--tee", "1", "--master_port", str(free_port()), *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))


def mpirun(nproc, *args, timeout=240):
    cmd = ["mpirun", "--oversubscribe", "-np", str(nproc), sys.executable, *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **MPI_ENV))


def ranks(out_dir, nproc):
    return [json.loads((out_dir / f"rank{r}.json").read_text()) for r in range(nproc)]


@needs_mpirun
@pytest.mark.parametrize("nproc", [pytest.param(1, marks=pytest.mark.full), 2])
def test_same_batches_as_mpirun(request, nproc, tmp_path):
    part = request.getfixturevalue(f"cora_p{nproc}")
    (tmp_path / "torchrun").mkdir()
    (tmp_path / "mpirun").mkdir()
    r = torchrun(nproc, SCRIPT, "digest", part, tmp_path / "torchrun")
    assert r.returncode == 0, r.stdout + r.stderr
    r = mpirun(nproc, SCRIPT, "digest", part, tmp_path / "mpirun")
    assert r.returncode == 0, r.stdout + r.stderr
    got, want = ranks(tmp_path / "torchrun", nproc), ranks(tmp_path / "mpirun", nproc)
    assert [d["backend"] for d in got] == ["torch"] * nproc
    assert [d["backend"] for d in want] == ["mpi"] * nproc
    assert [(d["rank"], d["size"]) for d in got] == [(p, nproc) for p in range(nproc)]
    for g, w in zip(got, want):
        assert g["steps"] == w["steps"] and len(g["batches"]) >= g["steps"] > 0
        assert g["batches"] == w["batches"]  # seeds, blocks, features, labels of every batch


@pytest.mark.parametrize("nproc", [2, pytest.param(3, marks=pytest.mark.full)])
def test_every_collective(nproc, tmp_path):
    """One of every op over the torch backend: the closed-form results, and MPI's results and
    byte counters (ccc/communicator.hpp's accounting rules)."""
    (tmp_path / "torchrun").mkdir()
    r = torchrun(nproc, SCRIPT, "probe", "-", tmp_path / "torchrun")
    assert r.returncode == 0, r.stdout + r.stderr
    got = ranks(tmp_path / "torchrun", nproc)
    n = nproc
    for me, d in enumerate(got):
        assert (d["backend"], d["rank"], d["size"]) == ("torch", me, n)
        assert d["recv_counts"] == [(p + me) % 3 for p in range(n)]
        assert d["all_to_all_v"] == [100 * p + 10 * me + k for p in range(n)
                                     for k in range((p + me) % 3)]
        assert d["sum_i32"] == [n * (n + 1) // 2, -n * (n - 1) // 2]
        assert d["max_f64"] == [0.5 * (n - 1), 0.0]
        assert d["min_f32"] == [0.25]
        assert d["broadcast"] == [42, n - 1]
        assert d["all_gather"] == [v for p in range(n) for v in (p, p + 0.5)]
        assert d["ops"] == 8  # exchange_counts, all_to_all_v, 3 all_reduce, broadcast, ...
    if shutil.which("mpirun") is None:
        return
    (tmp_path / "mpirun").mkdir()
    m = mpirun(nproc, SCRIPT, "probe", "-", tmp_path / "mpirun")
    assert m.returncode == 0, m.stdout + m.stderr
    for g, w in zip(got, ranks(tmp_path / "mpirun", nproc)):
        assert w["backend"] == "mpi"
        assert {k: v for k, v in g.items() if k != "backend"} == \
            {k: v for k, v in w.items() if k != "backend"}


@pytest.mark.full
def test_example_same_accuracy_as_mpirun(cora):
    """Same seed, same partition on the fly, same DDP: the same losses and accuracies."""
    epochs = "10"
    r = torchrun(2, EXAMPLES / "ddp_sage.py", cora, epochs)
    assert r.returncode == 0, r.stdout + r.stderr
    rank0 = [ln.split(":", 1)[1] for ln in r.stdout.splitlines() if ln.startswith("[default0]:")]
    lines = [ln for ln in rank0 if re.match(r"(epoch|best val) ", ln)]
    assert len(lines) == int(epochs) + 1, r.stdout
    if shutil.which("mpirun") is None:
        return
    m = mpirun(2, EXAMPLES / "ddp_sage.py", cora, epochs)
    assert m.returncode == 0, m.stdout + m.stderr
    want = [ln for ln in m.stdout.splitlines() if re.match(r"(epoch|best val) ", ln)]
    assert lines == want
    assert float(re.search(r"test at best val ([0-9.]+)", lines[-1]).group(1)) >= 0.75


def exit_codes(stderr):
    """torchrun's summary: {rank: exit code}."""
    return {int(r): int(c) for r, c in
            re.findall(r"rank\s*: (\d+) \(local_rank: \d+\)\s*\n\s*exitcode\s*: (-?\d+)", stderr)}


def test_failing_rank_ends_the_job(cora_p2, tmp_path):
    """Rank 1 raises after its first batch: rank 0 (waiting in a collective) ends itself with
    rank 1's message, read from the store's abort key, instead of waiting for torchrun."""
    t = time.monotonic()
    r = torchrun(2, SCRIPT, "fail", cora_p2, tmp_path)
    assert time.monotonic() - t < 60
    assert r.returncode != 0
    msg = "dsp: error on rank 1: RuntimeError: rank 1 fails on purpose"
    assert r.stderr.count(msg) == 2, r.stderr  # rank 1's own line and rank 0's
    assert exit_codes(r.stderr) == {0: 1, 1: 1}, r.stderr


@pytest.mark.full
def test_killed_rank_ends_the_job(cora_p2, tmp_path):
    """Rank 1 is killed (no message left): rank 0's collective fails and it ends the job."""
    r = torchrun(2, SCRIPT, "kill", cora_p2, tmp_path)
    assert r.returncode != 0
    assert re.search(r"dsp: \S+ '[^']*' failed on rank 0 \(backend torch\): ", r.stderr), r.stderr
    assert exit_codes(r.stderr) == {0: 1, 1: -9}, r.stderr


@pytest.mark.full
def test_stalled_rank_times_out(cora_p2, tmp_path):
    """Rank 1 stops after its first batch: rank 0's op times out (DSP_COMM_TIMEOUT) naming the
    op and the backend, and the job ends long before rank 1 would wake."""
    t = time.monotonic()
    r = torchrun(2, SCRIPT, "stall", cora_p2, tmp_path, env={"DSP_COMM_TIMEOUT": "2"})
    assert time.monotonic() - t < 60
    assert r.returncode != 0
    assert re.search(r"dsp: \S+ '[^']*' timed out after 2\.0 s on rank 0 \(backend torch: a peer "
                     r"did not join it\)", r.stderr), r.stderr
    assert exit_codes(r.stderr)[0] == 1, r.stderr


@pytest.mark.full
def test_wrong_group_size(cora_p2, tmp_path):
    r = torchrun(1, SCRIPT, "digest", cora_p2, tmp_path)
    assert r.returncode != 0
    assert (f"dsp.InvalidArgument: {cora_p2}: the partition has 2 parts but the process group "
            "has 1 ranks; partition again with --parts 1") in r.stderr, r.stderr


def test_process_group_needs_torch_distributed(cora_p1):
    """In this process torch.distributed is not initialised."""
    msg = ("process_group= / backend='torch' needs torch.distributed.init_process_group first "
           "(torchrun sets the environment it reads)")
    with pytest.raises(dsp.InvalidArgument, match=re.escape(msg)):
        dsp.Loader(cora_p1, process_group=object())
    with pytest.raises(dsp.InvalidArgument, match=re.escape(msg)):
        dsp.Loader(cora_p1, backend="torch")
    with pytest.raises(dsp.InvalidArgument, match="backend='mpi' elsewhere: give one of them"):
        dsp.Loader(cora_p1, backend="mpi", process_group=object())
