"""Your own graph as a dataset directory: ``save_dataset`` from numpy or torch arrays, and the
``from_pyg`` / ``from_dgl`` adapters (a typed graph: _hetero_data.py).

The arrays are only converted here (dtypes, C order, masks to ids, the node count); the C++
writer of ``dsp convert`` builds the CSR, validates everything with the CLI's messages and
writes the directory under a temporary name renamed at the end (``_dsp._save_dataset``).
"""
import json
import os
import tempfile

import numpy as np

from . import _dsp, _interop

_SPLITS = (("train_idx", "train_mask"), ("valid_idx", "val_mask"), ("test_idx", "test_mask"))


def _bad(message):
    return _dsp.InvalidArgument(f"dsp.save_dataset: {message}")


def _numpy(a):
    """``a`` as a numpy array: a torch tensor through ``.detach().cpu().numpy()`` (no torch
    import needed), anything else through ``np.asarray``."""
    if hasattr(a, "detach") and hasattr(a, "cpu") and hasattr(a, "numpy"):
        a = a.detach().cpu().numpy()
    return np.asarray(a)


def int_like(a):
    """``a`` (an array-like or a torch tensor) as a numpy array, an empty one as int64 ([] and ()
    come out as float64): the first step of every id array the package takes."""
    a = _numpy(a)
    if a.size == 0 and a.dtype.kind in "fO":
        a = a.astype(np.int64)
    return a


def as_int64(a, not_integers, too_large):
    """``int_like`` array ``a`` as a C-ordered int64 array; raises ``not_integers(dtype)`` for
    values that are not integers and ``too_large(value)`` for a uint64 beyond int64."""
    if a.dtype.kind not in "iu":
        raise not_integers(a.dtype)
    if a.dtype == np.uint64 and a.size and int(a.max()) > np.iinfo(np.int64).max:
        raise too_large(int(a.max()))
    return np.ascontiguousarray(a, dtype=np.int64)


def _ints(a, what, ndim, bad=_bad):
    """``a`` as a C-ordered int64 array of ``ndim`` dimensions; ``bad`` (InvalidArgument) naming
    ``what`` for another shape or for values that are not integers."""
    a = int_like(a)
    if a.ndim != ndim:
        raise bad(f"{what} must be a {ndim}-d array, got shape {tuple(a.shape)}")
    return as_int64(a, lambda t: bad(f"{what} must hold integers, got an array of {t}"),
                    lambda v: bad(f"{what}: {v} is outside int64"))


def _edges(edge_index):
    """(src, dst) of a [2, E] ``edge_index`` (row 0 sources, row 1 targets)."""
    ei = _ints(edge_index, "edge_index", 2)
    if ei.shape[0] != 2:
        raise _bad(f"edge_index must have shape [2, E] (row 0 sources, row 1 targets), got "
                   f"shape {tuple(ei.shape)}")
    return np.ascontiguousarray(ei[0]), np.ascontiguousarray(ei[1])


def _adj_edges(adj, edge_weight):
    """(src, dst, weights, n) of a square scipy.sparse matrix, ``adj[u, v] != 0`` being the edge
    u -> v; its values become the weights when ``edge_weight is True``."""
    if not hasattr(adj, "tocoo") or len(getattr(adj, "shape", ())) != 2:
        raise _bad(f"adj must be a scipy.sparse matrix or array, got {type(adj).__name__}")
    if adj.shape[0] != adj.shape[1]:
        raise _bad(f"adj must be square (adj[u, v] is the edge u -> v), got shape {adj.shape}")
    coo = adj.tocoo()
    keep = np.asarray(coo.data) != 0  # explicitly stored zeros are no edges
    src, dst = (np.ascontiguousarray(np.asarray(a)[keep], dtype=np.int64)
                for a in (coo.row, coo.col))
    weights = np.asarray(coo.data)[keep] if edge_weight is True else None
    return src, dst, weights, int(adj.shape[0])


def _weights(edge_weight, count, what):
    """``edge_weight`` as float32 [count] (the edges of ``what``), or None."""
    if edge_weight is None:
        return None
    w = _numpy(edge_weight)
    if w.ndim == 2 and w.shape[1] == 1:
        w = w[:, 0]
    if w.ndim != 1 or w.dtype.kind not in "fiub":
        raise _bad(f"edge_weight must be a 1-d array of numbers, got {w.dtype} of shape "
                   f"{tuple(w.shape)}")
    if len(w) != count:
        raise _bad(f"edge_weight has {len(w)} values but {what} has {count} edges")
    return np.ascontiguousarray(w, dtype=np.float32)


def _graph(edge_index, csr, adj, edge_weight, num_nodes):
    """The graph input as the writer's keywords plus the node count: edges (src, dst) or a CSR
    in dsp's layout (indptr, indices). Exactly one input must be given."""
    given = [k for k, v in (("edge_index", edge_index), ("csr", csr), ("adj", adj))
             if v is not None]
    if len(given) != 1:
        raise _bad("give exactly one graph input, edge_index, csr or adj; got "
                   + (" and ".join(given) if given else "none"))
    what = given[0]
    if edge_weight is True and what != "adj":
        raise _bad("edge_weight=True takes the weights from adj's values; with "
                   f"{what}, pass an array")
    g = {"graph_what": what}
    if what == "edge_index":
        src, dst = _edges(edge_index)
        n = int(max(src.max(), dst.max())) + 1 if len(src) else 0
        g.update(src=src, dst=dst, edge_weight=_weights(edge_weight, len(src), what))
    elif what == "adj":
        if edge_weight is not None and edge_weight is not True:
            raise _bad("with adj, edge weights are the matrix's values: pass edge_weight=True")
        src, dst, w, n = _adj_edges(adj, edge_weight)
        g.update(src=src, dst=dst, edge_weight=_weights(w, len(src), what))
    else:
        if not isinstance(csr, (tuple, list)) or len(csr) != 2:
            raise _bad("csr must be a pair (indptr, indices)")
        indptr, indices = _ints(csr[0], "csr indptr", 1), _ints(csr[1], "csr indices", 1)
        n = len(indptr) - 1
        g.update(indptr=indptr, indices=indices,
                 edge_weight=_weights(edge_weight, len(indices), what))
    if num_nodes is not None:
        if what != "edge_index" and int(num_nodes) != n:
            raise _bad(f"num_nodes = {num_nodes} but {what} has {n} nodes")
        n = int(num_nodes)
    return g, n


def _times(t, count, what, per):
    """``t`` as int64 [count] times (one per ``per`` of ``what``), or None."""
    if t is None:
        return None
    a = _numpy(t)
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != 1 or a.dtype.kind not in "iu":
        raise _bad(f"{what} must be a 1-d array of integer times, got {a.dtype} of shape "
                   f"{tuple(a.shape)}")
    if len(a) != count:
        raise _bad(f"{what} has {len(a)} times but the graph has {count} {per}")
    return _ints(a, what, 1)


def _features(x, what="x", bad=_bad):
    """``x`` as C-ordered float32 or float16 [N, F] (other numbers become float32)."""
    x = _numpy(x)
    if x.ndim != 2:
        raise bad(f"{what} must be a 2-d array [num_nodes, num_features], got shape "
                  f"{tuple(x.shape)}")
    if x.dtype.kind not in "fiub":
        raise bad(f"{what} must hold numbers, got an array of {x.dtype}")
    dtype = x.dtype if x.dtype in (np.float32, np.float16) else np.float32
    return np.ascontiguousarray(x, dtype=dtype)


def _labels(y, what="y", bad=_bad):
    """``y`` as int64 [N] class labels (-1: unlabeled); [N, 1] (OGB's layout) is flattened."""
    y = _numpy(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    return _ints(y, what, 1, bad)


def _split(ids, what, n, bad=_bad, nodes="the graph"):
    """A split as int64 node ids: ``ids`` itself, or the nodes where a boolean mask of length
    ``n`` is True. None (no split) for None or no nodes."""
    if ids is None:
        return None
    a = _numpy(ids)
    if a.dtype == np.bool_:
        if a.ndim != 1 or len(a) != n:
            raise bad(f"{what} is a boolean mask of shape {tuple(a.shape)} but {nodes} has "
                      f"{n} nodes")
        a = np.flatnonzero(a)
    a = _ints(a, what, 1, bad)
    return a if len(a) else None


_LINKS = ("link_train", "link_valid", "link_test", "link_valid_neg", "link_test_neg")


def _pairs(pairs, what):
    """Link pairs as C-ordered int64 [E, 2] (src, dst), the layout of the link_*.npy files, from
    [2, E] (PyG's edge_index: row 0 sources, row 1 targets), [E, 2] (one pair a row: OGB's and
    dsp's own) or a tuple ``(src, dst)`` of two 1-d arrays (DGL's ``g.edges()``). None for None
    or no pairs."""
    if pairs is None:
        return None
    if isinstance(pairs, tuple) and len(pairs) == 2:
        src, dst = (_ints(p, f"{what}[{i}]", 1) for i, p in enumerate(pairs))
        if len(src) != len(dst):
            raise _bad(f"{what} is a tuple (src, dst) of {len(src)} sources and {len(dst)} "
                       "targets")
        a = np.stack([src, dst], axis=1)
    else:
        a = int_like(pairs)
        if a.size == 0:
            return None
        a = _ints(a, what, 2)
        if a.shape == (2, 2):
            raise _bad(f"{what} has shape (2, 2), which reads both as [2, E] (row 0 sources, "
                       "row 1 targets) and as [E, 2] (one pair a row): pass it as a tuple "
                       "(src, dst) of two 1-d arrays")
        if a.shape[0] == 2:
            a = a.T
        elif a.shape[1] != 2:
            hint = ("; per-positive negatives ([E, K] destinations, as ogbl-citation2's) need "
                    "link_negatives_per_positive=K" if what.endswith("_neg") else "")
            raise _bad(f"{what} must have shape [2, E] (row 0 sources, row 1 targets) or [E, 2] "
                       f"(one pair a row), got shape {tuple(a.shape)}{hint}")
    return np.ascontiguousarray(a, dtype=np.int64) if len(a) else None


def _per_positive(neg, pos, k, what):
    """Negatives of `k` per positive as [E K, 2] pairs: from [E, K] destinations (ogbl-citation2's
    ``target_node_neg``: row i for positive i, whose source each pair takes) or from pairs already
    [E K, 2] (any of _pairs' layouts)."""
    a = int_like(neg)
    rows = 0 if pos is None else len(pos)
    if a.ndim == 2 and a.shape[0] == rows and a.shape[1] == k and rows > 0:
        a = _ints(a, what, 2)
        return np.ascontiguousarray(np.stack([np.repeat(pos[:, 0], k), a.reshape(-1)], axis=1))
    pairs = _pairs(neg, what)
    if pairs is not None and len(pairs) != rows * k:
        raise _bad(f"{what} must hold {k} negatives for each of the {rows} positives "
                   f"(link_negatives_per_positive={k}): [{rows}, {k}] destinations or "
                   f"[{rows * k}, 2] pairs, got shape {tuple(a.shape)}")
    return pairs


def _links(links, per_positive=0):
    """The link keywords as int64 [E, 2] arrays or None; InvalidArgument naming the keyword for a
    held-out split without its negatives or negatives without their split (the format ranks each
    held-out positive against its split's fixed negatives, or with ``per_positive`` K > 0 against
    its own K)."""
    if int(per_positive) < 0:
        raise _bad(f"link_negatives_per_positive must be >= 0, got {per_positive}")
    out = {k: _pairs(links.get(k), k) for k in _LINKS if not k.endswith("_neg")}
    for k in ("link_valid_neg", "link_test_neg"):
        pos = out[k[:-4]]
        out[k] = (_per_positive(links.get(k), pos, int(per_positive), k)
                  if per_positive and links.get(k) is not None else _pairs(links.get(k), k))
    for split in ("link_valid", "link_test"):
        pos, neg = out[split], out[split + "_neg"]
        if pos is not None and neg is None:
            raise _bad(f"{split} needs {split}_neg: Hits@K and MRR rank each held-out pair "
                       "against the split's negative pairs (OGB's collab/ppa/ddi convention)")
        if neg is not None and pos is None:
            raise _bad(f"{split}_neg without {split}: negative pairs rank a held-out split's "
                       "positive pairs; give both or neither")
    return out


def _save(path, importer, *, edge_index=None, csr=None, adj=None, x=None, y=None, train_idx=None,
          valid_idx=None, test_idx=None, edge_weight=None, undirected=False, name="dataset",
          num_nodes=None, overwrite=False, edge_time=None, node_time=None, link_train=None,
          link_valid=None, link_test=None, link_valid_neg=None, link_test_neg=None,
          link_held_out_in_graph=False, link_negatives_per_positive=0):
    g, n = _graph(edge_index, csr, adj, edge_weight, num_nodes)
    if edge_time is not None and g["graph_what"] == "adj":
        raise _bad("edge_time needs edge_index or csr (adj's values are its weights)")
    if node_time is not None and edge_time is None:
        raise _bad("node_time needs edge_time: a node's time selects the edges before it")
    edges = len(g["src"]) if "src" in g else len(g["indices"])
    edge_time = _times(edge_time, edges, "edge_time",
                       "edges" if g["graph_what"] == "edge_index" else "entries")
    node_time = _times(node_time, n, "node_time", "nodes")
    splits = {k: _split(v, k, n) for k, v in
              (("train_idx", train_idx), ("valid_idx", valid_idx), ("test_idx", test_idx))}
    links = _links({"link_train": link_train, "link_valid": link_valid, "link_test": link_test,
                    "link_valid_neg": link_valid_neg, "link_test_neg": link_test_neg},
                   link_negatives_per_positive)
    extra = {"importer": importer, "input": g["graph_what"]}
    return _dsp._save_dataset(
        os.fspath(path), n, f"dsp.save_dataset: {g['graph_what']}", g.get("src"), g.get("dst"),
        g.get("indptr"), g.get("indices"), g.get("edge_weight"), bool(undirected),
        None if x is None else _features(x), None if y is None else _labels(y),
        splits["train_idx"], splits["valid_idx"], splits["test_idx"], str(name),
        bool(overwrite), extra, edge_time, node_time, links["link_train"], links["link_valid"],
        links["link_test"], links["link_valid_neg"], links["link_test_neg"],
        bool(link_held_out_in_graph), int(link_negatives_per_positive))


def save_dataset(path, *, edge_index=None, csr=None, adj=None, x=None, y=None, train_idx=None,
                 valid_idx=None, test_idx=None, edge_weight=None, undirected=False,
                 name="dataset", num_nodes=None, overwrite=False, edge_time=None,
                 node_time=None, link_train=None, link_valid=None, link_test=None,
                 link_valid_neg=None, link_test_neg=None, link_held_out_in_graph=False,
                 link_negatives_per_positive=0):
    """Writes a dataset directory (what ``dsp convert`` writes) from arrays; returns its meta.

    ``dsp train``, ``dsp partition``, ``dsp.partition`` and ``dsp.Loader`` take the directory.
    Arrays may be numpy arrays, torch tensors (any device) or anything ``np.asarray`` takes.

    The graph, exactly one of:
        edge_index: int [2, E], PyG's convention: row 0 sources, row 1 targets; the edge u -> v
            makes u an in-neighbour of v (dsp's rows list each node's in-neighbours).
            Repeated edges are merged (the first weight kept) and rows sorted in C++.
        csr: ``(indptr, indices)`` already in dsp's layout: row v lists v's in-neighbours u
            (edges u -> v), sorted, no repeats (as ``dsp.load_dataset`` gives them); written as
            given and checked, unless ``undirected`` (then rebuilt with the reverse edges).
        adj: a square scipy.sparse matrix or array, ``adj[u, v] != 0`` being the edge u -> v
            (rows are sources: PyG's ``from_scipy_sparse_matrix`` reads it so); explicitly stored
            zeros are no edges. scipy itself is never imported.
    undirected: add the reverse of every edge (the dataset is then stored symmetric and marked
        undirected); False: edges as given (a graph already listing both directions is fine).
    edge_weight: float [E], one per edge of ``edge_index`` or entry of ``csr`` (a reverse edge
        takes its edge's weight); with ``adj``, ``True`` takes the matrix's values.
    edge_time: int [E], each edge's time (edge_time.npy), one per edge of ``edge_index`` or entry
        of ``csr`` (a reverse edge takes its edge's time); a repeated edge keeps its earliest
        time (the edge exists from then on). Not with ``adj``.
    node_time: int [N], each node's own time (node_time.npy: the seed time of node
        classification); needs ``edge_time``.
    x: float32 or float16 [N, F] features (other number types become float32).
    y: int [N] class labels, -1 for unlabeled ([N, 1] is flattened).
    train_idx, valid_idx, test_idx: node ids, or boolean masks of length N.
    num_nodes: N; default: the largest id in ``edge_index`` + 1 (pass it when the last nodes have
        no edge), the rows of ``csr`` or the size of ``adj``.
    name: the dataset's name in dataset.json. overwrite: replace an existing ``path``.

    A link-prediction split (``dsp train --task link``, ``dsp.LinkLoader``), the files and
    dataset.json counts of ``dsp convert --link-split``; each node pairs as int [2, E] (PyG's
    ``edge_label_index``: row 0 sources, row 1 targets), [E, 2] (one pair a row: OGB's
    ``split_edge``, ``dsp.load_dataset``'s) or a tuple ``(src, dst)`` (DGL's ``g.edges()``;
    a [2, 2] array is ambiguous and refused):
        link_train: training edges, each an edge of the graph given (the training graph);
            default, when a held-out split is given: every edge of the graph.
        link_valid, link_test: held-out positive edges, none an edge of the graph (in neither
            direction when ``undirected``), unless ``link_held_out_in_graph=True`` (OGB's
            ogbl-collab, whose held-out pairs may repeat training ones).
        link_valid_neg, link_test_neg: the split's negative pairs, shared by all its positives
            (OGB's collab/ppa/ddi convention); required beside the split's positives, and only
            there. Either held-out split may be left out (e.g. train and test only): the
            format holds that, though ``dsp train --task link`` evaluates on both.
        link_negatives_per_positive: K > 0 makes the negatives per positive instead (OGB's
            ogbl-citation2): each held-out positive is ranked against its own K, given as
            [E, K] destinations (``target_node_neg``: row i for positive i, whose source they
            take) or as [E K, 2] pairs, positive by positive; MRR then picks the best epoch.

    The arrays are copied once into the writer, then validated before anything is written, with
    the messages of ``dsp convert`` naming the file of the array and the first fault (``x`` is
    features.npy, ``y`` labels.npy, edges indices.npy, ``link_test`` link_test.npy, ...): a node
    id out of range, labels of the wrong length, features with the wrong number of rows, a
    repeated split id, NaN features, a training pair that is no edge, a held-out pair that is one.
    Raises ``dsp.InvalidArgument`` for every fault of the arguments, ``dsp.IoError`` when
    ``path`` exists (without ``overwrite``) or cannot be written; nothing is left at ``path``
    then (the directory is written under a temporary name and renamed at the end).
    """
    return _save(path, "dsp.save_dataset", edge_index=edge_index, csr=csr, adj=adj, x=x, y=y,
                 train_idx=train_idx, valid_idx=valid_idx, test_idx=test_idx,
                 edge_weight=edge_weight, undirected=undirected, name=name,
                 num_nodes=num_nodes, overwrite=overwrite, edge_time=edge_time,
                 node_time=node_time, link_train=link_train, link_valid=link_valid,
                 link_test=link_test, link_valid_neg=link_valid_neg,
                 link_test_neg=link_test_neg, link_held_out_in_graph=link_held_out_in_graph,
                 link_negatives_per_positive=link_negatives_per_positive)


def _pyg_edge_weight(data):
    """A PyG Data's edge weights: ``edge_weight``, else a 1-d (or [E, 1]) ``edge_attr``."""
    w = getattr(data, "edge_weight", None)
    if w is None:
        attr = getattr(data, "edge_attr", None)
        if attr is not None and (len(attr.shape) == 1 or tuple(attr.shape[1:]) == (1,)):
            w = attr.reshape(-1)
    return w


def _pyg_times(data, num_edges):
    """A PyG Data's (edge_time, node_time): its ``edge_time`` and ``node_time``, else ``time``
    (NeighborLoader's ``time_attr``) as edge times when it has one value per edge, as node times
    when one per node; InvalidArgument when both counts fit."""
    edge_time = getattr(data, "edge_time", None)
    node_time = getattr(data, "node_time", None)
    time = getattr(data, "time", None)
    if time is None or edge_time is not None or node_time is not None:
        return edge_time, node_time
    per_edge, per_node = len(time) == num_edges, len(time) == data.num_nodes
    if per_edge and per_node:
        raise _dsp.InvalidArgument(
            "dsp.from_pyg: the Data's time has one value per edge and per node: pass it as "
            "edge_time= or node_time=")
    return (time, None) if per_edge else (None, time) if per_node else (time, None)


def _one_split(value, attr, kw, who):
    """A split attribute of a Data or a graph as given, when 1-d; InvalidArgument naming
    ``attr`` and the keyword ``kw`` that takes one of several splits ([N, k] masks)."""
    if value is not None and len(value.shape) != 1:
        raise _dsp.InvalidArgument(
            f"{who}: {attr} has shape {tuple(value.shape)}, several splits: pass one as {kw}= "
            f"(e.g. its first column)")
    return value


def from_pyg(data, path, **kw):
    """``save_dataset`` of a ``torch_geometric.data.Data``: its ``edge_index`` (source, target),
    ``x``, ``y``, ``num_nodes``, the splits from ``train_mask``/``val_mask``/``test_mask`` or
    ``train_idx``/``valid_idx``/``test_idx``, edge weights from ``edge_weight`` or a 1-d
    ``edge_attr``, and times from ``edge_time`` / ``node_time``, else from ``time`` (per edge or
    per node by its length). Keywords of :func:`save_dataset` override what the Data gives (e.g.
    ``undirected=True``, ``train_idx=data.train_mask[:, 0]`` for one of several splits) or add to
    it (a link split: ``link_valid=``, ``link_valid_neg=``, ... ).
    Returns the meta. Needs torch_geometric.

    A ``torch_geometric.data.HeteroData`` gives a heterogeneous dataset
    (:func:`save_hetero_dataset`): its ``node_types`` with ``data[t].num_nodes`` and
    ``data[t].x``, its ``edge_types`` with ``data[et].edge_index`` (or ``adj_t``, a
    SparseTensor or a torch sparse tensor), and ``y`` and the splits
    (``train_mask``/``val_mask``/``test_mask`` or ``train_idx``/``valid_idx``/``test_idx``) of
    the one node type holding them, the target (``target_type=`` picks one where several do).
    Keywords of :func:`save_hetero_dataset` override or add to them (``add_reverse=True``,
    ``name=``, ``overwrite=True``); returns dataset.json as a dict."""
    _interop.require("torch_geometric", "dsp.from_pyg", "pip install torch_geometric")
    from . import _hetero_data
    if _hetero_data.is_pyg_hetero(data):
        return _hetero_data.from_pyg_hetero(data, path, kw)
    edge_index = getattr(data, "edge_index", None)
    if edge_index is None and "edge_index" not in kw and "csr" not in kw and "adj" not in kw:
        raise _dsp.InvalidArgument("dsp.from_pyg: the Data has no edge_index (a SparseTensor "
                                   "adj_t? pass csr= or adj= instead)")
    edge_time, node_time = _pyg_times(
        data, edge_index.shape[1] if edge_index is not None else -1)
    args = {"edge_index": edge_index, "x": getattr(data, "x", None),
            "y": getattr(data, "y", None), "edge_weight": _pyg_edge_weight(data),
            "num_nodes": data.num_nodes, "edge_time": edge_time, "node_time": node_time}
    for key, mask in _SPLITS:
        if key in kw:
            continue
        value = getattr(data, key, None)
        attr = key
        if value is None:
            value, attr = getattr(data, mask, None), mask
        args[key] = _one_split(value, attr, key, "dsp.from_pyg")
    if "csr" in kw or "adj" in kw:
        args.update(edge_index=None, edge_weight=None, num_nodes=None, edge_time=None)
    args.update(kw)
    return _save(path, "dsp.from_pyg", **args)


def from_dgl(graph, path, *, feat="feat", label="label", train_mask="train_mask",
             val_mask="val_mask", test_mask="test_mask", **kw):
    """``save_dataset`` of a homogeneous DGL graph: its edges u -> v (``graph.edges()``, in edge
    id order), ``num_nodes()``, and from ``graph.ndata`` the features ``feat``, the labels
    ``label`` and the masks ``train_mask``/``val_mask``/``test_mask`` (each a key, or None to
    leave it out; a missing key is left out). Edge weights and times: pass
    ``edge_weight=graph.edata["w"]``, ``edge_time=graph.edata["timestamp"]`` (edge id order),
    ``node_time=graph.ndata["timestamp"]``. Keywords of :func:`save_dataset` override
    what the graph gives or add to it (a link split: ``link_test=(u, v)``, ``link_test_neg=``,
    ...). Returns the meta. Needs dgl.

    A heterograph (several node or edge types) gives a heterogeneous dataset
    (:func:`save_hetero_dataset`): ``graph.ntypes`` with ``num_nodes(t)``,
    ``graph.canonical_etypes`` with ``edges(etype=et)``, and from ``graph.nodes[t].data`` the
    features ``feat`` of each type and the labels and masks of the one type holding them, the
    target (``target_type=`` picks one where several do). Keywords of
    :func:`save_hetero_dataset` override or add to them; returns dataset.json as a dict."""
    _interop.require("dgl", "dsp.from_dgl", "pip install dgl (a build for your torch version)")
    if len(graph.ntypes) != 1 or len(graph.canonical_etypes) != 1:
        from . import _hetero_data
        return _hetero_data.from_dgl_hetero(graph, path, feat, label,
                                            (train_mask, val_mask, test_mask), kw)
    src, dst = graph.edges()
    ndata = graph.ndata

    def node_data(key):
        return ndata[key] if key is not None and key in ndata else None

    args = {"edge_index": np.stack([_numpy(src), _numpy(dst)]), "x": node_data(feat),
            "y": node_data(label), "num_nodes": graph.num_nodes()}
    for (key, _), mask in zip(_SPLITS, (train_mask, val_mask, test_mask)):
        args[key] = _one_split(node_data(mask), mask, key, "dsp.from_dgl")
    args.update(kw)
    return _save(path, "dsp.from_dgl", **args)


def _ogb_link_split(src, split):
    """The dataset root of an OGB link dataset (given the root or raw/) and its split folder."""
    root = os.path.abspath(os.fspath(src)).rstrip(os.sep)
    if os.path.basename(root) == "raw":
        root = os.path.dirname(root)
    split_root = os.path.join(root, "split")
    names = sorted(d for d in (os.listdir(split_root) if os.path.isdir(split_root) else [])
                   if os.path.isdir(os.path.join(split_root, d)))
    if split is None:
        if not names:
            raise _dsp.IoError(f"{split_root}: no split folder (OGB link datasets come with "
                               "split/<name>/{train,valid,test}.pt)")
        split = names[0]
    if split not in names:
        raise _dsp.IoError(f"{os.path.join(split_root, split)}: no such split directory")
    return root, split


def _pt_dict(torch, path):
    """An OGB split dict saved with torch.save."""
    try:
        d = torch.load(path, map_location="cpu", weights_only=False)
    except TypeError:  # torch before 1.13 has no weights_only
        d = torch.load(path, map_location="cpu")
    if not isinstance(d, dict):
        raise _dsp.FormatError(f"{path}: expected a dict (OGB's edge splits), got "
                               f"{type(d).__name__}")
    return d


def _pt_int(path, d, key, ndim, width=None):
    """d[key] as int64 with `ndim` dimensions (and `width` columns); FormatError naming it."""
    if key not in d:
        raise _dsp.FormatError(f"{path}: expected a dict with key '{key}' (OGB's edge splits), "
                               f"got {sorted(d)}")
    a = _numpy(d[key])
    if a.ndim != ndim or (width is not None and a.shape[1] != width) or \
            not np.issubdtype(a.dtype, np.integer):
        shape = "[E]" if ndim == 1 else f"[E, {width or 'K'}]"
        raise _dsp.FormatError(f"{path}: '{key}' must be integer {shape}, got "
                               f"{a.dtype}{list(a.shape)}")
    return a.astype(np.int64)


def _pt_split(torch, path, part):
    """{stem: array} of one OGB split file (train, valid or test): `edge` (and `edge_neg`) pairs
    as collab/ppa/ddi ship them, or citation2's `source_node`, `target_node` (and
    `target_node_neg` [E, K], K negatives per positive)."""
    d = _pt_dict(torch, path)
    if "edge" in d or "source_node" not in d:
        out = {part + "_edge": _pt_int(path, d, "edge", 2, 2)}
        if part != "train":
            out[part + "_edge_neg"] = _pt_int(path, d, "edge_neg", 2, 2)
        return out
    src, dst = _pt_int(path, d, "source_node", 1), _pt_int(path, d, "target_node", 1)
    if src.shape != dst.shape:
        raise _dsp.FormatError(f"{path}: 'source_node' has {src.shape[0]} entries and "
                               f"'target_node' {dst.shape[0]}")
    out = {part + "_edge": np.stack([src, dst], axis=1)}
    if part != "train":
        neg = _pt_int(path, d, "target_node_neg", 2)
        if neg.shape[0] != src.shape[0]:
            raise _dsp.FormatError(f"{path}: 'target_node_neg' has {neg.shape[0]} rows for "
                                   f"{src.shape[0]} positives")
        out[part + "_target_neg"] = neg
    return out


def convert_ogb_link(src, out, *, split=None, **kw):
    """Converts an OGB link-prediction dataset as OGB ships it (``dsp convert --from ogb-link``).

    ``src`` is the dataset folder (``raw/`` with edge.csv.gz, num-node-list, num-edge-list,
    optionally node-feat; ``split/<name>/{train,valid,test}.pt``) or its ``raw/``. The ``.pt``
    dicts are read with your torch (key ``'edge'``, and ``'edge_neg'`` for valid and test: OGB's
    collab/ppa/ddi layout; or ``'source_node'``, ``'target_node'`` and for valid and test
    ``'target_node_neg'``: ogbl-citation2's 1,000 negatives per positive, which dataset.json then
    records as ``link_negatives_per_positive``) and written as ``.npy`` into a temporary copy of
    the layout, which the
    ``dsp`` CLI of this package converts. ``split``: the folder under split/ (default: the only or
    first one). Keywords as ``dsp convert``'s flags (``overwrite=True``, ``directed=True``,
    ``name=...``). Returns dataset.json as a dict. Raises the CLI's error (``dsp.FormatError`` naming the file and row, ...).
    """
    try:
        import torch
    except ImportError:
        raise _dsp.NotSupported("dsp.convert_ogb_link reads OGB's .pt split files with torch, "
                                "which cannot be imported here") from None
    from . import _train
    root, split = _ogb_link_split(src, split)
    sdir = os.path.join(root, "split", split)
    with tempfile.TemporaryDirectory(prefix="dsp-ogb-link-") as tmp:
        stage = os.path.join(tmp, os.path.basename(root))  # the dataset's name is the folder's
        staged_split = os.path.join(stage, "split", split)
        os.makedirs(staged_split)
        os.symlink(os.path.join(root, "raw"), os.path.join(stage, "raw"))
        for part in ("train", "valid", "test"):
            path = os.path.join(sdir, part + ".pt")
            if not os.path.exists(path):
                continue
            for stem, a in _pt_split(torch, path, part).items():
                np.save(os.path.join(staged_split, stem + ".npy"), a)
        args = ["--from", "ogb-link", "--split", split]
        for key, value in kw.items():
            flag = "--" + key.replace("_", "-")
            if value is True:
                args.append(flag)
            elif value is not False and value is not None:
                args += [flag, str(value)]
        args += [stage, os.path.abspath(os.fspath(out))]
        # Messages name the staged files; the caller knows the .pt files of the split folder.
        _train._launch(_train.cli_path(), "convert", args, 1, (), rename=(staged_split, sdir))
    with open(os.path.join(os.fspath(out), "dataset.json")) as f:
        return json.load(f)
