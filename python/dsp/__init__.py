"""dsp: distributed sampling and pipelining for GNN training, from Python.

    import dsp
    dsp.convert_ogb("tests/data/cora", "out/cora")
    dsp.partition("out/cora", "out/cora-p1", parts=1)
    for blocks, x, y in dsp.Loader("out/cora-p1", fanouts=[10, 10], batch_size=64):
        ...  # blocks[0] is the input layer; x: float32 [blocks[0].num_src, F]; y: int64 labels
        # (a multi-label dataset: int8 [B, L] rows of 0/1; use y.float() for BCE)

Under ``mpirun -np P python script.py`` every process is one rank (rank and size come from MPI)
and a Loader iterates over the seeds that rank owns. The heavy lifting is in the C++ extension
``dsp._dsp``, which links no LibTorch: this layer only turns its numpy arrays (which own the C++
buffers) into torch tensors with ``torch.from_numpy``, so no data is copied and any torch works
(or none: ``as_tensor=False`` gives numpy arrays). ``Block.to_dgl()``, ``Block.to_pyg()`` and
``Batch.to_pyg()`` hand batches to DGL and PyTorch Geometric models; on a heterogeneous
partition batches carry ``x_dict`` and the ``schema``, blocks ``src_types``/``edge_types``, and
the same calls give DGL heterogeneous blocks and PyG's ``HeteroData``. ``dsp.LinkLoader``
batches training edges and their negatives for link prediction. Batches carry the
partition's node ids ("dsp ids"); ``dsp.to_original_ids(path, ids)`` gives the dataset's own ids
back and ``dsp.to_dsp_ids`` goes the other way. ``dsp.load_model`` turns a
checkpoint of ``dsp train`` into ``dsp.GNN``, the same model in plain PyTorch (``model(blocks,
x)``), a typed one (rgcn, hsage) into ``dsp.HeteroGNN`` (``model(blocks, model.inputs(batch,
dsp.load_embedding_table(checkpoint, partition)))``); ``dsp.export_model`` writes it as
``model.json`` plus a ``state_dict.pt`` (these need torch).
"""
import contextlib
import os
import sys
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

# Open MPI loads its components with dlopen and expects libmpi's symbols to be global; an
# extension module is loaded RTLD_LOCAL by default, which breaks MPI_Init under mpirun.
_flags = sys.getdlopenflags()
sys.setdlopenflags(_flags | os.RTLD_GLOBAL)
try:
    from . import _dsp
finally:
    sys.setdlopenflags(_flags)

import numpy  # noqa: F401  (a dependency of the extension's arrays: fail here if missing)

try:
    import torch
except ImportError:  # numpy-only use (dataset tools) still works
    torch = None

from . import _interop, _pg
from ._dsp import (  # noqa: F401  (re-exported)
    CommError,
    Error,
    FormatError,
    InvalidArgument,
    IoError,
    NotSupported,
    load_dataset,
    load_partition_meta,
    set_log_level,
)
from . import _wording

# The CLI's commands, whose messages then name Python's keywords (overwrite=True, not --overwrite).
convert_edge_list = _wording.python_keywords(_dsp.convert_edge_list)
convert_ogb = _wording.python_keywords(_dsp.convert_ogb)
generate_community = _wording.python_keywords(_dsp.generate_community)
generate_hetero = _wording.python_keywords(_dsp.generate_hetero)
generate_rmat = _wording.python_keywords(_dsp.generate_rmat)
partition = _wording.python_keywords(_dsp.partition)
from . import _data
from ._data import convert_ogb_link, from_dgl, from_pyg, save_dataset  # noqa: F401  (re-exported)
from ._hetero_data import load_hetero_dataset, save_hetero_dataset  # noqa: F401  (re-exported)
from ._train import cli_path, embed, predict, train  # noqa: F401  (re-exported)

_MODEL_NAMES = ("GNN", "HeteroGNN", "load_model", "export_model", "load_embedding_table")
if torch is not None:  # the models are torch modules: without torch, dsp.GNN says what is missing
    from ._model import (  # re-exported
        GNN, HeteroGNN, export_model, load_embedding_table, load_model)  # noqa: F401
else:
    def __getattr__(name):
        if name in _MODEL_NAMES:
            _interop.require("torch", f"dsp.{name}", "pip install torch")
        raise AttributeError(f"module 'dsp' has no attribute '{name}'")

__version__ = _dsp.__version__


def build_info() -> Dict[str, object]:
    """How this dsp was built: ``version``; ``cuda`` (the CUDA sampler, feature and NCCL backends
    are compiled in: nvcc was found when ``pip install .`` built it, so ``Loader(device="cuda")``
    can run where a GPU is visible); ``cuda_archs`` (the SM architectures compiled, e.g. "80,90");
    ``trainer`` (the packaged CLI has ``dsp train``)."""
    return {"version": _dsp.__version__, "cuda": bool(_dsp.has_cuda),
            "cuda_archs": _dsp.cuda_archs, "trainer": bool(_dsp.has_trainer)}


def _end_job_on_uncaught(exc_type, exc, tb, _previous=sys.excepthook):
    """Under mpirun (or torchrun, with a Loader over the process group), an exception no one
    catches on one rank ends every rank (as ``dsp train`` does): otherwise this rank's exit would
    leave its peers blocked in a collective it will never join (under MPI, it would wait in
    MPI_Finalize for them). The traceback is printed first."""
    _previous(exc_type, exc, tb)
    if _dsp._job_has_peers():
        _dsp._abort_job(f"error on rank {_dsp._job_rank()}: {exc_type.__name__}: {exc}")
    group = _pg.active()  # a Loader over a torch.distributed process group
    if group is not None and group.size > 1:
        _pg.abort_job(f"error on rank {group.rank}: {exc_type.__name__}: {exc}")


sys.excepthook = _end_job_on_uncaught

__all__ = [
    "Block", "Batch", "Schema", "Loader", "LinkBatch", "LinkPairs", "LinkLoader",
    "to_original_ids", "to_dsp_ids", "train", "predict", "embed", "convert_ogb",
    "convert_ogb_link", "convert_edge_list", "save_dataset", "save_hetero_dataset",
    "load_hetero_dataset", "from_pyg", "from_dgl",
    "generate_community", "generate_hetero", "generate_rmat", "load_dataset",
    "load_partition_meta", "partition",
    "set_log_level", "Error", "InvalidArgument", "IoError", "FormatError", "CommError",
    "NotSupported", "cli_path", "build_info", "__version__",
]
if torch is not None:  # without torch, `from dsp import *` leaves them out
    __all__ += list(_MODEL_NAMES)


class Schema(NamedTuple):
    """A heterogeneous graph's types (``Loader.schema``, ``Batch.schema``): what the integers of
    ``Block.src_types`` and ``Block.edge_types`` index.

    ``node_types``: type names in id order; ``relations``: ``(src type, name, dst type)`` triples
    (DGL's canonical edge types, PyG's edge types) in relation order; ``target_type``: the type
    of the labels, the splits and so the seeds; ``feature_dims``: {type: feature width}, 0 for a
    type without features (absent from ``Batch.x_dict``); ``link_relation``: the relation a link
    split was made on (``dsp generate hetero --link-split``), what :class:`LinkLoader` batches
    score, or None."""
    node_types: List[str]
    relations: List[Tuple[str, str, str]]
    target_type: str
    feature_dims: Dict[str, int]
    num_classes: int
    link_relation: Optional[Tuple[str, str, str]] = None

    @classmethod
    def from_meta(cls, meta) -> Optional["Schema"]:
        """The schema of a partition.json dict (``Loader.meta``); None for a homogeneous one."""
        h = (meta.get("hetero") or {}).get("schema")
        if h is None:
            return None
        link = h.get("link_relation")
        return cls([t["name"] for t in h["node_types"]],
                   [(r["src"], r["name"], r["dst"]) for r in h["relations"]], h["target_type"],
                   {t["name"]: int(t["feature_dim"]) for t in h["node_types"]},
                   int(h["num_classes"]), tuple(link.split("___")) if link else None)


class Block(NamedTuple):
    """One layer's message-flow graph (DGL order: blocks[0] is the input layer).

    Destination nodes are the first ``num_dst`` source nodes. ``indptr``/``indices`` are a CSR
    over destination nodes whose entries are local source ids; ``src_ids`` are global ids (of the
    partition's renumbering). With temporal sampling (``Loader(temporal="uniform"|"recent")``)
    the nodes are (id, time) pairs: ``src_times`` (int64 [num_src]) is the time each source is
    sampled at, a seed's node time inherited along its hops, so one id may appear at several
    times; every edge of the block is older than its destination's time. None otherwise.

    On a heterogeneous graph ``src_types`` (int32 [num_src]) is each source's node type and
    ``edge_types`` (int32 [num_edges]) each edge's relation, indices into ``schema`` (a
    :class:`Schema`); a destination's edges come relation by relation (the layout of DGL's
    ``RelGraphConv`` etypes and PyG's ``RGCNConv`` edge_type). All three are None otherwise.
    """
    indptr: "torch.Tensor"
    indices: "torch.Tensor"
    num_src: int
    num_dst: int
    src_ids: "torch.Tensor"
    weights: Optional["torch.Tensor"]
    src_times: Optional["torch.Tensor"] = None
    edge_types: Optional["torch.Tensor"] = None
    src_types: Optional["torch.Tensor"] = None
    schema: Optional[Schema] = None

    def to_dgl(self):
        """A DGL block (``dgl.create_block``): ``num_src_nodes``/``num_dst_nodes`` as here, the
        global ids as ``srcdata[dgl.NID]``/``dstdata[dgl.NID]``, edge weights as ``edata["w"]``,
        temporal blocks' ``src_times`` as ``srcdata["timestamp"]``/``dstdata["timestamp"]``
        (GraphBolt's name for a temporal node's time). For ``conv(g, (h,
        h[:g.num_dst_nodes()]))`` with DGL's own convolutions.

        A heterogeneous block gives a DGL heterogeneous block: one canonical edge type per
        relation of the schema (those without edges too), the nodes of each type numbered in
        source order among that type's (the destinations of a type are a prefix of its
        sources), ``srcnodes[t].data[dgl.NID]``/``dstnodes[t].data[dgl.NID]`` their global ids.
        So ``x_dict`` (rows in that order) feeds ``dgl.nn.HeteroGraphConv`` directly."""
        return _interop.block_to_dgl(self)

    def to_pyg(self):
        """``(edge_index, (num_src, num_dst))`` for PyG's bipartite convolutions:
        ``conv((h, h[:num_dst]), edge_index, size=size)``. ``edge_index`` is int64 [2, E] in
        PyG's (source, target) order, local ids. Needs torch only. On a heterogeneous block
        the same union graph: ``edge_types`` is then RGCNConv's ``edge_type``."""
        return _interop.block_to_pyg(self)


class Batch(NamedTuple):
    """One step's batch. ``x``: the input nodes' features (rows: ``blocks[0].src_ids``).

    On a heterogeneous graph ``x`` is None and ``x_dict`` holds the features per node type:
    {type: float32 [the input nodes of that type, its width]}, row j the j-th input node of the
    type in ``blocks[0]``'s source order (the order of ``Block.to_dgl()``'s and
    ``Batch.to_pyg()``'s nodes of the type); types without features are absent. ``schema`` names
    the types and relations; ``y`` the seeds' labels (the seeds are of the target type)."""
    blocks: List[Block]
    x: Optional["torch.Tensor"]
    y: Optional["torch.Tensor"]
    seeds: "torch.Tensor"
    epoch: int
    step: int
    x_dict: Optional[Dict[str, "torch.Tensor"]] = None
    schema: Optional[Schema] = None

    @property
    def input_nodes(self):
        """The partition ids of the rows of ``x`` (``blocks[0].src_ids``, the seeds first)."""
        return self.blocks[0].src_ids

    @property
    def seed_times(self):
        """Temporal sampling: the time each seed is sampled at (its node time, int64
        [len(seeds)]); None otherwise."""
        return _seed_times(self)

    def to_pyg(self):
        """A ``torch_geometric.data.Data`` in the hierarchical layout of PyG's NeighborLoader:
        ``x``, ``edge_index`` over all sampled nodes (``n_id``, the seeds first), ``y`` (of the
        seeds: ``batch_size`` of them), and per hop ``num_sampled_nodes``/``num_sampled_edges``
        (for ``trim_to_layer``). Hop k's edges end at the nodes hop k-1 added, so each node's
        neighbourhood is sampled once, as in PyG. Edge weights, if any, as ``edge_weight``.
        Temporal batches add ``seed_time`` (PyG's NodeLoader name: the seeds' times) and
        ``node_time``: the time each node of ``n_id`` is sampled at (``blocks[0].src_times``;
        the same id may come at several times), not a node attribute of the dataset.

        A heterogeneous batch gives a ``torch_geometric.data.HeteroData`` in the layout of PyG's
        heterogeneous NeighborLoader: per node type ``n_id`` (global ids, the type's nodes in
        ``blocks[0]``'s source order: the seeds first in the target type), ``x`` (types with
        features) and ``num_sampled_nodes`` per hop; per relation ``(src, name, dst)`` an
        ``edge_index`` in those local ids ((source, target) order) and ``num_sampled_edges``
        per hop (every relation of the schema, empty ones too); ``y`` and ``batch_size`` on the
        target type."""
        return _interop.batch_to_pyg(self)


class LinkPairs(NamedTuple):
    """The node pairs a link batch scores: pair i is ``(src[i], dst[i])``, indices into the
    batch's ``seeds`` (so rows of the model's output), ``label[i]`` 1.0 for a training edge and
    0.0 for a negative. int64, int64, float32."""
    src: "torch.Tensor"
    dst: "torch.Tensor"
    label: "torch.Tensor"


class LinkBatch(NamedTuple):
    """A :class:`Batch` of :class:`LinkLoader`: the same fields plus ``pairs``. The seeds are the
    endpoints of the step's training edges and of their negatives, each once; every block leaves
    out the batch's excluded edges (see ``exclude``). On a heterogeneous graph ``x`` is None,
    ``x_dict`` and ``schema`` are :class:`Batch`'s, and every pair joins a node of the link
    relation's source type to one of its destination type (``schema.link_relation``)."""
    blocks: List[Block]
    x: Optional["torch.Tensor"]
    y: Optional["torch.Tensor"]
    seeds: "torch.Tensor"
    epoch: int
    step: int
    pairs: LinkPairs
    x_dict: Optional[Dict[str, "torch.Tensor"]] = None
    schema: Optional[Schema] = None

    input_nodes = Batch.input_nodes
    seed_times = Batch.seed_times

    def to_pyg(self):
        """:meth:`Batch.to_pyg`'s ``Data`` plus, as in PyG's LinkNeighborLoader,
        ``edge_label_index`` (int64 [2, P]: the pairs in local node ids, the rows of ``n_id``)
        and ``edge_label`` (float32 [P]: 1 positive, 0 negative). A heterogeneous batch gives
        :meth:`Batch.to_pyg`'s ``HeteroData`` with both on the link relation's edge type, in
        the type-local ids of its two types (PyG's heterogeneous LinkNeighborLoader)."""
        return _interop.batch_to_pyg(self)

    def to_dgl(self):
        """``(pair_graph, neg_pair_graph, blocks)`` as DGL's ``as_edge_prediction_sampler``
        yields them after ``input_nodes`` (here ``batch.input_nodes``): the positive and the
        negative pairs as DGL graphs over the seeds (the last block's destinations, node i seed
        i, global ids as ``ndata[dgl.NID]``), and each block's :meth:`Block.to_dgl`. So DGL's
        link loop runs as is: ``h = model(blocks, x)``, ``pos = score(pair_graph, h)``,
        ``neg = score(neg_pair_graph, h)``. On a typed graph the pair graphs are heterographs
        with every node and edge type of the schema (each type's seeds in seed order, the
        numbering of the last block's destinations), the pairs on ``schema.link_relation``."""
        return _interop.link_batch_to_dgl(self)


def _id_array(ids, what):
    """``ids`` (an int array-like or a torch tensor) as a C-order int64 numpy array of the same
    shape; InvalidArgument naming ``what`` for anything but integers (an empty list is fine)."""
    return _data.as_int64(
        _data.int_like(ids),
        lambda t: InvalidArgument(f"{what}: node ids must be integers, got an array of {t}"),
        lambda v: InvalidArgument(f"{what}: node id {v} is outside int64"))


def _map_ids(fn, path, ids, label=""):
    """``ids`` through ``_dsp._to_dsp_ids``/``_to_original_ids`` (flat), in their shape: numpy
    in, numpy out; a torch tensor in, an int64 tensor on its device out."""
    a = _id_array(ids, label or str(path))
    out = fn(str(path), a.reshape(-1), label).reshape(a.shape)
    if torch is not None and isinstance(ids, torch.Tensor):
        return torch.from_numpy(out).to(ids.device)
    return out


def to_original_ids(path, ids):
    """The dataset's own node ids of ``ids``, partition ids of the partition directory ``path``
    (those of batches: ``Batch.seeds``, ``Block.src_ids``), through its ``new2old.npy``.

    ``ids``: any int array-like (any shape, kept) or a torch tensor (then an int64 tensor on the
    same device comes back); otherwise an int64 numpy array. For a dataset directory the ids are
    its own (identity): a Loader that partitioned one on the fly has its own renumbering, see
    :meth:`Loader.to_original_ids`. Raises ``dsp.InvalidArgument`` naming ``path``, the entry and
    the id for an id outside ``[0, num_nodes)``, ``dsp.IoError`` for a directory of neither kind.
    """
    return _map_ids(_dsp._to_original_ids, path, ids)


def to_dsp_ids(path, ids):
    """The partition ids (those of batches) of the dataset's own node ids ``ids``, for the
    partition directory ``path`` (its ``old2new.npy``): the inverse of :func:`to_original_ids`,
    with the same argument types and errors."""
    return _map_ids(_dsp._to_dsp_ids, path, ids)


def _seed_times(batch):
    """The seeds' times: the times of the last block's destinations, which are the seeds."""
    last = batch.blocks[-1] if batch.blocks else None
    if last is None or last.src_times is None:
        return None
    return last.src_times[:last.num_dst]


def _tensor(a, as_tensor, pin=False, device=None):
    if a is None or not as_tensor:
        return a
    if type(a).__name__ == "PyCapsule":  # device rows (DLPack): used where they are, as float32
        return torch.utils.dlpack.from_dlpack(a).float()
    t = torch.from_numpy(a)
    if device is not None:
        return t.to(device)
    return t.pin_memory() if pin else t


def _make_batch(raw, as_tensor, pin=False, device=None,
                schema: Optional[Schema] = None) -> Union[Batch, LinkBatch]:
    """A batch of the engine's tuple (bindings.cpp: batch_to_py); ``schema``: the partition's
    heterogeneous schema, or None."""
    blocks_raw, x, y, seeds, epoch, step, pairs, typed = raw

    def conv(a):
        return _tensor(a, as_tensor, pin, device)

    blocks = [
        Block(conv(b["indptr"]), conv(b["indices"]), b["num_src"], b["num_dst"],
              conv(b["src_ids"]), conv(b["weights"]), conv(b["src_times"]),
              conv(b["edge_types"]), conv(b["src_types"]), schema)
        for b in blocks_raw
    ]
    x_dict = None
    if schema is not None:  # per type features, rows in the type's source order
        x_dict = {t: conv(f) for t, f in zip(schema.node_types, typed or []) if f is not None}
    if pairs is not None:
        return LinkBatch(blocks, conv(x) if schema is None else None, conv(y), conv(seeds), epoch,
                         step, LinkPairs(*(conv(a) for a in pairs)), x_dict, schema)
    if schema is not None:
        return Batch(blocks, None, conv(y), conv(seeds), epoch, step, x_dict, schema)
    return Batch(blocks, conv(x), conv(y), conv(seeds), epoch, step)


def _fanouts_arg(fanouts):
    """The Loader's fanouts for the sampler table's fanouts key: a list of counts (every
    relation), the per-relation text, or a {relation: [count per layer]} map whose keys may be
    (src, name, dst) triples (written src___name___dst, dsp's relation key)."""
    if isinstance(fanouts, str):
        return fanouts
    if isinstance(fanouts, dict):
        return {("___".join(k) if isinstance(k, tuple) else str(k)):
                ([int(c) for c in v] if isinstance(v, (list, tuple)) else v)
                for k, v in fanouts.items()}
    return [int(f) for f in fanouts]


# The keyword arguments of Loader and LinkLoader that the engine does not read through its option
# table (dsp._dsp._Loader: the Loader's own and dsp train's rank, seed order and link tables):
# handled here, or arguments of their own.
_NOT_ENGINE = frozenset({"self", "__class__", "path", "fanouts", "nodes", "as_tensor",
                         "pin_memory", "process_group", "sampler", "sampler_options"})


def _engine_options(arguments):
    """A Loader's keyword arguments (its ``locals()``) as the engine's options: every one but
    _NOT_ENGINE, numpy scalars as Python numbers, None (not given) left out."""
    return {k: (v.item() if isinstance(v, numpy.generic) else v)
            for k, v in arguments.items() if k not in _NOT_ENGINE and v is not None}


class Loader:
    """Mini-batches of this rank's seeds, sampled and loaded by dsp's C++ core.

    Iterating yields ``(blocks, x, y)`` per step; ``iter_batches()`` yields :class:`Batch` with
    the seeds too. Node ids in batches (``seeds``, ``src_ids``) and ``local_seeds`` are the
    partition's ids ("dsp ids"): :meth:`to_original_ids` maps them to the dataset's own ids, the
    ones ``nodes=`` takes. Each ``for`` loop over the loader is one epoch (0, 1, ...; see
    :meth:`set_epoch`). With ``shuffle=True`` the seeds of every step are those ``dsp train``
    uses for the same ``seed``, and the blocks and features are identical to its batches.

    Args:
        path: a partition directory (``dsp partition``), or a dataset directory, which is then
            partitioned on the fly into one part per rank (``partition_method``).
        fanouts: neighbours per node, from the seeds out (``[15, 10, 5]``); -1 takes every
            neighbour (``[-1, -1]``: full neighbourhoods, as DGL's and PyG's -1). On a heterogeneous
            graph a list gives every relation the same counts; per relation, a dict {relation:
            [count per layer]} (a relation by its name, its ``(src, name, dst)`` triple or its
            key ``"src___name___dst"``; ``"*"`` for the relations not named, the others take
            none) or ``dsp train``'s text, ``"writes:10,cites:15;writes:5,cites:10"``. A relation
            the graph lacks raises ``dsp.InvalidArgument`` with the sampler's message.
        batch_size: seeds per rank per step.
        shuffle: a seeded shuffle per epoch (a rank with fewer seeds wraps around, so every rank
            runs the same number of full steps); False: ascending seed order.
        split: "train" (the part's co-partitioned seeds), "valid" or "test" (the owned ids),
            or "all" (every node of the rank's part). A split the dataset lacks (no ids at all)
            raises ``dsp.FormatError`` naming ``path`` and the split.
        nodes: instead of a split, these seed nodes: the dataset's own (original) node ids, any
            int array-like or tensor, each at most once (``dsp.InvalidArgument`` names the first
            id out of range or given twice); each rank keeps those it owns, as for "valid" and
            "test". Cannot be combined with a ``split`` other than "train".
        seed: seeds the shuffle and the sampler (a pure function of it: any number of ranks and
            threads gives the same batches).
        prefetch: batches sampled and loaded ahead on a background C++ thread while Python
            trains; 0 samples and loads in ``next()``.
        as_tensor: torch tensors (default when torch is importable) or numpy arrays.
        pin_memory: hand out tensors in page-locked memory (torch's pinned allocator, one copy
            per batch), so that ``x.to("cuda", non_blocking=True)`` overlaps with compute. Needs
            a CUDA device. The copies are made with this thread's memory bound to the NUMA nodes
            nearest the current CUDA device (``torch.cuda.current_device()`` when the loader is
            made), so new pinned pages lie next to the GPU they are copied to.
        device: "cpu" (default), "cuda" or "cuda:N": sample and gather on this rank's GPU (the
            GPU of its node rank, + N); the batches are CUDA tensors (features gathered straight
            into device memory, handed over through DLPack without a copy). CUDA builds only.
        transport: with a GPU, how feature rows cross ranks, as ``dsp train --transport``:
            "auto" (NCCL when every rank of a node has its own GPU, else "mpi"), "nccl", or "mpi"
            (staged through pinned host memory; ranks may share a GPU).
        topology_memory: with a GPU, the device memory the sampler's neighbour array may take,
            bytes or a size such as "8G" (``--topology-memory``; default: half the free device
            memory, which leaves the rest to the model); the rest is read from pinned host memory
            through UVA, the hottest rows on the device; 0: all through UVA.
        memory_budget: host memory this process may use, bytes or a size such as "12G"
            (``--memory-budget``; default: 3/4 of what is available): a dataset directory's
            partition on the fly is estimated first and refused with ``dsp.Error`` (the CLI's
            one line) when it does not fit.
        backend: "auto" (MPI under mpirun; the torch.distributed process group when one is
            initialised, e.g. under torchrun; else a single process), "self", "mpi" or "torch".
        process_group: run dsp's collectives over this torch.distributed process group (gloo
            groups of dsp's own over its ranks; no MPI needed): rank and size are the group's.
            Default: the world group when ``torch.distributed`` is initialised and the process
            was not started by an MPI launcher (which keeps MPI unless a group is given). A
            partition whose part count differs from the group's size raises
            ``dsp.InvalidArgument`` naming both.
        fifo_rows: BGL's dynamic cache, as ``dsp train --fifo-rows``: this many of the rows other
            ranks serve kept per rank, first in first out, so a repeat needs no request (0: off).
        fifo_shared_rows: with ``fifo_rows``, a second level of this many rows shared by the
            ranks of a machine (``--fifo-shared-rows``).
        order: with ``shuffle``, the seed order of every epoch, as ``dsp train --order``:
            "random" (a shuffle) or "bfs" (BGL's proximity-aware order: BFS sequences from random
            roots, interleaved; consecutive batches share more neighbours).
        bfs_sequences: ``order="bfs"``: sequences interleaved per epoch (``--bfs-sequences``).
        sampler: as ``dsp train --sampler``: "neighbor" (default), "labor" (LABOR: per-node
            variates shared across a layer's seeds, fewer distinct nodes; with
            ``labor_importance`` != 0 the blocks carry edge weights, ``edata["w"]`` /
            ``edge_weight``) or "layer" (layer-wise).
        **sampler_options: the rest of ``dsp train``'s sampler options by their keys:
            ``sample_kernel``, ``cuda_graphs`` (a device sampler replays its captured kernels;
            the CPU sampler refuses it), ``labor_importance`` (0, i or "*"),
            ``labor_layer_dependency``,
            ``labor_batch_dependency``, ``layer_draws`` ("with" or "without"), ``temporal``
            ("off", "uniform" or "recent", as ``dsp train --temporal``: every seed is sampled at
            its node time from the partition's ``node_time.npy``, among the in-edges older than
            it; blocks carry ``src_times`` and batches ``seed_times``; the dataset needs edge and
            node times, e.g. ``dsp generate community --temporal``); an unknown key raises
            ``dsp.FormatError`` naming it.

    Under MPI or torchrun every rank must create the same loaders in the same order and iterate
    the same epochs; an epoch a rank leaves early is finished in the background so its peers are
    served.

    On a heterogeneous partition (``dsp generate hetero``, ``dsp convert --from ogb-hetero``)
    the seeds are the target type's, ``schema`` names the types and relations, blocks carry
    ``src_types``/``edge_types``, batches ``x_dict`` instead of ``x``, and iterating yields
    ``(blocks, x_dict, y)``.
    """

    def __init__(self, path: str, fanouts: Union[Sequence[int], dict, str] = (15, 10, 5),
                 batch_size: int = 1024, shuffle: bool = True, split: str = "train",
                 seed: int = 0, prefetch: int = 2,
                 as_tensor: Optional[bool] = None, backend: str = "auto",
                 partition_method: str = "metis", pin_memory: bool = False, device: str = "cpu",
                 fifo_rows: int = 0, fifo_shared_rows: int = 0, transport: str = "auto",
                 topology_memory: Optional[Union[int, str]] = None, order: str = "random",
                 bfs_sequences: int = 4, nodes=None, sampler: str = "neighbor",
                 process_group=None, memory_budget: Optional[Union[int, str]] = None,
                 **sampler_options):
        self._open(path, fanouts, nodes, _engine_options(locals()),
                   dict(sampler_options, sampler=sampler), as_tensor, pin_memory, process_group)

    def _open(self, path, fanouts, nodes, options, sampler, as_tensor, pin_memory, process_group):
        """The engine. ``options``: the keywords the engine reads through its table (the
        Loader's own and dsp train's rank, seed order and link tables: _engine_options);
        ``sampler``: the keywords of dsp train's sampler table but fanouts; ``process_group``:
        see :class:`Loader`."""
        device = options.get("device", "cpu")
        if as_tensor is None:
            as_tensor = torch is not None
        if as_tensor and torch is None:
            raise ImportError(f"dsp.{type(self).__name__}(as_tensor=True) needs torch, which "
                              "cannot be imported here: pip install torch, or pass "
                              "as_tensor=False for numpy arrays")
        if pin_memory and not as_tensor:
            raise InvalidArgument("pin_memory=True needs as_tensor=True (torch tensors)")
        if pin_memory and not torch.cuda.is_available():
            raise NotSupported("pin_memory=True needs a CUDA device (torch.cuda.is_available() "
                               "is False): page-locked memory only speeds up copies to a GPU")
        if device != "cpu" and not as_tensor:
            raise InvalidArgument(f"device={device!r} needs as_tensor=True (torch tensors)")
        if device != "cpu" and not torch.cuda.is_available():
            raise NotSupported(f"device={device!r} needs a CUDA device (torch.cuda.is_available() "
                               "is False)")
        if nodes is not None:
            nodes = _id_array(nodes, f"{path}: nodes")
            if nodes.ndim != 1:
                raise InvalidArgument(f"{path}: nodes must be a 1-d array of node ids, got shape "
                                      f"{tuple(nodes.shape)}")
        group = _pg.resolve(process_group, options.get("backend", "auto"))
        if group is not None:
            options["backend"] = "torch"
            _check_parts(path, group.size)
        self._path = str(path)
        self._as_tensor = as_tensor
        self._pin = bool(pin_memory)
        # The NUMA nodes nearest the GPU the pinned batches are for.
        self._pin_nodes = (_dsp._near_memory_nodes(f"cuda:{torch.cuda.current_device()}")
                           if self._pin else [])
        options["path"] = str(path)
        self._impl = _dsp._Loader(_fanouts_arg(fanouts), nodes, options, sampler)
        # Device rows arrive on the rank's GPU; everything else follows them there.
        self._device = None if device == "cpu" else self._impl.device
        self._schema = Schema.from_meta(self._impl.meta)
        self._epoch = 0
        self._generation = 0  # which iteration owns the C++ epoch (see iter_batches)

    # Properties of the rank and the data.
    rank = property(lambda self: self._impl.rank, doc="this process's rank")
    size = property(lambda self: self._impl.size, doc="number of ranks")
    steps = property(lambda self: self._impl.steps, doc="steps per epoch (same on every rank)")
    meta = property(lambda self: self._impl.meta, doc="partition.json as a dict")
    partition_dir = property(lambda self: self._impl.partition_dir)

    schema = property(lambda self: self._schema,
                      doc="a heterogeneous partition's :class:`Schema`, else None")

    @property
    def num_features(self) -> int:
        """The feature width (on a heterogeneous graph: per type, ``schema.feature_dims``)."""
        return int(self.meta["feature_dim"])

    @property
    def num_classes(self) -> int:
        return int(self.meta["num_classes"])

    @property
    def local_seeds(self):
        """This rank's seeds of the split or ``nodes`` (partition ids, ascending)."""
        return _tensor(self._impl.local_seeds, self._as_tensor)

    def to_original_ids(self, ids):
        """:func:`dsp.to_original_ids` over this loader's partition (also the one it made on the
        fly from a dataset directory, which lives as long as the loader)."""
        return _map_ids(_dsp._to_original_ids, self.partition_dir, ids, self._path)

    def to_dsp_ids(self, ids):
        """:func:`dsp.to_dsp_ids` over this loader's partition (see :meth:`to_original_ids`)."""
        return _map_ids(_dsp._to_dsp_ids, self.partition_dir, ids, self._path)

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
                # torch's pin_memory() allocates (when its cache has no block) on this thread:
                # bound to the GPU's nodes while it does, so the new pages land there.
                with (_dsp._ThreadMemoryBinding(self._pin_nodes) if self._pin_nodes
                      else contextlib.nullcontext()):
                    batch = _make_batch(raw, self._as_tensor, self._pin, self._device,
                                        self._schema)
                yield batch
        finally:
            # A loop left early ends its epoch here (serving peers), not whenever the generator
            # is collected; an iteration superseded by a newer one must not end the newer epoch.
            if self._impl is not None and generation == self._generation:
                self._impl.finish_epoch()

    def __iter__(self):
        for b in self.iter_batches():
            yield b.blocks, (b.x if b.schema is None else b.x_dict), b.y

    def close(self) -> None:
        """Finishes the current epoch and releases the partition and communicators."""
        if self._impl is not None:
            self._impl.finish_epoch()
            self._impl = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class LinkLoader(Loader):
    """Mini-batches of this rank's training edges for link prediction, as ``dsp train --task
    link`` makes them: the same edges, negatives, seeds and blocks for the same ``seed``.

    Each step takes ``batch_size`` of the part's training edges (``link_train.npy``: those whose
    source the rank owns; shuffled per epoch like a Loader's seeds) and draws ``neg_ratio``
    negatives ``(u, w)`` per edge ``(u, v)``; every endpoint, once, is a seed, and the blocks are
    sampled from the seeds out without the batch's excluded edges. Iterating yields
    :class:`LinkBatch`: the fields of :class:`Batch` plus ``pairs`` (:class:`LinkPairs`: src,
    dst, label; src and dst index ``seeds``, i.e. the rows of the model's output)::

        for batch in dsp.LinkLoader(path, fanouts=[10, 10], batch_size=512):
            h = model(batch.blocks, batch.x)            # [len(batch.seeds), d]
            src, dst, label = batch.pairs
            loss = F.binary_cross_entropy_with_logits((h[src] * h[dst]).sum(1), label)

    A featureless dataset gives ``x`` of width 0: learn ``torch.nn.Embedding(num_nodes, d)``
    and index it with ``batch.input_nodes`` (partition ids, every rank the same table).

    On a heterogeneous partition with a link relation (``dsp generate hetero --link-split``,
    ``schema.link_relation``) the training edges are that relation's; a negative's ``w`` comes
    from its destination type ("pairs": ``u`` from its source type too; "unigram" by its
    in-degree^0.75 through the relation),
    and "auto" exclusion hides each edge from its relation and its reverse from the reverse
    relation when the graph has one. Batches carry ``x_dict`` and ``schema`` as a Loader's, and
    ``to_pyg()`` puts the pairs on the link relation's edge type.

    Args:
        path, fanouts, batch_size (training edges per rank per step), shuffle, seed, prefetch,
            as_tensor, backend, partition_method, pin_memory, device, fifo_rows,
            fifo_shared_rows, transport, topology_memory, process_group, memory_budget: as for
            :class:`Loader`. A dataset without training edges raises ``dsp.FormatError`` naming
            ``path``.
        neg_ratio: negatives per training edge, 1 to 4096 (``--neg-ratio``).
        negatives: "uniform" destinations over the nodes, or "unigram" (in-degree^0.75), each
            negative keeping its positive's source; or "pairs", both ends uniform (PyG's
            ``negative_sampling``, DGL's ``GlobalUniform``) (``--negatives``).
        exclude: edges a batch's blocks leave out (``--exclude``): "self" (its training edges
            u -> v), "reverse" (also v -> u), "none", or "auto": reverse on an undirected dataset,
            else self.

    The values are checked by ``dsp train``'s link options, so a bad one raises
    ``dsp.InvalidArgument`` with the CLI's message (naming its flag).
    """

    def __init__(self, path: str, fanouts: Sequence[int] = (15, 10, 5), batch_size: int = 1024,
                 neg_ratio: int = 1, negatives: str = "uniform", exclude: str = "auto",
                 shuffle: bool = True, seed: int = 0, prefetch: int = 2,
                 as_tensor: Optional[bool] = None, backend: str = "auto",
                 partition_method: str = "metis", pin_memory: bool = False, device: str = "cpu",
                 fifo_rows: int = 0, fifo_shared_rows: int = 0, transport: str = "auto",
                 topology_memory: Optional[Union[int, str]] = None, sampler: str = "neighbor",
                 process_group=None, memory_budget: Optional[Union[int, str]] = None,
                 **sampler_options):
        self._open(path, fanouts, None, dict(_engine_options(locals()), task="link"),
                   dict(sampler_options, sampler=sampler), as_tensor, pin_memory, process_group)

    @property
    def local_edges(self):
        """This rank's training edges ``[E, 2]`` (source, destination; partition ids)."""
        edges = self._impl.link_train  # a read-only file mapping: copied for torch
        return _tensor(None if edges is None else numpy.array(edges), self._as_tensor)

    @property
    def local_seeds(self):
        """The indices of this rank's training edges (rows of :attr:`local_edges`), what its
        epochs shuffle."""
        return _tensor(self._impl.local_seeds, self._as_tensor)

    def __iter__(self):
        return self.iter_batches()


def _check_parts(path, size):
    """A partition directory must have one part per rank of the process group (a dataset
    directory is partitioned on the fly into that many)."""
    if not _dsp._is_partition_dir(str(path)):
        return
    parts = int(_dsp.load_partition_meta(str(path))["parts"])
    if parts != size:
        raise InvalidArgument(f"{path}: the partition has {parts} parts but the process group has "
                              f"{size} ranks; partition again with --parts {size}")


def _reference_epoch(part_dir, fanouts, batch_size, seed, epoch=0, temporal="off"):
    """Test hook: one epoch of batches made the way ``dsp train`` makes them (numpy)."""
    return [_make_batch(r, False) for r in
            _dsp._reference_epoch(str(part_dir), list(fanouts), batch_size, seed, epoch,
                                  temporal)]
