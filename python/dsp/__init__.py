"""dsp: distributed sampling and pipelining for GNN training, from Python.

    import dsp
    dsp.convert_ogb("tests/data/cora", "out/cora")
    dsp.partition("out/cora", "out/cora-p1", parts=1)
    for blocks, x, y in dsp.Loader("out/cora-p1", fanouts=[10, 10], batch_size=64):
        ...  # blocks[0] is the input layer; x: float32 [blocks[0].num_src, F]; y: int64 labels

Under ``mpirun -np P python3 script.py`` every process is one rank (rank and size come from MPI)
and a Loader iterates over the seeds that rank owns. The heavy lifting is in the C++ extension
``dsp._dsp``; this layer only turns its numpy arrays (which own the C++ buffers) into torch
tensors with ``torch.from_numpy``, so no data is copied and the extension does not depend on the
torch ABI.
"""
import os
import sys
from typing import List, NamedTuple, Optional, Sequence

# Open MPI loads its components with dlopen and expects libmpi's symbols to be global; an
# extension module is loaded RTLD_LOCAL by default, which breaks MPI_Init under mpirun.
_flags = sys.getdlopenflags()
sys.setdlopenflags(_flags | os.RTLD_GLOBAL)
try:
    from . import _dsp
finally:
    sys.setdlopenflags(_flags)

import numpy as np

try:
    import torch
except ImportError:  # numpy-only use (dataset tools) still works
    torch = None

from ._dsp import (  # noqa: F401  (re-exported)
    CommError,
    Error,
    FormatError,
    InvalidArgument,
    IoError,
    NotSupported,
    convert_edge_list,
    convert_ogb,
    generate_community,
    generate_rmat,
    load_dataset,
    load_partition_meta,
    partition,
    set_log_level,
)



def _end_job_on_uncaught(exc_type, exc, tb, _previous=sys.excepthook):
    """Under mpirun, an exception no one catches on one rank ends every rank (as ``dsp train``
    does): otherwise this rank's exit would wait in MPI_Finalize for peers that are blocked in a
    collective it will never join. The traceback is printed first."""
    _previous(exc_type, exc, tb)
    if _dsp._job_has_peers():
        _dsp._abort_job(f"error on rank {_dsp._job_rank()}: {exc_type.__name__}: {exc}")


sys.excepthook = _end_job_on_uncaught

__all__ = [
    "Block", "Batch", "Loader", "train", "convert_ogb", "convert_edge_list", "generate_community",
    "generate_rmat", "load_dataset", "load_partition_meta", "partition", "set_log_level", "Error",
    "InvalidArgument", "IoError", "FormatError", "CommError", "NotSupported",
]


class Block(NamedTuple):
    """One layer's message-flow graph (DGL order: blocks[0] is the input layer).

    Destination nodes are the first ``num_dst`` source nodes. ``indptr``/``indices`` are a CSR
    over destination nodes whose entries are local source ids; ``src_ids`` are global ids (of the
    partition's renumbering).
    """
    indptr: "torch.Tensor"
    indices: "torch.Tensor"
    num_src: int
    num_dst: int
    src_ids: "torch.Tensor"
    weights: Optional["torch.Tensor"]


class Batch(NamedTuple):
    blocks: List[Block]
    x: "torch.Tensor"
    y: Optional["torch.Tensor"]
    seeds: "torch.Tensor"
    epoch: int
    step: int


def _tensor(a, as_tensor):
    if a is None or not as_tensor:
        return a
    return torch.from_numpy(a)


def _make_batch(raw, as_tensor) -> Batch:
    blocks_raw, x, y, seeds, epoch, step = raw
    blocks = [
        Block(_tensor(b["indptr"], as_tensor), _tensor(b["indices"], as_tensor), b["num_src"],
              b["num_dst"], _tensor(b["src_ids"], as_tensor), _tensor(b["weights"], as_tensor))
        for b in blocks_raw
    ]
    return Batch(blocks, _tensor(x, as_tensor), _tensor(y, as_tensor),
                 _tensor(seeds, as_tensor), epoch, step)


class Loader:
    """Mini-batches of this rank's seeds, sampled and loaded by dsp's C++ core.

    Iterating yields ``(blocks, x, y)`` per step; ``iter_batches()`` yields :class:`Batch` with
    the seeds too. Each ``for`` loop over the loader is one epoch (0, 1, ...; see
    :meth:`set_epoch`). With ``shuffle=True`` the seeds of every step are those ``dsp train``
    uses for the same ``seed``, and the blocks and features are identical to its batches.

    Args:
        path: a partition directory (``dsp partition``), or a dataset directory, which is then
            partitioned on the fly into one part per rank (``partition_method``).
        fanouts: neighbours per node, from the seeds out (``[15, 10, 5]``).
        batch_size: seeds per rank per step.
        shuffle: a seeded shuffle per epoch (a rank with fewer seeds wraps around, so every rank
            runs the same number of full steps); False: ascending seed order.
        split: "train" (the part's co-partitioned seeds), "valid" or "test" (the owned ids).
        seed: seeds the shuffle and the sampler (a pure function of it: any number of ranks and
            threads gives the same batches).
        prefetch: batches sampled and loaded ahead on a background C++ thread while Python
            trains; 0 samples and loads in ``next()``.
        as_tensor: torch tensors (default when torch is importable) or numpy arrays.
        backend: "auto" (MPI under mpirun, else a single process), "self" or "mpi".

    Under MPI every rank must create the same loaders in the same order and iterate the same
    epochs; an epoch a rank leaves early is finished in the background so its peers are served.
    """

    def __init__(self, path: str, fanouts: Sequence[int] = (15, 10, 5), batch_size: int = 1024,
                 shuffle: bool = True, split: str = "train", seed: int = 0, prefetch: int = 2,
                 as_tensor: Optional[bool] = None, backend: str = "auto",
                 partition_method: str = "metis"):
        if as_tensor is None:
            as_tensor = torch is not None
        if as_tensor and torch is None:
            raise ImportError("dsp.Loader(as_tensor=True) needs torch (python3-torch)")
        self._as_tensor = as_tensor
        self._impl = _dsp._Loader(str(path), [int(f) for f in fanouts], int(batch_size),
                                  bool(shuffle), split, int(seed), int(prefetch), backend,
                                  partition_method)
        self._epoch = 0
        self._generation = 0  # which iteration owns the C++ epoch (see iter_batches)

    # Properties of the rank and the data.
    rank = property(lambda self: self._impl.rank, doc="this process's rank")
    size = property(lambda self: self._impl.size, doc="number of ranks")
    steps = property(lambda self: self._impl.steps, doc="steps per epoch (same on every rank)")
    meta = property(lambda self: self._impl.meta, doc="partition.json as a dict")
    partition_dir = property(lambda self: self._impl.partition_dir)

    @property
    def num_features(self) -> int:
        return int(self.meta["feature_dim"])

    @property
    def num_classes(self) -> int:
        return int(self.meta["num_classes"])

    @property
    def local_seeds(self):
        """This rank's seeds of the split (global ids, ascending)."""
        return _tensor(self._impl.local_seeds, self._as_tensor)

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration runs (it then counts up)."""
        self._epoch = int(epoch)

    def __len__(self) -> int:
        return self.steps

    def iter_batches(self, epoch: Optional[int] = None):
        """One epoch of :class:`Batch` (with seeds, epoch and step)."""
        if epoch is not None:
            self._epoch = int(epoch)
        self._impl.start_epoch(self._epoch)
        self._epoch += 1
        self._generation += 1
        generation = self._generation
        try:
            while True:
                raw = self._impl.next()
                if raw is None:
                    return
                yield _make_batch(raw, self._as_tensor)
        finally:
            # A loop left early ends its epoch here (serving peers), not whenever the generator
            # is collected; an iteration superseded by a newer one must not end the newer epoch.
            if self._impl is not None and generation == self._generation:
                self._impl.finish_epoch()

    def __iter__(self):
        for b in self.iter_batches():
            yield b.blocks, b.x, b.y

    def close(self) -> None:
        """Finishes the current epoch and releases the partition and communicators."""
        if self._impl is not None:
            self._impl.finish_epoch()
            self._impl = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def train(config: dict) -> dict:
    """Runs the built-in trainer (``dsp train``) with a ``--config``-style dict.

    Keys as in a ``dsp train --config`` file (``path``, ``model``, ``fanouts``, ``epochs``, ...).
    Returns the job result: best_val_acc, test_acc_at_best, final_loss, mean_epoch_s, ...
    """
    return _dsp.train(dict(config))


def _reference_epoch(part_dir, fanouts, batch_size, seed, epoch=0):
    """Test hook: one epoch of batches made the way ``dsp train`` makes them (numpy)."""
    return [_make_batch(r, False) for r in
            _dsp._reference_epoch(str(part_dir), list(fanouts), batch_size, seed, epoch)]
