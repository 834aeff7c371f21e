"""Your own typed graph as a heterogeneous dataset directory: ``save_hetero_dataset`` from
dicts of arrays (per node type, per relation), ``load_hetero_dataset``, and the heterogeneous
branches of ``from_pyg`` (a ``HeteroData``) and ``from_dgl`` (a heterograph).

As for ``save_dataset``, the arrays are only checked and converted here (dtypes, C order, masks
to ids, the node types and relations in the order of ``dsp convert --from ogb-hetero``: types by
name, relations by key); the C++ writer of ``dsp convert --from ogb-hetero`` builds each
relation's CSR, adds the reverses, validates everything and writes the directory under a
temporary name renamed at the end (``_dsp._save_hetero_dataset``), so both give the same bytes.
"""
import os

import numpy as np

from . import _dsp
from ._data import _SPLITS, _features, _ints, _labels, _numpy, _one_split, _split

_WHO = "dsp.save_hetero_dataset"
_SPLIT_KEYS = tuple(key for key, _ in _SPLITS)


def _bad(message):
    return _dsp.InvalidArgument(f"{_WHO}: {message}")


def _names(types):
    return ", ".join(sorted(types))


def _relation(key):
    """A relation key as (src_type, name, dst_type): a tuple of three strings (PyG's and DGL's
    canonical edge type) or dsp's "src___name___dst"."""
    if isinstance(key, str):
        parts = key.split("___")
        if len(parts) == 3:
            return tuple(parts)
    elif (isinstance(key, tuple) and len(key) == 3
          and all(isinstance(p, str) for p in key)):
        return key
    raise _bad(f"edge_index key {key!r} must be a tuple (src_type, relation, dst_type) or a "
               "string 'src_type___relation___dst_type'")


def _edge_pairs(edges, what):
    """(src, dst) int64 ids of a relation's edges: int [2, E] (PyG's edge_index: row 0 sources,
    row 1 targets) or a tuple ``(src, dst)`` of two 1-d arrays (DGL's ``g.edges(etype=...)``)."""
    if isinstance(edges, tuple) and len(edges) == 2:
        src, dst = (_ints(p, f"{what}[{i}]", 1, _bad) for i, p in enumerate(edges))
        if len(src) != len(dst):
            raise _bad(f"{what} is a tuple (src, dst) of {len(src)} sources and {len(dst)} "
                       "targets")
        return src, dst
    ei = _ints(edges, what, 2, _bad)
    if ei.shape[0] != 2:
        raise _bad(f"{what} must have shape [2, E] (row 0 sources, row 1 targets) or be a tuple "
                   f"(src, dst), got shape {tuple(ei.shape)}")
    return np.ascontiguousarray(ei[0]), np.ascontiguousarray(ei[1])


def _check_ids(src, dst, key, counts, what):
    """InvalidArgument naming the first edge of ``what`` with an id outside its type's ids."""
    s_type, _, d_type = key
    bad = (src < 0) | (src >= counts[s_type]) | (dst < 0) | (dst >= counts[d_type])
    if not bad.any():
        return
    i = int(np.flatnonzero(bad)[0])
    u, v = int(src[i]), int(dst[i])
    end, value, t = (("source", u, s_type) if not 0 <= u < counts[s_type]
                     else ("destination", v, d_type))
    raise _bad(f"{what}: edge {i} ({u} -> {v}): {end} id {value} is outside {t}'s {counts[t]} "
               "ids")


def _key(rel):
    return "___".join(rel)


def _relation_order(keys):
    """The relations in the order of ``dsp convert --from ogb-hetero [--add-reverse]``: by key,
    then the reverse ``(dst, "rev_" + name, src)`` of each, where given, in its relation's order
    (where add_reverse puts them, so a dataset loaded and written again keeps its order)."""
    given = set(keys)

    def forward(k):
        s, r, d = k
        return (d, r[4:], s) if r.startswith("rev_") and (d, r[4:], s) in given else None

    placed = sorted((k for k in keys if forward(k) is None), key=_key)
    rest = [k for k in keys if forward(k) is not None]
    while rest:  # a reverse follows its relation ("rev_rev_x" follows "rev_x")
        pos = {k: i for i, k in enumerate(placed)}
        ready = sorted((k for k in rest if forward(k) in pos), key=lambda k: pos[forward(k)])
        placed += ready
        rest = [k for k in rest if forward(k) not in pos]
    return placed


def _per_target(value, what, target_type):
    """(node type or None, array) of a target-type argument: an array, or a dict of one type."""
    if value is None or not isinstance(value, dict):
        return None, value
    if len(value) != 1:
        raise _bad(f"{what} is given for {len(value)} node types ({_names(value)}); labels and "
                   "splits are on the one target type")
    (t, a), = value.items()
    if target_type is not None and t != target_type:
        raise _bad(f"{what} is given for node type '{t}' but the target type is "
                   f"'{target_type}'; labels and splits are on the target type only")
    return t, a


def _target(target_type, y, splits):
    """The target type and the arrays of y and the splits on it."""
    given = {"y": y, **splits}
    for what, value in given.items():
        t, _ = _per_target(value, what, target_type)
        if target_type is None and t is not None:
            target_type = t
    arrays = {what: _per_target(value, what, target_type)[1] for what, value in given.items()}
    if target_type is None:
        named = [what for what, a in arrays.items() if a is not None]
        if named:
            raise _bad(f"{named[0]} is an array: name its node type with target_type= (or pass "
                       f"{named[0]}={{type: ...}})")
    return target_type, arrays


def _node_counts(num_nodes, relations, x, target_type, y):
    """{type: count}: num_nodes as given (then it lists every type), else each type of x, the
    relations and the target with its count from x's rows, y's length or the largest id + 1."""
    if num_nodes is not None:
        if not isinstance(num_nodes, dict):
            raise _bad(f"num_nodes must be a dict {{node type: count}}, got "
                       f"{type(num_nodes).__name__}")
        counts = {}
        for t, n in num_nodes.items():
            if not isinstance(t, str):
                raise _bad(f"num_nodes key {t!r} must be a node type name (a string)")
            try:
                counts[t] = int(n)
            except (TypeError, ValueError):
                raise _bad(f"num_nodes['{t}'] must be an integer, got {n!r}") from None
            if counts[t] < 0 or counts[t] != n:
                raise _bad(f"num_nodes['{t}'] must be a count >= 0, got {n!r}")
        for key, (src, dst) in relations.items():
            for t in (key[0], key[2]):
                if t not in counts:
                    raise _bad(f"edge_index[{key!r}] names node type '{t}', which num_nodes does "
                               f"not list ({_names(counts)})")
        for t in x:
            if t not in counts:
                raise _bad(f"x['{t}']: node type '{t}' is not listed in num_nodes "
                           f"({_names(counts)})")
        return counts
    fixed = {t: len(a) for t, a in x.items()}
    if target_type is not None and target_type not in fixed and y is not None:
        fixed[target_type] = len(_numpy(y))
    counts = {}
    for key, (src, dst) in relations.items():
        for t, ids in ((key[0], src), (key[2], dst)):
            counts[t] = max(counts.get(t, 0), int(ids.max()) + 1 if len(ids) else 0)
    counts.update(fixed)
    if target_type is not None:
        counts.setdefault(target_type, 0)
    return counts


def save(path, importer, *, edge_index, num_nodes=None, x=None, y=None, train_idx=None,
         valid_idx=None, test_idx=None, target_type=None, add_reverse=False, name="dataset",
         overwrite=False):
    if not isinstance(edge_index, dict):
        raise _bad("edge_index must be a dict {(src_type, relation, dst_type): [2, E] edges}, "
                   f"got {type(edge_index).__name__}")
    x = {} if x is None else x
    if not isinstance(x, dict):
        raise _bad(f"x must be a dict {{node type: [N, F] features}}, got {type(x).__name__}")
    if target_type is not None and not isinstance(target_type, str):
        raise _bad(f"target_type must be a node type name, got {target_type!r}")
    relations = {}
    for key, edges in edge_index.items():
        rel = _relation(key)
        if rel in relations:
            raise _bad(f"edge_index lists relation {rel!r} twice")
        relations[rel] = _edge_pairs(edges, f"edge_index[{rel!r}]")
    feats = {}
    for t, a in x.items():
        if a is None:
            continue
        if not isinstance(t, str):
            raise _bad(f"x key {t!r} must be a node type name (a string)")
        feats[t] = _features(a, f"x['{t}']", _bad)
        if feats[t].shape[1] == 0:
            raise _bad(f"x['{t}'] has no columns: leave the type out of x (a type without "
                       "features gets learnable embeddings)")
    target_type, arrays = _target(target_type, y,
                                  dict(zip(_SPLIT_KEYS, (train_idx, valid_idx, test_idx))))
    counts = _node_counts(num_nodes, relations, feats, target_type, arrays["y"])
    if target_type is not None and target_type not in counts:
        raise _bad(f"target_type '{target_type}' is not one of the node types "
                   f"({_names(counts)})")
    for t, a in feats.items():
        if len(a) != counts[t]:
            raise _bad(f"x['{t}'] has {len(a)} rows but node type {t} has {counts[t]} nodes")
    for key, (src, dst) in relations.items():
        _check_ids(src, dst, key, counts, f"edge_index[{key!r}]")
    n_target = counts.get(target_type, 0)
    labels = None
    if arrays["y"] is not None:
        labels = _labels(arrays["y"], "y", _bad)
        if len(labels) != n_target:
            raise _bad(f"y has {len(labels)} labels but the target type {target_type} has "
                       f"{n_target} nodes")
    splits = {k: _split(arrays[k], k, n_target, _bad, f"the target type {target_type}")
              for k in _SPLIT_KEYS}
    types = sorted(counts)
    keys = _relation_order(list(relations))
    extra = {"importer": importer, "add_reverse": bool(add_reverse),
             "input_edges": {_key(k): len(relations[k][0]) for k in keys}}
    return _dsp._save_hetero_dataset(
        str(os.fspath(path)), types, [counts[t] for t in types], [feats.get(t) for t in types],
        [list(k) for k in keys], [f"{_WHO}: edge_index[{k!r}]" for k in keys],
        [relations[k][0] for k in keys], [relations[k][1] for k in keys], target_type or "",
        labels, splits["train_idx"], splits["valid_idx"], splits["test_idx"], bool(add_reverse),
        str(name), bool(overwrite), extra)


def save_hetero_dataset(path, *, edge_index, num_nodes=None, x=None, y=None, train_idx=None,
                        valid_idx=None, test_idx=None, target_type=None, add_reverse=False,
                        name="dataset", overwrite=False):
    """Writes a heterogeneous dataset directory (what ``dsp convert --from ogb-hetero`` writes)
    from arrays per node type and per relation; returns its dataset.json as a dict.

    ``dsp train --model rgcn|hsage``, ``dsp partition``, ``dsp.partition`` and ``dsp.Loader``
    take the directory. Arrays may be numpy arrays, torch tensors (any device) or anything
    ``np.asarray`` takes. Every id is local to its node type: [0, count).

    edge_index: ``{(src_type, relation, dst_type): edges}`` (PyG's and DGL's canonical edge
        types; ``"src___relation___dst"`` works too), each int [2, E] (row 0 sources, row 1
        targets: PyG's ``data[et].edge_index``) or a tuple ``(src, dst)`` (DGL's
        ``g.edges(etype=et)``). The edge u -> v makes u an in-neighbour of v; repeated edges are
        merged and rows sorted in C++.
    num_nodes: ``{node type: count}``, listing every type (a relation or features naming another
        type is refused); default: each type's rows of ``x``, else the target's labels, else
        its largest id in the relations + 1.
    x: ``{node type: float32 or float16 [count, F]}`` (other numbers become float32); each type
        its own width; a type left out has no features (``dsp train`` gives it learnable
        embeddings).
    y: int [count of the target type] class labels, -1 for unlabeled ([N, 1] is flattened).
    train_idx, valid_idx, test_idx: ids of the target type, or boolean masks of its length.
    target_type: the node type the labels and splits are on; y and the splits may instead be
        given as ``{target_type: array}``, which names it.
    add_reverse: add ``(dst, "rev_" + relation, src)`` for every relation without one, after the
        others (``dsp convert --from ogb-hetero --add-reverse``), so that messages flow both
        ways.
    name: the dataset's name in dataset.json. overwrite: replace an existing ``path``.

    Node types are stored in name order and relations in key order (``src___relation___dst``),
    each reverse ``(dst, "rev_" + relation, src)`` given after them in its relation's order, as
    ``dsp convert --from ogb-hetero [--add-reverse]`` stores OGB's, whatever the dicts' order:
    the same graph gives the same bytes, and a dataset loaded and written again the same files.

    Every fault is one ``dsp.InvalidArgument`` naming the keyword, the node type or the relation
    (a relation naming a type num_nodes does not list, an id outside its type's range, features
    whose rows are not the type's count, labels or splits on a type that is not the target), or
    the file of the array with the message of ``dsp convert`` (a repeated split id, NaN
    features, a label below -1); ``dsp.IoError`` when ``path`` exists (without ``overwrite``)
    or cannot be written. Nothing is left at ``path`` then.
    """
    return save(path, _WHO, edge_index=edge_index, num_nodes=num_nodes, x=x, y=y,
                train_idx=train_idx, valid_idx=valid_idx, test_idx=test_idx,
                target_type=target_type, add_reverse=add_reverse, name=name, overwrite=overwrite)


def load_hetero_dataset(path, *, validate=True):
    """Loads a heterogeneous dataset directory: a dict whose keys ``num_nodes``, ``edge_index``,
    ``x``, ``y``, ``train_idx``, ``valid_idx``, ``test_idx``, ``target_type`` and ``name`` are
    :func:`save_hetero_dataset`'s keywords (writing them again gives the same files), plus
    ``meta`` (dataset.json), ``dir`` and ``csr``: ``{(src, relation, dst): (indptr, indices)}``,
    each relation's in-neighbour CSR (row v, an id of dst, lists its sources). ``x`` and ``csr``
    are read-only numpy views over the mapped files; ``edge_index`` (int64 [2, E], in CSR
    order) is built from ``csr``. ``validate=False`` checks shapes only. ``dsp.load_dataset``
    refuses a heterogeneous directory."""
    d = _dsp._load_hetero_dataset(str(os.fspath(path)), validate=validate)
    schema = d["meta"]["hetero"]
    edge_index = {}
    for key, (indptr, indices) in d["relations"].items():
        indptr = np.asarray(indptr, dtype=np.int64)
        dst = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
        edge_index[key] = np.stack([np.asarray(indices, dtype=np.int64), dst])
    return {
        "meta": d["meta"], "dir": d["dir"], "name": d["meta"]["name"],
        "num_nodes": {t["name"]: t["count"] for t in schema["node_types"]},
        "edge_index": edge_index, "csr": d["relations"], "x": d["features"],
        "y": d["labels"], "train_idx": d["train_idx"], "valid_idx": d["valid_idx"],
        "test_idx": d["test_idx"], "target_type": schema["target_type"] or None,
    }


# ---------------------------------------------------------------- PyG and DGL


def _one_target(found, who):
    """The node type holding labels or splits (``found``: type -> the attributes there)."""
    if len(found) > 1:
        listed = "; ".join(f"{t}: {', '.join(a)}" for t, a in sorted(found.items()))
        raise _dsp.InvalidArgument(
            f"{who}: labels or splits on {len(found)} node types ({listed}); a dataset has one "
            "target type: pass target_type=")
    return next(iter(found)) if found else None


def is_pyg_hetero(data):
    try:
        from torch_geometric.data import HeteroData
    except ImportError:  # without PyG nothing is its HeteroData (a stand-in Data, say)
        return False
    return isinstance(data, HeteroData)


def _adj_t_edges(adj_t):
    """(src, dst) of PyG's transposed adjacency ``adj_t`` (``T.ToSparseTensor``: row v, a
    target, lists its sources u): a torch_sparse SparseTensor or a torch sparse CSR or COO
    tensor; None for anything else."""
    if adj_t is None:
        return None
    if hasattr(adj_t, "coo"):  # torch_sparse.SparseTensor
        row, col, _ = adj_t.coo()
        return col, row
    layout = str(getattr(adj_t, "layout", ""))
    if layout == "torch.sparse_csr":
        crow, col = _numpy(adj_t.crow_indices()), _numpy(adj_t.col_indices())
        row = np.repeat(np.arange(len(crow) - 1, dtype=np.int64), np.diff(crow))
        return col, row
    if layout == "torch.sparse_coo":
        row, col = _numpy(adj_t.coalesce().indices())
        return col, row
    return None


def from_pyg_hetero(data, path, kw):
    """save_hetero_dataset of a torch_geometric HeteroData (see dsp.from_pyg)."""
    who = "dsp.from_pyg"
    node_types = list(data.node_types)
    num_nodes = {}
    for t in node_types:
        n = data[t].num_nodes
        if n is None:
            raise _dsp.InvalidArgument(f"{who}: node type '{t}' has no num_nodes (set "
                                       f"data['{t}'].num_nodes)")
        num_nodes[t] = int(n)
    edge_index = {}
    for et in data.edge_types:
        store = data[et]
        for t in (et[0], et[2]):
            if t not in num_nodes:
                raise _dsp.InvalidArgument(
                    f"{who}: edge type {et!r} names node type '{t}', which is not one of the "
                    f"HeteroData's node types ({_names(num_nodes)}): set data['{t}'].num_nodes")
        ei = store.get("edge_index")
        if ei is None:
            ei = _adj_t_edges(store.get("adj_t"))
        if ei is None:
            raise _dsp.InvalidArgument(f"{who}: edge type {et!r} has neither an edge_index nor "
                                       "an adj_t (a SparseTensor or a torch sparse tensor)")
        edge_index[et] = ei
    target = kw.get("target_type")
    found = {}
    for t in node_types:
        store = data[t]
        attrs = [a for a in ("y",) + tuple(k for pair in _SPLITS for k in pair)
                 if store.get(a) is not None]
        if attrs:
            found[t] = attrs
    if target is None:
        target = _one_target(found, who)
    args = {"num_nodes": num_nodes, "edge_index": edge_index, "target_type": target,
            "x": {t: data[t].get("x") for t in node_types if data[t].get("x") is not None}}
    if target is not None and target in num_nodes:
        store = data[target]
        args["y"] = store.get("y")
        for key, mask in _SPLITS:
            value, attr = store.get(key), key
            if value is None:
                value, attr = store.get(mask), mask
            args[key] = _one_split(value, f"data['{target}'].{attr}", key, who)
    args.update(kw)
    return save(path, who, **args)


def from_dgl_hetero(graph, path, feat, label, masks, kw):
    """save_hetero_dataset of a DGL heterograph (see dsp.from_dgl)."""
    who = "dsp.from_dgl"
    num_nodes = {t: int(graph.num_nodes(t)) for t in graph.ntypes}
    edge_index = {}
    for et in graph.canonical_etypes:
        src, dst = graph.edges(etype=et)
        edge_index[tuple(et)] = (src, dst)

    def node_data(t, key):
        data = graph.nodes[t].data
        return data[key] if key is not None and key in data else None

    target = kw.get("target_type")
    found = {}
    for t in graph.ntypes:
        attrs = [k for k in (label,) + tuple(masks) if node_data(t, k) is not None]
        if attrs:
            found[t] = attrs
    if target is None:
        target = _one_target(found, who)
    args = {"num_nodes": num_nodes, "edge_index": edge_index, "target_type": target,
            "x": {t: node_data(t, feat) for t in graph.ntypes if node_data(t, feat) is not None}}
    if target is not None and target in num_nodes:
        args["y"] = node_data(target, label)
        for key, mask in zip(_SPLIT_KEYS, masks):
            args[key] = _one_split(node_data(target, mask), mask, key, who)
    args.update(kw)
    return save(path, who, **args)

