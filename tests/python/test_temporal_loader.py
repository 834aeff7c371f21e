"""dsp.Loader(temporal="uniform"|"recent"): every seed sampled at its node time, as dsp train
samples it; blocks over (id, time) pairs with src_times, batches with seed_times, repeated ids
expanded in x; to_pyg / to_dgl carry the times; the refusals name what is missing."""
import json
import subprocess
import sys
import types

import numpy as np
import pytest
import torch

import dsp

FANOUTS = [5, 5]


@pytest.fixture(scope="module")
def temporal(tmp_path_factory):
    """A generated temporal community graph and its one-part partition."""
    root = tmp_path_factory.mktemp("temporal")
    data = str(root / "data")
    dsp.generate_community(data, nodes=1500, edges=15000, communities=8, classes=4, features=4,
                           temporal=True, seed=3)
    part = str(root / "p1")
    dsp.partition(data, part, parts=1)
    return data, part


@pytest.fixture(scope="module")
def dataset(temporal):
    return dsp.load_dataset(temporal[0])


def batches(loader, epoch=None):
    return list(loader.iter_batches(epoch))


@pytest.mark.parametrize("strategy,prefetch", [("uniform", 0), ("uniform", 2), ("recent", 2)])
def test_matches_cpp_reference(temporal, strategy, prefetch):
    # The reference samples as job.cpp does (CollectiveSampler::sample: the seeds at their
    # node times), sequentially: the Loader's blocks, times and rows are the same.
    part = temporal[1]
    loader = dsp.Loader(part, fanouts=FANOUTS, batch_size=40, seed=7, prefetch=prefetch,
                        temporal=strategy, as_tensor=False)
    for epoch in (0, 1):
        ref = dsp._reference_epoch(part, FANOUTS, 40, 7, epoch, temporal=strategy)
        got = batches(loader)
        assert len(got) == len(ref) == loader.steps
        for g, r in zip(got, ref):
            np.testing.assert_array_equal(g.seeds, r.seeds)
            np.testing.assert_array_equal(g.seed_times, r.seed_times)
            np.testing.assert_array_equal(g.x, r.x)
            np.testing.assert_array_equal(g.y, r.y)
            for b, rb in zip(g.blocks, r.blocks):
                for name in ("indptr", "indices", "src_ids", "src_times"):
                    np.testing.assert_array_equal(getattr(b, name), getattr(rb, name))


def in_edges(ds):
    """{(source, destination): time} of the dataset (its own ids)."""
    indptr, indices, times = ds["indptr"], ds["indices"], ds["edge_time"]
    dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    return dict(zip(zip(indices.tolist(), dst.tolist()), times.tolist()))


@pytest.mark.parametrize("strategy", ["uniform", "recent"])
def test_blocks_are_temporal(temporal, dataset, strategy):
    part = temporal[1]
    loader = dsp.Loader(part, fanouts=FANOUTS, batch_size=64, seed=1, temporal=strategy,
                        as_tensor=False)
    edges = in_edges(dataset)
    node_time, features = dataset["node_time"], dataset["features"]
    repeated = 0
    for batch in loader.iter_batches():
        seeds = loader.to_original_ids(batch.seeds)
        # Every seed at its node time: the last block's destinations.
        np.testing.assert_array_equal(batch.seed_times, node_time[seeds])
        for layer, b in enumerate(batch.blocks):
            ids = loader.to_original_ids(b.src_ids)
            t = b.src_times
            assert t.dtype == np.int64 and len(t) == b.num_src == len(ids)
            # Distinct (id, time) pairs; one id may come at several times.
            assert len(set(zip(ids.tolist(), t.tolist()))) == b.num_src
            repeated += b.num_src - len(set(ids.tolist()))
            if layer + 1 < len(batch.blocks):  # the next block's sources are these destinations
                nxt = batch.blocks[layer + 1]
                np.testing.assert_array_equal(t[:b.num_dst], nxt.src_times)
            for d in range(b.num_dst):
                for e in range(b.indptr[d], b.indptr[d + 1]):
                    s = b.indices[e]
                    # an edge of the graph, older than its destination's time, whose source
                    # inherits that time
                    assert edges[(int(ids[s]), int(ids[d]))] < t[d]
                    assert t[s] == t[d]
            if strategy == "recent":  # the fanout latest of each row's eligible entries
                d = int(np.argmax(np.diff(b.indptr)))
                got = sorted(edges[(int(ids[b.indices[e]]), int(ids[d]))]
                             for e in range(b.indptr[d], b.indptr[d + 1]))
                row = dataset["indptr"][ids[d]], dataset["indptr"][ids[d] + 1]
                past = np.sort(dataset["edge_time"][row[0]:row[1]])
                past = past[past < t[d]]
                assert got == past[-FANOUTS[0]:].tolist()
        # x: every input node's row, a repeated id's row repeated.
        np.testing.assert_array_equal(batch.x, features[loader.to_original_ids(batch.input_nodes)])
    assert repeated > 0, "no id came at two times: the expansion is not exercised"


def test_plain_loader_has_no_times(temporal):
    b = next(dsp.Loader(temporal[1], fanouts=FANOUTS, batch_size=16).iter_batches())
    assert b.seed_times is None and all(blk.src_times is None for blk in b.blocks)


class _Data:
    """torch_geometric.data.Data's attribute bag, enough for Batch.to_pyg()."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def test_to_pyg_times(temporal, monkeypatch):
    # The layout without torch_geometric installed: a stand-in Data records the attributes.
    if "torch_geometric" not in sys.modules:
        mod = types.ModuleType("torch_geometric.data")
        mod.Data = _Data
        monkeypatch.setitem(sys.modules, "torch_geometric.data", mod)
    batch = next(dsp.Loader(temporal[1], fanouts=FANOUTS, batch_size=16, seed=2,
                            temporal="uniform").iter_batches())
    data = batch.to_pyg()
    assert torch.equal(data.node_time, batch.blocks[0].src_times)
    assert len(data.node_time) == len(data.n_id)
    assert torch.equal(data.seed_time, batch.seed_times)
    assert data.seed_time.dtype == torch.int64 and len(data.seed_time) == data.batch_size


def test_to_dgl_times(temporal):
    dgl = pytest.importorskip("dgl")
    from dsp._interop import TIME_KEY
    batch = next(dsp.Loader(temporal[1], fanouts=FANOUTS, batch_size=16, seed=2,
                            temporal="recent").iter_batches())
    for b in batch.blocks:
        g = b.to_dgl()
        assert torch.equal(g.srcdata[TIME_KEY], b.src_times)
        assert torch.equal(g.dstdata[TIME_KEY], b.src_times[:b.num_dst])
        assert torch.equal(g.srcdata[dgl.NID], b.src_ids)


@pytest.fixture(scope="module")
def no_node_times(temporal, tmp_path_factory):
    """The temporal graph with its edge times but without node times, partitioned."""
    root = tmp_path_factory.mktemp("no_node_times")
    ds = dsp.load_dataset(temporal[0])
    dsp.save_dataset(root / "d", csr=(ds["indptr"], ds["indices"]), x=ds["features"],
                     y=ds["labels"], train_idx=ds["train_idx"], edge_time=ds["edge_time"])
    dsp.partition(str(root / "d"), str(root / "p"), parts=1)
    return str(root / "p")


def bench(part, *args):
    return subprocess.run([dsp.cli_path(), "bench", "sample", part, "--fanouts", "5,5",
                           "--batch-size", "64", "--batches", "2", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_bench_sample_temporal(temporal, no_node_times, tmp_path):
    # dsp bench sample --temporal samples each batch's seeds at their node times.
    figures = {}
    for strategy in ("off", "uniform", "recent"):
        out = tmp_path / f"{strategy}.json"
        r = bench(temporal[1], "--temporal", strategy, "--json", str(out))
        assert r.returncode == 0, r.stderr
        figures[strategy] = json.loads(out.read_text())
        assert figures[strategy]["options"]["temporal"] == strategy
        assert figures[strategy]["modes"][0]["sampled_edges_per_batch"] > 0
    assert "sampler neighbor (temporal recent)" in r.stdout
    # Only the edges before a seed's time: fewer picks than plain sampling of the same seeds.
    assert (figures["uniform"]["modes"][0]["sampled_edges_per_batch"] <
            figures["off"]["modes"][0]["sampled_edges_per_batch"])
    r = bench(no_node_times, "--temporal", "uniform")
    assert r.returncode != 0
    assert (f"--temporal: {no_node_times} has no node times (node_time.npy): each seed is "
            "sampled at its node's time") in r.stderr


def test_refusals(temporal, no_node_times, tmp_path):
    # Edge times without node times: the seeds have no time.
    ds = dsp.load_dataset(temporal[0])
    part = no_node_times
    with pytest.raises(dsp.InvalidArgument) as e:
        dsp.Loader(part, fanouts=FANOUTS, temporal="uniform")
    assert str(e.value) == (f"--temporal: {part} has no node times (node_time.npy): each seed is "
                            "sampled at its node's time")
    # No times at all: the sampler's own message.
    dsp.save_dataset(tmp_path / "u", csr=(ds["indptr"], ds["indices"]), x=ds["features"],
                     y=ds["labels"], train_idx=ds["train_idx"])
    with pytest.raises(dsp.InvalidArgument) as e:
        dsp.Loader(str(tmp_path / "u"), fanouts=FANOUTS, temporal="recent")
    assert str(e.value) == ("sampler: --temporal needs edge times (edge_time.npy), and the "
                            "partition has none")
    with pytest.raises(dsp.InvalidArgument) as e:
        dsp.Loader(temporal[1], fanouts=FANOUTS, temporal="sometimes")
    assert "unknown temporal sampling 'sometimes' (off, uniform, recent)" in str(e.value)
    with pytest.raises(dsp.InvalidArgument) as e:
        dsp.LinkLoader(temporal[1], fanouts=FANOUTS, temporal="uniform")
    assert str(e.value) == ("dsp.LinkLoader: temporal sampling samples node seeds at their node "
                            "times; link batches are not supported with it (temporal='off')")
