"""dsp.Loader over a torch.distributed process group: the Python side of the "torch"
communicator backend (src/python/pg_communicator.hpp).

Under torchrun (or any launcher followed by ``torch.distributed.init_process_group``) a Loader runs
dsp's collectives over the process group instead of MPI. Each communicator the rank's runtime
makes is a :class:`Channel`, a gloo group of its own over the group's ranks (rendezvous under a
key prefix of the default store, numbered in creation order, which is the same on every rank), so
communicators of different workers never wait on each other. The C++ side calls a channel with
numpy views of its host buffers and polls the returned work with the GIL released.

A rank that ends the job writes its message under the store key ``dsp/abort``; the others read it
about once a second while they wait in an op and end with that message.
"""
import datetime
import os
import sys

from . import _dsp

ABORT_KEY = "dsp/abort"
ABORTED_KEY = "dsp/aborted"  # a counter: > 0 once ABORT_KEY is written (stores lack check())
_made = {}       # key prefix -> channels made so far over those ranks (creation order)
_active = None   # the Group of the latest Loader over a process group, for the uncaught hook


def _dist():
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    return dist if dist.is_available() and dist.is_initialized() else None


def _global_ranks(dist, group):
    if group is None or group is dist.group.WORLD:
        return list(range(dist.get_world_size()))
    if hasattr(dist, "get_process_group_ranks"):
        return list(dist.get_process_group_ranks(group))
    by_group = dist.distributed_c10d._pg_group_ranks[group]  # global -> group rank (torch 1.x)
    return sorted(by_group, key=by_group.get)


class Channel:
    """One communicator's gloo group. Each op launches asynchronously and returns the work."""

    def __init__(self, pg, size):
        self.pg = pg
        self.size = size

    def all_to_all(self, out, inp, out_splits, in_splits):
        import torch
        import torch.distributed as dist
        return self.pg.alltoall_base(torch.from_numpy(out), torch.from_numpy(inp),
                                     list(out_splits), list(in_splits), dist.AllToAllOptions())

    def all_reduce(self, buf, op):
        import torch
        import torch.distributed as dist
        opts = dist.AllreduceOptions()
        opts.reduceOp = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX,
                         "min": dist.ReduceOp.MIN}[op]
        return self.pg.allreduce([torch.from_numpy(buf)], opts)

    def broadcast(self, buf, root):
        import torch
        import torch.distributed as dist
        opts = dist.BroadcastOptions()
        opts.rootRank = int(root)
        opts.rootTensor = 0
        return self.pg.broadcast([torch.from_numpy(buf)], opts)

    def all_gather(self, out, inp):
        import torch
        n = inp.size
        whole = torch.from_numpy(out)
        return self.pg.allgather([[whole[i * n:(i + 1) * n] for i in range(self.size)]],
                                 [torch.from_numpy(inp)])

    def barrier(self):
        return self.pg.barrier()


class Group:
    """The process group a Loader's communicators are made over (rank and size in it)."""

    def __init__(self, dist, group):
        self.group = dist.group.WORLD if group is None else group
        self.rank = dist.get_rank(self.group)
        self.size = dist.get_world_size(self.group)
        if self.rank < 0:
            raise _dsp.InvalidArgument(
                f"process_group: this process (rank {dist.get_rank()} of the world) is not a "
                "member of the group")
        self.store = dist.distributed_c10d._get_default_store()
        self.prefix = "dsp/" + ",".join(map(str, _global_ranks(dist, self.group)))

    def channel(self):
        import torch.distributed as dist
        n = _made.get(self.prefix, 0)
        _made[self.prefix] = n + 1
        store = dist.PrefixStore(f"{self.prefix}/{n}/", self.store)
        # dsp's own op timeout (DSP_COMM_TIMEOUT) ends a stuck op; gloo's only bounds it further.
        pg = dist.ProcessGroupGloo(store, self.rank, self.size, datetime.timedelta(hours=1))
        return Channel(pg, self.size)

    def set_abort(self, message):
        self.store.set(ABORT_KEY, message)
        self.store.add(ABORTED_KEY, 1)

    def abort_message(self):
        if self.store.add(ABORTED_KEY, 0) == 0:  # reads the counter without waiting
            return None
        return self.store.get(ABORT_KEY).decode(errors="replace")


def resolve(process_group, backend):
    """The Group a Loader runs its collectives over, or None (MPI or a single process).

    None with backend "auto": the world group when torch.distributed is initialised and the
    process was not started by an MPI launcher. An explicit group, or backend "torch": that group
    (the world's for "torch" alone). Makes it the group of the backend's next communicators."""
    global _active
    dist = _dist()
    if process_group is None and backend != "torch":
        if backend != "auto" or dist is None or _dsp.launched_by_mpi():
            return None
    if backend not in ("auto", "torch"):
        raise _dsp.InvalidArgument(
            f"process_group= runs dsp's collectives over that group, backend={backend!r} "
            "elsewhere: give one of them")
    if dist is None:
        raise _dsp.InvalidArgument(
            "process_group= / backend='torch' needs torch.distributed.init_process_group first "
            "(torchrun sets the environment it reads)")
    group = Group(dist, process_group)
    _dsp._set_torch_group(group)
    _active = group
    return group


def active():
    """The Group of the latest Loader over a process group (None if none)."""
    return _active


def abort_job(message):
    """Ends the job from Python (the uncaught-exception hook): prints ``dsp: <message>``, writes
    it under the abort key for the other ranks, exits with 1."""
    sys.stdout.flush()
    print(f"dsp: {message}", file=sys.stderr, flush=True)
    try:
        _active.set_abort(message)
    except Exception:  # noqa: BLE001 (the store is gone: peers see their ops fail instead)
        pass
    os._exit(1)
