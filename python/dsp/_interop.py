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


def block_to_dgl(block):
    dgl = require("dgl", "Block.to_dgl()", "pip install dgl (a build for your torch version)")
    torch = _torch("Block.to_dgl()")
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
