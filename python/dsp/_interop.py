"""Blocks and batches in the layouts of DGL and PyTorch Geometric.

Each framework is imported on first use, so ``import dsp`` needs neither; a missing one raises
ImportError naming it and how to install it.
"""
import importlib


# The DGL node data key of a temporal block's node times (GraphBolt's temporal samplers call a
# node's time its timestamp).
TIME_KEY = "timestamp"


def require(module: str, what: str, install: str):
    """Imports `module` for `what`, or raises ImportError saying so and how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"{what} needs {module.split('.')[0]}, which cannot be imported here "
                          f"({e}); install it with: {install}") from e


def _torch(what: str):
    return require("torch", what, "pip install torch")


def _tensors(torch, *arrays):
    """torch tensors of a block's arrays (numpy ones, from Loader(as_tensor=False), are wrapped)."""
    return [a if a is None or isinstance(a, torch.Tensor) else torch.from_numpy(a) for a in arrays]


def _dst_of_edges(torch, indptr, begin: int, end: int):
    """The destination (local id) of each edge of rows [begin, end) of a CSR over destinations."""
    rows = torch.arange(begin, end, dtype=indptr.dtype, device=indptr.device)
    return torch.repeat_interleave(rows, indptr[begin:end + 1].diff())


def _type_local(torch, src_types, num_types: int):
    """(local, positions): each source's index among the sources of its type (source order) and,
    per type, the positions of its sources."""
    src_types = src_types.long()
    local = torch.empty_like(src_types)
    positions = []
    for t in range(num_types):
        pos = (src_types == t).nonzero().squeeze(1)
        local[pos] = torch.arange(len(pos), dtype=local.dtype, device=local.device)
        positions.append(pos)
    return local, positions


def _by_relation(torch, edge_types, num_relations: int, *arrays):
    """Per relation r, the entries of each array at the edges of relation r (order kept)."""
    edge_types = edge_types.long()
    out = []
    for r in range(num_relations):
        mask = edge_types == r
        out.append([a[mask] for a in arrays])
    return out


def hetero_block_to_dgl(dgl, torch, block):
    """A DGL heterogeneous block (see Block.to_dgl)."""
    schema = block.schema
    indptr, indices, src_ids, src_types, edge_types = _tensors(
        torch, block.indptr, block.indices, block.src_ids, block.src_types, block.edge_types)
    T = len(schema.node_types)
    local, positions = _type_local(torch, src_types, T)
    dst = _dst_of_edges(torch, indptr, 0, block.num_dst)
    per_rel = _by_relation(torch, edge_types, len(schema.relations), local[indices], local[dst])
    num_dst = torch.bincount(src_types[:block.num_dst].long(), minlength=T).tolist()
    g = dgl.create_block({rel: (u, v) for rel, (u, v) in zip(schema.relations, per_rel)},
                         num_src_nodes={t: len(p) for t, p in zip(schema.node_types, positions)},
                         num_dst_nodes=dict(zip(schema.node_types, num_dst)))
    for t, name in enumerate(schema.node_types):
        ids = src_ids[positions[t]]
        g.srcnodes[name].data[dgl.NID] = ids
        g.dstnodes[name].data[dgl.NID] = ids[:num_dst[t]]
    return g


def block_to_dgl(block):
    dgl = require("dgl", "Block.to_dgl()", "pip install dgl (a build for your torch version)")
    torch = _torch("Block.to_dgl()")
    if block.src_types is not None:
        return hetero_block_to_dgl(dgl, torch, block)
    indptr, indices, src_ids, weights, times = _tensors(torch, block.indptr, block.indices,
                                                        block.src_ids, block.weights,
                                                        block.src_times)
    # Rows are destinations and entries their in-neighbours: DGL's CSC. Edge ids are positions.
    edge_ids = torch.arange(len(indices), dtype=indices.dtype, device=indices.device)
    g = dgl.create_block(("csc", (indptr, indices, edge_ids)), num_src_nodes=block.num_src,
                         num_dst_nodes=block.num_dst)
    g.srcdata[dgl.NID] = src_ids
    g.dstdata[dgl.NID] = src_ids[:block.num_dst]
    if weights is not None:
        g.edata["w"] = weights
    if times is not None:  # temporal sampling: the time each node is sampled at
        g.srcdata[TIME_KEY] = times
        g.dstdata[TIME_KEY] = times[:block.num_dst]
    return g


def link_batch_to_dgl(batch):
    """(pair_graph, neg_pair_graph, blocks) of a link batch as DGL's as_edge_prediction_sampler
    gives them (its input_nodes: ``batch.input_nodes``): the positive and the negative pairs as
    graphs over the seeds, which are the last block's destinations (node i: seed i, its global
    id as ``ndata[dgl.NID]``), and every block's ``to_dgl()``. On a typed graph the pair graphs
    are heterographs with every node type (a type's seeds numbered in seed order, as the last
    block numbers its destinations) and every relation, the pairs on the link relation's."""
    dgl = require("dgl", "LinkBatch.to_dgl()", "pip install dgl (a build for your torch version)")
    torch = _torch("LinkBatch.to_dgl()")
    src, dst, label, seeds = _tensors(torch, batch.pairs.src, batch.pairs.dst, batch.pairs.label,
                                      batch.seeds)
    blocks = [b.to_dgl() for b in batch.blocks]
    positive = label > 0
    schema = batch.schema
    if schema is None:
        def pair_graph(mask):
            g = dgl.graph((src[mask], dst[mask]), num_nodes=len(seeds))
            g.ndata[dgl.NID] = seeds
            return g
        return pair_graph(positive), pair_graph(~positive), blocks
    (seed_types,) = _tensors(torch, batch.blocks[-1].src_types[:len(seeds)])
    local, positions = _type_local(torch, seed_types, len(schema.node_types))
    empty = torch.zeros(0, dtype=src.dtype)

    def pair_graph(mask):
        edges = {rel: (local[src[mask]], local[dst[mask]]) if rel == schema.link_relation
                 else (empty, empty) for rel in schema.relations}
        g = dgl.heterograph(edges, num_nodes_dict={t: len(p) for t, p in
                                                   zip(schema.node_types, positions)})
        for t, name in enumerate(schema.node_types):
            g.nodes[name].data[dgl.NID] = seeds[positions[t]]
        return g
    return pair_graph(positive), pair_graph(~positive), blocks


def block_to_pyg(block):
    torch = _torch("Block.to_pyg()")
    indptr, indices = _tensors(torch, block.indptr, block.indices)
    edge_index = torch.stack([indices, _dst_of_edges(torch, indptr, 0, block.num_dst)])
    return edge_index, (block.num_src, block.num_dst)


def batch_to_pyg(batch):
    """A torch_geometric.data.Data in the hierarchical layout of PyG's NeighborLoader.

    Nodes are ``blocks[0].src_ids`` (seeds first, then the nodes each hop adds); hop k's edges
    end at the nodes hop k-1 added, so every node's neighbourhood is sampled once, as in PyG.
    A link batch adds LinkNeighborLoader's ``edge_label_index`` and ``edge_label``: its pairs
    index the seeds, which are the first nodes, so they are local node ids as they stand.
    """
    torch = _torch("Batch.to_pyg()")
    data_mod = require("torch_geometric.data", "Batch.to_pyg()", "pip install torch_geometric")
    if getattr(batch, "schema", None) is not None:
        return hetero_batch_to_pyg(torch, data_mod, batch)
    blocks = batch.blocks
    x, y, n_id = _tensors(torch, batch.x, batch.y, blocks[0].src_ids)
    sources, targets, weights = [], [], []
    num_nodes, num_edges = [blocks[-1].num_dst], []
    first_new = 0  # the first destination that the previous hop added
    for b in reversed(blocks):  # hop 1 (ending at the seeds), hop 2, ...
        indptr, indices, w = _tensors(torch, b.indptr, b.indices, b.weights)
        begin = int(indptr[first_new])
        sources.append(indices[begin:])
        targets.append(_dst_of_edges(torch, indptr, first_new, b.num_dst))
        if w is not None:
            weights.append(w[begin:])
        num_nodes.append(b.num_src - b.num_dst)
        num_edges.append(len(sources[-1]))
        first_new = b.num_dst
    data = data_mod.Data(x=x, edge_index=torch.stack([torch.cat(sources), torch.cat(targets)]),
                         y=y, n_id=n_id, batch_size=blocks[-1].num_dst,
                         num_sampled_nodes=num_nodes, num_sampled_edges=num_edges)
    if weights:
        data.edge_weight = torch.cat(weights)
    if blocks[0].src_times is not None:  # temporal: n_id[i] is sampled at node_time[i]
        (node_time,) = _tensors(torch, blocks[0].src_times)
        data.node_time = node_time
        data.seed_time = node_time[:blocks[-1].num_dst]  # PyG NodeLoader's name
    pairs = getattr(batch, "pairs", None)
    if pairs is not None:
        src, dst, label = _tensors(torch, pairs.src, pairs.dst, pairs.label)
        data.edge_label_index = torch.stack([src, dst])
        data.edge_label = label
    return data


def hetero_batch_to_pyg(torch, data_mod, batch):
    """A HeteroData in the layout of PyG's heterogeneous NeighborLoader (see Batch.to_pyg).

    A block's sources are a prefix of blocks[0]'s, so the type-local ids of blocks[0] number
    every block's nodes; hop k (block L - k) contributes the edges ending at the nodes hop k - 1
    added, as in the homogeneous layout."""
    schema, blocks = batch.schema, batch.blocks
    T, R = len(schema.node_types), len(schema.relations)
    src_ids, src_types = _tensors(torch, blocks[0].src_ids, blocks[0].src_types)
    local, positions = _type_local(torch, src_types, T)

    def type_counts(begin, end):
        return torch.bincount(src_types[begin:end].long(), minlength=T).tolist()

    num_nodes = [type_counts(0, blocks[-1].num_dst)]
    sources, targets = [[] for _ in range(R)], [[] for _ in range(R)]
    first_new = 0  # the first destination that the previous hop added
    for b in reversed(blocks):
        indptr, indices, edge_types = _tensors(torch, b.indptr, b.indices, b.edge_types)
        begin = int(indptr[first_new])
        dst = _dst_of_edges(torch, indptr, first_new, b.num_dst)
        per_rel = _by_relation(torch, edge_types[begin:], R, local[indices[begin:]], local[dst])
        for r, (u, v) in enumerate(per_rel):
            sources[r].append(u)
            targets[r].append(v)
        num_nodes.append(type_counts(b.num_dst, b.num_src))
        first_new = b.num_dst
    data = data_mod.HeteroData()
    for t, name in enumerate(schema.node_types):
        store = data[name]
        store.n_id = src_ids[positions[t]]
        if batch.x_dict is not None and name in batch.x_dict:
            (store.x,) = _tensors(torch, batch.x_dict[name])
        store.num_sampled_nodes = [hop[t] for hop in num_nodes]
    for r, rel in enumerate(schema.relations):
        store = data[rel]
        store.edge_index = torch.stack([torch.cat(sources[r]), torch.cat(targets[r])])
        store.num_sampled_edges = [len(u) for u in sources[r]]
    target = data[schema.target_type]
    (target.y,) = _tensors(torch, batch.y)
    target.batch_size = blocks[-1].num_dst
    pairs = getattr(batch, "pairs", None)
    if pairs is not None:  # the seeds are blocks[0]'s first sources: their type-local ids
        src, dst, label = _tensors(torch, pairs.src, pairs.dst, pairs.label)
        store = data[schema.link_relation]
        store.edge_label_index = torch.stack([local[src], local[dst]])
        store.edge_label = label
    return data
