"""dsp's GNN models (src/train/model.hpp) in plain PyTorch, and models trained by ``dsp train``.

:class:`GNN` (sage, gcn, gat) and :class:`HeteroGNN` (the typed models rgcn and hsage of a
heterogeneous partition) have the parameters of the C++ model under the same names, in the same
order and shapes, and compute what its eval mode computes (no dropout), input normalisation
included. :func:`load_embedding_table` reads the rows a model learnt for featureless nodes (the
checkpoint's embedding shards), which the models take as part of their input.
:func:`load_model` reads a checkpoint of ``dsp train --checkpoint-dir`` (``checkpoint.pt``,
``best.pt``: a LibTorch archive, read with ``torch.jit.load``) or a directory written by
:func:`export_model`, which holds ``model.json`` (the architecture) and ``state_dict.pt``
(``torch.save`` of :meth:`GNN.state_dict`: the parameters, and for ``normalize_features
standard`` the column statistics as ``input_norm.feature_mean`` and ``input_norm.feature_inv_std``).
This module imports torch; ``dsp`` imports it only when torch is importable.
"""
import json
import os
import warnings
from collections import OrderedDict

import numpy as np
import torch
import torch.nn.functional as F

from . import _dsp

MODELS = ("sage", "gcn", "gat")
HETERO_MODELS = ("rgcn", "hsage")  # typed models: HeteroGNN
NORMALIZATIONS = ("none", "row", "standard")
CHECKPOINT_FORMAT, CHECKPOINT_VERSIONS = "dsp-checkpoint", (1, 2)
EXPORT_FORMAT, EXPORT_VERSION = "dsp-model", 1
MODEL_FILE, STATE_FILE = "model.json", "state_dict.pt"
STATS = ("feature_mean", "feature_inv_std")  # checkpoint entries of normalize_features standard


def _index(a, device) -> torch.Tensor:
    """An int64 tensor on `device` of a block's index array (a tensor or a numpy array)."""
    if isinstance(a, torch.Tensor):
        return a.to(device=device, dtype=torch.int64)
    return torch.from_numpy(np.array(a, dtype=np.int64)).to(device)  # a copy: mmaps are read-only


def _edges(block, device, self_loops: bool):
    """(src, dst): the local ids of the block's edges in CSR order, then with `self_loops` the loop
    v -> v of every destination (as aggregate.cpp's reference formulation)."""
    indptr, src = _index(block.indptr, device), _index(block.indices, device)
    rows = torch.arange(int(block.num_dst), device=device)
    if indptr.numel() != rows.numel() + 1:
        raise ValueError(f"block indptr has {indptr.numel()} entries, expected num_dst + 1 = "
                         f"{rows.numel() + 1}")
    dst = torch.repeat_interleave(rows, indptr[1:] - indptr[:-1])
    return (torch.cat([src, rows]), torch.cat([dst, rows])) if self_loops else (src, dst)


def _mean(block, x):
    """mean_{u -> v} x_u for every destination v; 0 for one without in-edges."""
    src, dst = _edges(block, x.device, False)
    n = int(block.num_dst)
    total = x.new_zeros(n, x.size(1)).index_add_(0, dst, x[src])
    return total / torch.bincount(dst, minlength=n).to(x.dtype).clamp_min(1).unsqueeze(1)


def _gcn(block, x):
    """sum_{u in N(v) + v} x_u / sqrt(deg_out(u) deg_in(v)), degrees counted inside the block with
    one self loop per destination (DGL GraphConv norm='both' on the block with self loops)."""
    src, dst = _edges(block, x.device, True)
    deg_out = torch.bincount(src, minlength=int(block.num_src)).to(x.dtype)
    deg_in = torch.bincount(dst, minlength=int(block.num_dst)).to(x.dtype)
    norm = (deg_out[src] * deg_in[dst]).rsqrt().unsqueeze(1)
    return x.new_zeros(int(block.num_dst), x.size(1)).index_add_(0, dst, x[src] * norm)


def _segment_softmax(e, dst, n: int):
    """Softmax of the edge scores e [E, H] over the edges of each destination (shifted by their
    max, which every destination has: its self loop)."""
    with warnings.catch_warnings():  # scatter_reduce is "beta" in torch 1.13
        warnings.filterwarnings("ignore", message="scatter_reduce")
        m = e.new_full((n, e.size(1)), float("-inf")).scatter_reduce(
            0, dst.unsqueeze(1).expand_as(e), e.detach(), "amax", include_self=True)
    ex = torch.exp(e - m[dst])
    return ex / e.new_zeros(n, e.size(1)).index_add_(0, dst, ex)[dst]


class _SageLayer(torch.nn.Module):
    """W_self h_v + W_neigh mean_{u -> v} h_u + b."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.add_module("self", torch.nn.Linear(d_in, d_out))
        self.neigh = torch.nn.Linear(d_in, d_out, bias=False)
        torch.nn.init.zeros_(self.self.bias)

    def forward(self, block, h):
        h_dst = self.self(h[:int(block.num_dst)])
        if self.neigh.in_features > self.neigh.out_features:  # project first, as the C++ layer
            return h_dst + _mean(block, self.neigh(h))
        return h_dst + self.neigh(_mean(block, h))


class _GcnLayer(torch.nn.Module):
    """W sum_{u in N(v) + v} h_u / sqrt(deg_out(u) deg_in(v)) + b."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.lin = torch.nn.Linear(d_in, d_out, bias=False)
        self.bias = torch.nn.Parameter(torch.zeros(d_out))

    def forward(self, block, h):
        if self.lin.in_features > self.lin.out_features:
            return _gcn(block, self.lin(h)) + self.bias
        return self.lin(_gcn(block, h)) + self.bias


class _GatLayer(torch.nn.Module):
    """Multi-head attention over each destination's in-edges plus its self loop:
    [num_src, d_in] -> [num_dst, heads, dim]."""

    def __init__(self, d_in: int, dim: int, heads: int):
        super().__init__()
        self.heads, self.dim = heads, dim
        self.attn_l = torch.nn.Parameter(torch.empty(1, heads, dim))
        self.attn_r = torch.nn.Parameter(torch.empty(1, heads, dim))
        self.bias = torch.nn.Parameter(torch.zeros(heads, dim))
        self.fc = torch.nn.Linear(d_in, dim * heads, bias=False)
        for p in (self.fc.weight, self.attn_l, self.attn_r):  # DGL's GATConv initialisation
            torch.nn.init.xavier_normal_(p, gain=2 ** 0.5)

    def forward(self, block, h):
        n = int(block.num_dst)
        z = self.fc(h).view(-1, self.heads, self.dim)
        el, er = (z * self.attn_l).sum(-1), (z[:n] * self.attn_r).sum(-1)
        src, dst = _edges(block, h.device, True)
        att = _segment_softmax(F.leaky_relu(el[src] + er[dst], 0.2), dst, n)
        out = z.new_zeros(n, self.heads, self.dim).index_add_(0, dst, z[src] * att.unsqueeze(-1))
        return out + self.bias


class _InputNorm(torch.nn.Module):
    """The input features as the model sees them (TrainConfig::normalize_features)."""

    def __init__(self, how: str, in_dim: int):
        super().__init__()
        self.how = how
        if how == "standard":
            self.register_buffer("feature_mean", torch.zeros(in_dim))
            self.register_buffer("feature_inv_std", torch.ones(in_dim))

    def forward(self, x):
        if self.how == "row":
            return x / x.sum(1, keepdim=True).clamp_min(1)
        if self.how == "standard":
            return (x - self.feature_mean) * self.feature_inv_std
        return x


class GNN(torch.nn.Module):
    """dsp's GraphSAGE (mean), GCN or GAT over sampler blocks, as ``dsp train`` builds it.

    ``named_parameters()`` are the C++ model's (``layer0.self.weight``, ``layer0.lin.weight``,
    ``layer0.fc.weight``, ...), in its order. There is no dropout: the output is the C++ model's
    in eval mode. ``normalize_features`` ("none", "row", "standard") is applied to the input;
    "standard" reads the buffers ``input_norm.feature_mean``/``feature_inv_std`` (set by
    :func:`load_model`). GAT: ``hidden`` is per head; hidden layers concatenate their ``heads``,
    the output layer averages its ``out_heads``. ValueError on a bad argument.
    """

    def __init__(self, model: str, in_dim: int, out_dim: int, hidden: int = 128, layers: int = 2,
                 heads: int = 1, out_heads: int = 1, normalize_features: str = "none"):
        super().__init__()
        if model not in MODELS:
            typed = " (rgcn and hsage are dsp.HeteroGNN's)" if model in HETERO_MODELS else ""
            raise ValueError(f"unknown model '{model}' ({', '.join(MODELS)}){typed}")
        if normalize_features not in NORMALIZATIONS:
            raise ValueError(f"normalize_features must be none, row or standard, got "
                             f"'{normalize_features}'")
        if min(in_dim, out_dim, hidden, layers, heads, out_heads) < 1:
            raise ValueError("in_dim, out_dim, hidden, layers, heads and out_heads must be >= 1")
        self.config = dict(model=model, in_dim=in_dim, out_dim=out_dim, hidden=hidden,
                           layers=layers, heads=heads, out_heads=out_heads,
                           normalize_features=normalize_features)
        self.input_norm = _InputNorm(normalize_features, in_dim)
        for l in range(layers):
            last = l == layers - 1
            if model == "gat":
                d_in = in_dim if l == 0 else hidden * heads
                layer = _GatLayer(d_in, out_dim if last else hidden, out_heads if last else heads)
            else:
                cls = _SageLayer if model == "sage" else _GcnLayer
                layer = cls(in_dim if l == 0 else hidden, out_dim if last else hidden)
            self.add_module(f"layer{l}", layer)

    def layer_width(self, l: int) -> int:
        """The width of :meth:`forward_layer`'s output for layer `l` (GAT hidden: hidden*heads)."""
        c = self.config
        if l + 1 >= c["layers"]:
            return c["out_dim"]
        return c["hidden"] * (c["heads"] if c["model"] == "gat" else 1)

    def forward_layer(self, l: int, block, h):
        """Layer `l` on one block, followed by what follows it in :meth:`forward` (ReLU; GAT: ELU
        of the concatenated heads, the head mean after the last layer): h [block.num_src, layer
        l's input width] -> [block.num_dst, layer_width(l)]. Layer 0 takes the raw features and
        normalises them, so composing the layers gives :meth:`forward` (layer-wise inference)."""
        c = self.config
        if not 0 <= l < c["layers"]:
            raise ValueError(f"layer {l} of a {c['layers']}-layer model")
        p = next(self.parameters())
        if not isinstance(h, torch.Tensor):
            h = torch.from_numpy(np.array(h, dtype=np.float32))
        h = h.to(p.device, p.dtype)
        width = c["in_dim"] if l == 0 else self.layer_width(l - 1)
        if tuple(h.shape) != (int(block.num_src), width):
            raise ValueError(f"layer {l}'s input is {list(h.shape)} but the model expects "
                             f"[{int(block.num_src)}, {width}] (block sources x width)")
        if l == 0:
            h = self.input_norm(h)
        h = getattr(self, f"layer{l}")(block, h)
        last = l + 1 == c["layers"]
        if c["model"] == "gat":
            return h.mean(1) if last else F.elu(h.flatten(1))
        return h if last else torch.relu(h)

    def forward(self, blocks, x):
        """Logits [blocks[-1].num_dst, out_dim] of a batch: `blocks` as :class:`dsp.Loader` yields
        them (blocks[0] is the input layer; one per layer), `x` the raw features of blocks[0]'s
        sources (a tensor or numpy array, converted to the parameters' dtype and device)."""
        if len(blocks) != self.config["layers"]:
            raise ValueError(f"the batch has {len(blocks)} blocks but the "
                             f"{self.config['layers']}-layer model needs one per layer")
        h = x
        for l, block in enumerate(blocks):
            h = self.forward_layer(l, block, h)
        return h

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.config.items())


def _types(t, n: int, device, what: str) -> torch.Tensor:
    """A block's int64 type array (src_types / edge_types) of `n` entries on `device`."""
    if t is None:
        raise ValueError(f"a typed model needs blocks with node and edge types (a Loader on a "
                         f"heterogeneous partition): the block has no {what}")
    t = _index(t, device)
    if t.numel() != n:
        raise ValueError(f"the block has {t.numel()} {what} for {n} "
                         f"{'sources' if what == 'src_types' else 'edges'}")
    return t


class _RelationSage(torch.nn.Module):
    """hsage's SAGEConv('mean') of one relation: W_self h_v + b + W_neigh mean_r(v)."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.add_module("self", torch.nn.Linear(d_in, d_out))
        self.neigh = torch.nn.Linear(d_in, d_out, bias=False)
        torch.nn.init.zeros_(self.self.bias)


class _HeteroLayer(torch.nn.Module):
    """One rgcn or hsage layer over a typed block (model_hetero.cpp's HeteroLayer):
    rgcn  h_v' = W_0 h_v + b + sum_{r into v's type} W_r mean_r(v);
    hsage h_v' = sum_{r into v's type} (W_self,r h_v + b_r + W_neigh,r mean_r(v)), 0 for a type
    no relation enters. mean_r(v): the mean of h_u over v's in-edges of relation r (0 without)."""

    def __init__(self, model: str, relation_src, relation_dst, num_types: int, d_in: int,
                 d_out: int):
        super().__init__()
        self.rgcn, self.d_out = model == "rgcn", d_out
        self.relation_src, self.relation_dst = list(relation_src), list(relation_dst)
        self.rels_into = [[r for r, d in enumerate(self.relation_dst) if d == t]
                          for t in range(num_types)]
        if self.rgcn:
            self.add_module("self", torch.nn.Linear(d_in, d_out))
            torch.nn.init.zeros_(self.self.bias)
        for r in range(len(self.relation_dst)):
            self.add_module(f"rel{r}", torch.nn.Linear(d_in, d_out, bias=False) if self.rgcn
                            else _RelationSage(d_in, d_out))

    def forward(self, block, h):
        n, device = int(block.num_dst), h.device
        src, dst = _edges(block, device, False)
        etype = _types(block.edge_types, src.numel(), device, "edge_types")
        stype = _types(block.src_types, int(block.num_src), device, "src_types")
        T, R = len(self.rels_into), len(self.relation_dst)
        if stype.numel() and (int(stype.min()) < 0 or int(stype.max()) >= T):
            raise ValueError(f"the block has a source of node type {int(stype.max())}, outside "
                             f"the model's {T} types")
        if etype.numel():
            lo, hi = int(etype.min()), int(etype.max())
            if lo < 0 or hi >= R:
                raise ValueError(f"the block has an edge of relation {lo if lo < 0 else hi}, "
                                 f"outside the model's {R}")
            rs = torch.tensor(self.relation_src, device=device)[etype]
            rd = torch.tensor(self.relation_dst, device=device)[etype]
            bad = torch.nonzero((rs != stype[src]) | (rd != stype[dst])).flatten()
            if bad.numel():
                e = int(bad[0])
                r = int(etype[e])
                raise ValueError(f"edge {e} of the block (relation {r}: type "
                                 f"{self.relation_src[r]} -> {self.relation_dst[r]}) joins a node "
                                 f"of type {int(stype[src[e]])} to one of type "
                                 f"{int(stype[dst[e]])}")
        out = h.new_zeros(n, self.d_out)
        dst_type = stype[:n]
        for t, rels in enumerate(self.rels_into):
            rows = torch.nonzero(dst_type == t).flatten()
            if rows.numel() == 0 or (not self.rgcn and not rels):
                continue
            h_v = h[rows]
            acc = self.self(h_v) if self.rgcn else None
            for r in rels:
                keep = etype == r
                s_r, d_r = src[keep], dst[keep]
                total = h.new_zeros(n, h.size(1)).index_add_(0, d_r, h[s_r])
                mean = total / torch.bincount(d_r, minlength=n).to(h.dtype).clamp_min(1) \
                    .unsqueeze(1)
                conv = getattr(self, f"rel{r}")
                term = conv(mean[rows]) if self.rgcn else conv.self(h_v) + conv.neigh(mean[rows])
                acc = term if acc is None else acc + term
            out[rows] = acc
        return out


class HeteroGNN(torch.nn.Module):
    """dsp's typed models over a heterogeneous partition's blocks, as ``dsp train --model rgcn``
    or ``--model hsage`` builds them (src/train/model_hetero.cpp): R-GCN (DGL's RelGraphConv
    with self loop, no bases) or DGL's HeteroGraphConv(sum) of one SAGEConv('mean') per relation.

    Node type t enters with a ``hidden``-wide row: ``input<t>`` (a linear map, no activation) of
    its features when ``type_dims[t] > 0``; for a featureless type (``type_dims[t] == 0``) the
    row the model learnt for the node, which the caller supplies (see :meth:`inputs` and
    :func:`load_embedding_table`). Relation r joins type ``relation_src[r]`` to type
    ``relation_dst[r]``; type and relation ids are the partition schema's order
    (``Loader.schema.node_types``/``relations``). ReLU between layers, no dropout (the C++
    model's eval mode). ``named_parameters()`` are the C++ model's: ``input<t>.weight/bias``,
    then per layer ``layer<l>.self.*`` and ``layer<l>.rel<r>.weight`` (rgcn) or
    ``layer<l>.rel<r>.self.*``/``layer<l>.rel<r>.neigh.weight`` (hsage). ValueError on a bad
    argument.
    """

    def __init__(self, model: str, type_dims, relation_src, relation_dst, out_dim: int,
                 hidden: int = 128, layers: int = 2, normalize_features: str = "none"):
        super().__init__()
        if model not in HETERO_MODELS:
            raise ValueError(f"unknown typed model '{model}' ({', '.join(HETERO_MODELS)})")
        if normalize_features not in ("none", "row"):
            raise ValueError(f"normalize_features of a typed model must be none or row, got "
                             f"'{normalize_features}'")
        type_dims, relation_src, relation_dst = (
            [int(v) for v in a] for a in (type_dims, relation_src, relation_dst))
        if min(out_dim, hidden, layers) < 1:
            raise ValueError("out_dim, hidden and layers must be >= 1")
        if not type_dims or not relation_src or len(relation_src) != len(relation_dst):
            raise ValueError(f"a typed model needs node types and relations ({len(type_dims)} "
                             f"types, {len(relation_src)} relation sources, {len(relation_dst)} "
                             "destinations)")
        if min(type_dims) < 0:
            raise ValueError(f"node type input widths must be >= 0, got {min(type_dims)}")
        T = len(type_dims)
        for r, (a, b) in enumerate(zip(relation_src, relation_dst)):
            if not (0 <= a < T and 0 <= b < T):
                raise ValueError(f"relation {r} goes from type {a} to type {b}, outside the {T} "
                                 "node types")
        self.config = dict(model=model, type_dims=type_dims, relation_src=relation_src,
                           relation_dst=relation_dst, out_dim=int(out_dim), hidden=int(hidden),
                           layers=int(layers), normalize_features=normalize_features)
        for t, d in enumerate(type_dims):
            if d > 0:
                self.add_module(f"input{t}", torch.nn.Linear(d, hidden))
                torch.nn.init.zeros_(getattr(self, f"input{t}").bias)
        for l in range(layers):
            self.add_module(f"layer{l}", _HeteroLayer(model, relation_src, relation_dst, T,
                                                      hidden, out_dim if l + 1 == layers
                                                      else hidden))

    def _type_id(self, key, names) -> int:
        if isinstance(key, str):
            if names is None or key not in names:
                raise ValueError(f"input of node type '{key}': the blocks carry no schema naming "
                                 "it; key the inputs by type id" if names is None else
                                 f"input of node type '{key}': the schema's types are {names}")
            return names.index(key)
        t = int(key)
        if not 0 <= t < len(self.config["type_dims"]):
            raise ValueError(f"input of node type {t}, outside the model's "
                             f"{len(self.config['type_dims'])} types")
        return t

    def forward(self, blocks, x):
        """Logits [blocks[-1].num_dst, out_dim] of a typed batch: `blocks` as :class:`dsp.Loader`
        yields them on a heterogeneous partition (with ``src_types`` and ``edge_types``; one per
        layer), `x` the input rows per node type: a dict keyed by type name (as the blocks'
        ``schema`` names it) or type id, or a list indexed by type id. Entry t holds the rows of
        blocks[0]'s sources of type t in their source order (``Batch.x_dict``'s order): raw
        features [n_t, type_dims[t]] for a featured type, the learnt rows [n_t, hidden] for a
        featureless one (:meth:`inputs` builds them); a type without sources may be left out."""
        c = self.config
        if len(blocks) != c["layers"]:
            raise ValueError(f"the batch has {len(blocks)} blocks but the {c['layers']}-layer "
                             "model needs one per layer")
        p = next(self.parameters())
        first = blocks[0]
        stype = _types(first.src_types, int(first.num_src), p.device, "src_types")
        schema = getattr(first, "schema", None)
        names = list(schema.node_types) if schema is not None else None
        items = x.items() if isinstance(x, dict) else enumerate(x)
        given = {}
        for key, v in items:
            if v is None:
                continue
            t = self._type_id(key, names)
            if not isinstance(v, torch.Tensor):
                v = torch.from_numpy(np.array(v, dtype=np.float32))
            given[t] = v.to(p.device, p.dtype)
        h = p.new_zeros(int(first.num_src), c["hidden"])
        for t, d in enumerate(c["type_dims"]):
            rows = torch.nonzero(stype == t).flatten()
            width = d if d > 0 else c["hidden"]
            v = given.get(t)
            if v is None:
                if rows.numel() == 0:
                    continue
                raise ValueError(f"the batch has {rows.numel()} input nodes of type "
                                 f"{names[t] if names else t} but no input rows for them")
            if v.dim() != 2 or tuple(v.shape) != (rows.numel(), width):
                raise ValueError(f"inputs of node type {names[t] if names else t} are "
                                 f"{list(v.shape)} but the model expects [{rows.numel()}, "
                                 f"{width}] (its input nodes x "
                                 f"{'its features' if d > 0 else 'hidden'})")
            if d > 0:
                if c["normalize_features"] == "row":
                    v = v / v.sum(1, keepdim=True).clamp_min(1)
                v = getattr(self, f"input{t}")(v)
            h[rows] = v
        for l, block in enumerate(blocks):
            if l > 0 and int(block.num_src) != int(blocks[l - 1].num_dst):
                raise ValueError(f"block {l} has {int(block.num_src)} source nodes but block "
                                 f"{l - 1} has {int(blocks[l - 1].num_dst)} destination nodes")
            h = getattr(self, f"layer{l}")(block, h)
            if l + 1 < c["layers"]:
                h = torch.relu(h)
        return h

    def inputs(self, batch, embedding=None) -> dict:
        """The input rows of a typed :class:`dsp.Batch` for :meth:`forward`: ``batch.x_dict``
        (the featured types, keyed by name) plus, for every featureless type with input nodes,
        ``embedding`` indexed by their partition ids (``blocks[0].src_ids``): the table of
        :func:`load_embedding_table` (float [num_nodes, hidden], rows by partition id)."""
        c = self.config
        first = batch.blocks[0]
        names = list(batch.schema.node_types)
        out = dict(batch.x_dict or {})
        stype = _index(first.src_types, "cpu")
        ids = _index(first.src_ids, "cpu")
        for t, d in enumerate(c["type_dims"]):
            if d > 0:
                continue
            sel = ids[stype == t]
            if sel.numel() == 0:
                continue
            if embedding is None:
                raise ValueError(f"node type {names[t]} has no features: the model takes the "
                                 "rows it learnt for them; pass embedding= (dsp."
                                 "load_embedding_table of the checkpoint and partition)")
            if not isinstance(embedding, torch.Tensor):
                embedding = torch.from_numpy(np.asarray(embedding))
            out[names[t]] = embedding[sel]
        return out

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.config.items())


def _build(cfg: dict, normalize: str, params: list, source: str):
    """The GNN or HeteroGNN of a recorded model config (ModelConfig::to_json), checked against
    the recorded parameter list [{name, shape}]; ValueError naming `source` otherwise."""
    if not isinstance(cfg, dict) or cfg.get("model") not in MODELS + HETERO_MODELS:
        name = cfg.get("model") if isinstance(cfg, dict) else cfg
        raise ValueError(f"{source}: unknown model '{name}' ({', '.join(MODELS + HETERO_MODELS)})")
    if cfg.get("preaggregated", False):
        raise ValueError(f"{source}: a pre-aggregated model (dsp train --preaggregate) reads "
                         "[x | a] rows made by dsp partition --preaggregate in its first layer; "
                         "dsp.GNN has no such input: retrain without --preaggregate")
    try:
        if cfg["model"] in HETERO_MODELS:
            model = HeteroGNN(cfg["model"], cfg["type_dims"], cfg["relation_src"],
                              cfg["relation_dst"], int(cfg["out_dim"]), int(cfg["hidden"]),
                              int(cfg["layers"]), normalize)
        else:
            model = GNN(cfg["model"], int(cfg["in_dim"]), int(cfg["out_dim"]),
                        int(cfg["hidden"]), int(cfg["layers"]), int(cfg["heads"]),
                        int(cfg["out_heads"]), normalize)
        recorded = [(p["name"], [int(s) for s in p["shape"]]) for p in params]
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{source}: bad model description ({type(e).__name__}: {e})") from None
    mine = [(n, list(p.shape)) for n, p in model.named_parameters()]
    if recorded != mine:
        diff = next((f"{a} against {b}" for a, b in zip(recorded, mine) if a != b),
                    f"{len(recorded)} parameters against {len(mine)}")
        raise ValueError(f"{source}: the recorded parameters do not match dsp."
                         f"{type(model).__name__}'s {cfg['model']} model (recorded, expected: "
                         f"{diff})")
    return model


def _read_checkpoint(path: str):
    """(header, model) of a dsp checkpoint; the model holds the checkpoint's parameters and
    statistics. ValueError naming the file and the fault."""
    try:
        archive = torch.jit.load(path, map_location="cpu")
    except RuntimeError as e:
        raise ValueError(f"{path} is not a dsp checkpoint: {str(e).splitlines()[0]}") from None
    try:
        head = archive.header.numpy().tobytes()
    except (AttributeError, RuntimeError):
        raise ValueError(f"{path} is not a dsp checkpoint: it has no readable header") from None
    if hasattr(archive, "header_checksum"):  # version 2 on: checked before it is parsed
        if archive.header_checksum.numpy().tobytes().decode(errors="replace") != \
                _dsp._checksum(head):
            raise ValueError(f"{path}: the header fails its checksum: the file is damaged")
    try:
        header = json.loads(head.decode())
    except (UnicodeDecodeError, ValueError):
        raise ValueError(f"{path} is not a dsp checkpoint: it has no readable header") from None
    if not isinstance(header, dict) or header.get("format") != CHECKPOINT_FORMAT or \
            header.get("version") not in CHECKPOINT_VERSIONS:
        raise ValueError(f"{path} is not a dsp checkpoint of version "
                         f"{' or '.join(map(str, CHECKPOINT_VERSIONS))}")
    config = header.get("config") if isinstance(header.get("config"), dict) else {}
    normalize = config.get("normalize_features", "none")
    model = _build(config.get("model"), normalize, header.get("params", []), path)
    sums = header.get("checksums") if header.get("version", 1) >= 2 else None
    state = OrderedDict()
    for i, name in enumerate(n for n, _ in model.named_parameters()):
        state[name] = _verified(_entry(archive, f"p{i}", path), sums, f"p{i}",
                                f"parameter '{name}' (p{i})", path)
    if normalize == "standard":
        if not all(hasattr(archive, k) for k in STATS):
            raise ValueError(f"{path}: the model standardises its input (normalize_features "
                             "standard) but the checkpoint holds no feature_mean/feature_inv_std: "
                             "it predates stored statistics; retrain it with a current dsp train")
        for k in STATS:
            state[f"input_norm.{k}"] = _verified(_entry(archive, k, path), sums, k, k,
                                                 path).reshape(-1)
    _load_state(model, state, path)
    return header, model


def _verified(t: "torch.Tensor", sums, key: str, what: str, path: str) -> "torch.Tensor":
    """`t` if it matches the checkpoint's checksum for `key` (version 2; `sums` None: version 1,
    unchecked), else ValueError naming the file and what the damage hit, as the C++ loader."""
    if sums is not None and sums.get(key) != _dsp._checksum(t.contiguous().numpy()):
        raise ValueError(f"{path}: {what} fails its checksum: the file is damaged")
    return t


def _entry(archive, name: str, path: str) -> torch.Tensor:
    try:
        return getattr(archive, name).detach().clone()
    except (AttributeError, RuntimeError):
        raise ValueError(f"checkpoint {path} is damaged: it has no tensor '{name}'") from None


def _load_state(model, state, path: str) -> None:
    try:
        model.load_state_dict(state)
    except RuntimeError as e:
        raise ValueError(f"{path}: the tensors do not fit the model: {e}") from None


def _read_export(directory: str):
    """The model of a directory written by :func:`export_model`."""
    meta_path, state_path = (os.path.join(directory, f) for f in (MODEL_FILE, STATE_FILE))
    for f in (meta_path, state_path):
        if not os.path.isfile(f):
            raise FileNotFoundError(f"{directory} is not a model written by dsp.export_model: "
                                    f"{f} is missing")
    try:
        with open(meta_path) as f:
            meta = json.load(f)
        if (meta.get("format"), meta.get("version")) != (EXPORT_FORMAT, EXPORT_VERSION):
            raise ValueError(f"format {meta.get('format')!r} version {meta.get('version')!r}")
    except (ValueError, AttributeError) as e:
        raise ValueError(f"{meta_path} is not a dsp model description ({e})") from None
    model = _build(meta.get("model"), meta.get("normalize_features", "none"),
                   meta.get("params", []), meta_path)
    try:
        state = torch.load(state_path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch.load raises pickle, zip and runtime errors alike
        raise ValueError(f"{state_path} is not a saved state dict: {e}") from None
    _load_state(model, state, state_path)
    return model


def load_model(path):
    """A trained model in eval mode, on the CPU: a :class:`GNN` (sage, gcn, gat) or, for a typed
    model of a heterogeneous partition (rgcn, hsage), a :class:`HeteroGNN`.

    `path` is a checkpoint of ``dsp train --checkpoint-dir`` (``checkpoint.pt``, ``best.pt``) or a
    directory written by :func:`export_model`. FileNotFoundError for a missing path; ValueError
    naming the file for one that is not a dsp checkpoint or model, an unknown model, a
    pre-aggregated one, or a "standard"-normalised checkpoint without its feature statistics.
    A model that learnt rows for featureless nodes (``embedding_dim`` > 0; a typed model with a
    featureless type) holds no such rows: they are the checkpoint's embedding shards, which
    :func:`load_embedding_table` reads, and the caller passes them in with the features (GNN:
    as the last ``embedding_dim`` columns of x; HeteroGNN: as the featureless types' inputs).
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        model = _read_export(path)
    elif os.path.exists(path):
        model = _read_checkpoint(path)[1]
    else:
        raise FileNotFoundError(f"{path} does not exist (expected a dsp checkpoint or a "
                                "directory written by dsp.export_model)")
    return model.eval()


def export_model(checkpoint, out_dir, *, overwrite: bool = False) -> str:
    """Writes the model of a dsp checkpoint to `out_dir` for use without dsp's checkpoints:
    ``model.json`` (format "dsp-model" version 1; ``model``: the checkpoint's config.model;
    ``normalize_features``; ``params``: [{name, shape}]; ``epoch``) and ``state_dict.pt``
    (``torch.save`` of the model's state dict: parameters by name, plus
    ``input_norm.feature_mean``/``input_norm.feature_inv_std`` for "standard"). A typed model's
    config.model holds its ``type_dims``, ``relation_src`` and ``relation_dst``. The learnt rows
    of featureless nodes are not exported (see :func:`load_embedding_table`). Refuses an
    existing non-empty `out_dir` (FileExistsError) unless `overwrite`. Returns `out_dir`.
    :func:`load_model` reads it back."""
    checkpoint, out_dir = os.fspath(checkpoint), os.fspath(out_dir)
    if not os.path.isfile(checkpoint):
        raise FileNotFoundError(f"{checkpoint} does not exist (expected a dsp checkpoint)")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise FileExistsError(f"{out_dir} exists and is not a directory")
    if os.path.isdir(out_dir) and os.listdir(out_dir) and not overwrite:
        raise FileExistsError(f"{out_dir} exists and is not empty: remove it or pass "
                              "overwrite=True")
    header, model = _read_checkpoint(checkpoint)
    meta = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION,
            "model": header["config"]["model"],
            "normalize_features": model.config["normalize_features"],
            "params": header["params"], "epoch": header.get("epoch")}
    os.makedirs(out_dir, exist_ok=True)
    # Each file staged under a temporary name and renamed, so a reader never sees half of one.
    meta_tmp, state_tmp = (os.path.join(out_dir, f".{f}.tmp") for f in (MODEL_FILE, STATE_FILE))
    # A plain dict (not the OrderedDict with metadata state_dict() returns), which LibTorch's
    # unpickler reads too: `dsp train --init-from DIR` starts from it.
    torch.save(dict(model.state_dict()), state_tmp)
    with open(meta_tmp, "w") as f:
        json.dump(meta, f, indent=1)
    os.replace(state_tmp, os.path.join(out_dir, STATE_FILE))
    os.replace(meta_tmp, os.path.join(out_dir, MODEL_FILE))
    return out_dir



EMBEDDING_MAGIC, EMBEDDING_VERSION = b"DSPEMBD\0", 1
# layout/store/embedding_table.cpp's FileHeader: magic, version, optimizer, dim, begin, end,
# num_nodes, ranks, rank, ids_digest, sums[4], header_sum (112 bytes, native byte order).
_EMBEDDING_HEADER = np.dtype([("magic", "S8"), ("version", "<u4"), ("optimizer", "<u4"),
                              ("dim", "<i8"), ("begin", "<i8"), ("end", "<i8"),
                              ("num_nodes", "<i8"), ("ranks", "<i8"), ("rank", "<i8"),
                              ("ids_digest", "<u8"), ("sums", "<u8", (4,)),
                              ("header_sum", "<u8")])


def load_embedding_table(checkpoint, partition) -> "torch.Tensor":
    """The rows a model learnt for featureless nodes (``dsp train`` with ``embedding_dim``, or a
    typed model with a type without features), as float32 [num_nodes, dim] indexed by
    partition id (``Block.src_ids``) of the partition directory `partition` the model was
    trained on: what :meth:`HeteroGNN.inputs` takes, and for a :class:`GNN` the last ``dim``
    columns of its input (``x = cat([features, table[src_ids]], 1)``). A typed model's rows of
    featured nodes are 0 (they have none).

    Reads the checkpoint's shards ``<checkpoint>.embedding.<r>-of-<P>`` (one per rank of the
    training job, which had one rank per part), checking each header and the rows' checksums as
    dsp does. Not checked: that `partition` is the training one (the shards record its dataset
    ids only as a digest). FileNotFoundError when a shard is missing; ValueError naming the file
    for a model without learnt rows or a damaged or foreign shard."""
    checkpoint, partition = os.fspath(checkpoint), os.fspath(partition)
    header, _ = _read_checkpoint(checkpoint)
    cfg = header["config"]["model"]
    dim = int(cfg.get("embedding_dim", 0))
    if dim == 0:
        raise ValueError(f"{checkpoint}: the model learnt no node rows (embedding_dim 0)")
    meta = _dsp.load_partition_meta(partition)
    parts, num_nodes = int(meta["parts"]), int(meta["num_nodes"])
    offsets = [int(o) for o in meta["offsets"]]
    if cfg["model"] in HETERO_MODELS:  # train/typed_rows.hpp's FeaturelessRows
        bounds = [int(b) for b in meta["hetero"]["type_bounds"]]
        T = len(cfg["type_dims"])
        if len(bounds) != parts * T + 1:
            raise ValueError(f"{partition}: {len(bounds) - 1} (part, type) slots but the model of "
                             f"{checkpoint} has {T} node types over {parts} parts")
        ids, row_offsets = [], [0]
        for p in range(parts):
            for t in range(T):
                if cfg["type_dims"][t] == 0:
                    ids.append(np.arange(bounds[p * T + t], bounds[p * T + t + 1]))
            row_offsets.append(sum(len(a) for a in ids))
        ids = np.concatenate(ids) if ids else np.zeros(0, np.int64)
    else:  # every node's row, in partition id order
        ids, row_offsets = np.arange(num_nodes), offsets
    rows = []
    for r in range(parts):
        shard = f"{checkpoint}.embedding.{r}-of-{parts}"
        if not os.path.isfile(shard):
            raise FileNotFoundError(f"{shard} does not exist: the learnt rows of {checkpoint} "
                                    f"for rank {r} of a {parts}-rank job (one per part of "
                                    f"{partition})")
        rows.append(_read_shard(shard, dim, row_offsets[r], row_offsets[r + 1],
                                row_offsets[-1], r, parts))
    table = torch.zeros(num_nodes, dim)
    table[torch.from_numpy(ids.astype(np.int64))] = torch.from_numpy(np.concatenate(rows))
    return table


def _read_shard(path: str, dim: int, begin: int, end: int, total: int, rank: int,
                ranks: int) -> np.ndarray:
    """The rows [end - begin, dim] of one embedding shard, checked against what the partition
    implies (ValueError naming the file and the fault)."""
    data = np.fromfile(path, dtype=np.uint8)
    size = _EMBEDDING_HEADER.itemsize
    if data.size < size or data[:8].tobytes() != EMBEDDING_MAGIC:
        raise ValueError(f"{path} is not a dsp embedding table")
    h = data[:size].view(_EMBEDDING_HEADER)[0]
    if _dsp._checksum(data[:size - 8]) != f"{int(h['header_sum']):016x}":
        raise ValueError(f"{path}: checksum mismatch in the header: the file is damaged")
    if int(h["version"]) != EMBEDDING_VERSION:
        raise ValueError(f"{path}: embedding table version {int(h['version'])}; this dsp reads "
                         f"{EMBEDDING_VERSION}")
    if int(h["dim"]) != dim:
        raise ValueError(f"{path}: embedding dim {int(h['dim'])} but the model's is {dim}")
    got = (int(h["begin"]), int(h["end"]), int(h["num_nodes"]), int(h["rank"]), int(h["ranks"]))
    if got != (begin, end, total, rank, ranks):
        raise ValueError(f"{path}: rows [{got[0]}, {got[1]}) of {got[2]} (rank {got[3]} of "
                         f"{got[4]}) but the partition gives rank {rank} of {ranks} rows "
                         f"[{begin}, {end}) of {total}: another partition")
    cells = (end - begin) * dim * 4
    values = data[size:size + cells]
    if values.size != cells or _dsp._checksum(values) != f"{int(h['sums'][0]):016x}":
        raise ValueError(f"{path}: checksum mismatch in the rows: the file is damaged")
    return values.view(np.float32).reshape(end - begin, dim)
