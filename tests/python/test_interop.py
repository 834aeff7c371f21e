"""Block.to_dgl(), Block.to_pyg(), Batch.to_pyg(): the same graph in each framework's layout, and
the framework's own layers compute on it what a plain mean over the block's CSR computes."""
import sys

import numpy as np
import pytest
import torch

import dsp

FANOUTS = [10, 5]


@pytest.fixture(scope="module")
def batch(cora_p1):
    return next(dsp.Loader(cora_p1, fanouts=FANOUTS, batch_size=16, seed=2).iter_batches())


def csr_edges(block):
    """{(local source, local destination)} of a block, from its CSR."""
    indptr, indices = np.asarray(block.indptr), np.asarray(block.indices)
    return {(int(indices[e]), d) for d in range(block.num_dst)
            for e in range(indptr[d], indptr[d + 1])}


def mean_over_csr(block, h):
    out = torch.zeros(block.num_dst, h.shape[1])
    for d in range(block.num_dst):
        nbrs = block.indices[block.indptr[d]:block.indptr[d + 1]]
        if len(nbrs):
            out[d] = h[nbrs].mean(0)
    return out


def test_block_to_pyg(batch):
    for b in batch.blocks:
        edge_index, size = b.to_pyg()
        assert size == (b.num_src, b.num_dst) and edge_index.dtype == torch.int64
        assert edge_index.shape == (2, len(b.indices))
        # PyG's (source, target) order: row 0 are the neighbours, row 1 the destinations.
        assert set(zip(edge_index[0].tolist(), edge_index[1].tolist())) == csr_edges(b)
    # numpy blocks (as_tensor=False) convert too.
    np_block = dsp.Block(*[np.asarray(v) if isinstance(v, torch.Tensor) else v
                           for v in batch.blocks[0]])
    assert torch.equal(np_block.to_pyg()[0], batch.blocks[0].to_pyg()[0])


def test_pyg_sageconv_on_a_block(batch):
    nn = pytest.importorskip("torch_geometric.nn")
    torch.manual_seed(0)
    conv = nn.SAGEConv(batch.x.shape[1], 8)
    b = batch.blocks[0]
    edge_index, size = b.to_pyg()
    got = conv((batch.x, batch.x[:b.num_dst]), edge_index, size=size)
    want = conv.lin_l(mean_over_csr(b, batch.x)) + conv.lin_r(batch.x[:b.num_dst])
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_batch_to_pyg_hierarchical_layout(batch):
    pytest.importorskip("torch_geometric")
    data = batch.to_pyg()
    blocks = batch.blocks
    assert torch.equal(data.n_id, blocks[0].src_ids) and torch.equal(data.x, batch.x)
    assert data.batch_size == len(batch.seeds) and torch.equal(data.y, batch.y)
    assert torch.equal(data.n_id[:data.batch_size], batch.seeds)
    assert data.num_sampled_nodes == [16, blocks[1].num_src - 16, blocks[0].num_src -
                                      blocks[0].num_dst]
    assert sum(data.num_sampled_edges) == data.edge_index.shape[1]
    # Hop 1 is the last block whole; hop 2 the first block's rows of the nodes hop 1 added.
    ends = np.cumsum(data.num_sampled_nodes)
    hops = torch.split(data.edge_index, data.num_sampled_edges, dim=1)
    assert set(zip(*hops[0].tolist())) == csr_edges(blocks[1])
    assert set(zip(*hops[1].tolist())) == {(s, d) for s, d in csr_edges(blocks[0]) if d >= 16}
    for k, hop in enumerate(hops, start=1):  # sources within hops <= k, targets added by hop k-1
        assert int(hop[0].max()) < ends[k]
        assert int(hop[1].min()) >= (ends[k - 2] if k >= 2 else 0)
        assert int(hop[1].max()) < ends[k - 1]


def test_pyg_model_trims_the_layout_exactly(batch):
    # PyG's GraphSAGE with trim_to_layer drops, layer by layer, the hops that can no longer reach
    # the seeds: with a correct layout the seeds' outputs equal those of the untrimmed model.
    models = pytest.importorskip("torch_geometric.nn.models")
    data = batch.to_pyg()
    torch.manual_seed(0)
    model = models.GraphSAGE(data.x.shape[1], 16, num_layers=2, out_channels=7).eval()
    full = model(data.x, data.edge_index)[:data.batch_size]
    trimmed = model(data.x, data.edge_index, num_sampled_nodes_per_hop=data.num_sampled_nodes,
                    num_sampled_edges_per_hop=data.num_sampled_edges)[:data.batch_size]
    torch.testing.assert_close(trimmed, full)


def test_block_to_dgl(batch):
    dgl = pytest.importorskip("dgl")
    for b in batch.blocks:
        g = b.to_dgl()
        assert (g.num_src_nodes(), g.num_dst_nodes()) == (b.num_src, b.num_dst)
        assert torch.equal(g.srcdata[dgl.NID], b.src_ids)
        assert torch.equal(g.dstdata[dgl.NID], b.src_ids[:b.num_dst])
        assert torch.equal(g.in_degrees(), b.indptr.diff())
        u, v = g.edges()
        assert set(zip(u.tolist(), v.tolist())) == csr_edges(b)
    torch.manual_seed(0)
    conv = dgl.nn.SAGEConv(batch.x.shape[1], 8, "mean")
    b = batch.blocks[0]
    got = conv(b.to_dgl(), (batch.x, batch.x[:b.num_dst]))
    want = conv.fc_self(batch.x[:b.num_dst]) + conv.fc_neigh(mean_over_csr(b, batch.x))
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("module,call,what", [
    ("dgl", lambda b: b.blocks[0].to_dgl(), "Block.to_dgl() needs dgl"),
    ("torch_geometric", lambda b: b.to_pyg(), "Batch.to_pyg() needs torch_geometric"),
])
def test_missing_framework(batch, monkeypatch, module, call, what):
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now fails
    monkeypatch.setitem(sys.modules, module + ".data", None)
    with pytest.raises(ImportError, match=r"^" + what.replace("(", r"\(").replace(")", r"\)") +
                       r", which cannot be imported here \(.*\); install it with: pip install "):
        call(batch)


def test_pin_memory(cora_p1, monkeypatch):
    if not torch.cuda.is_available():
        with pytest.raises(dsp.NotSupported, match=r"pin_memory=True needs a CUDA device"):
            dsp.Loader(cora_p1, fanouts=FANOUTS, pin_memory=True)
    with pytest.raises(dsp.InvalidArgument, match="pin_memory=True needs as_tensor=True"):
        dsp.Loader(cora_p1, fanouts=FANOUTS, pin_memory=True, as_tensor=False)
    # Every tensor of a batch goes through torch's pinned copy (simulated where there is no GPU),
    # made while this thread's memory is bound to the NUMA nodes nearest the current GPU; the
    # thread is unbound again before the batch reaches the caller.
    pinned, bound_to = [], []

    def fake_pin(t):
        pinned.append(t.data_ptr())
        bound_to.append(dsp._dsp._thread_memory_nodes())
        return t.clone()

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.Tensor, "pin_memory", fake_pin)
    near = dsp._dsp._near_memory_nodes("cuda:0")
    assert near and dsp._dsp._thread_memory_nodes() == []
    b = next(dsp.Loader(cora_p1, fanouts=FANOUTS, batch_size=8, pin_memory=True).iter_batches())
    assert dsp._dsp._thread_memory_nodes() == []
    tensors = [b.x, b.y, b.seeds] + [t for blk in b.blocks
                                     for t in (blk.indptr, blk.indices, blk.src_ids)]
    assert len(pinned) == len(tensors)
    assert not {t.data_ptr() for t in tensors} & set(pinned)  # the copies are handed out
    if not any(bound_to):
        pytest.skip("this system refuses to bind a thread's memory (no mbind)")
    assert bound_to == [near] * len(tensors)
