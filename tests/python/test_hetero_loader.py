"""dsp.Loader on a heterogeneous partition: the schema, typed blocks whose every edge is an edge of
its relation between nodes of the relation's types (min(fanout, degree) of them per destination
and relation, per-relation fanouts as a list, a dict or text), x_dict rows equal to the
partition's features_<type>.npy, the target type's training seeds and labels, and the same batch
in DGL's heterogeneous blocks and PyG's HeteroData layout (a stand-in HeteroData where PyG cannot
be imported)."""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest
import torch

import dsp

HERE = pathlib.Path(__file__).resolve().parent
FANOUTS = [3, 2]
BATCH = 16


@pytest.fixture(scope="module")
def mag(tmp_path_factory):
    out = tmp_path_factory.mktemp("data") / "mag"
    dsp.generate_hetero(str(out), papers=600, authors=400, institutions=20, fields=40,
                        feature_dim=8, seed=3)
    return str(out)


@pytest.fixture(scope="module")
def mag_p1(mag, tmp_path_factory):
    out = tmp_path_factory.mktemp("part") / "mag-p1"
    dsp.partition(mag, str(out), parts=1)
    return str(out)


@pytest.fixture(scope="module")
def mag_p2(mag, tmp_path_factory):
    out = tmp_path_factory.mktemp("part") / "mag-p2"
    dsp.partition(mag, str(out), parts=2)
    return str(out)


class Layout:
    """A heterogeneous partition's files read with numpy: types by id ranges, the rows of
    features_<type>.npy, and (one part) every node's in-neighbours per relation."""

    def __init__(self, part_dir):
        meta = json.loads(pathlib.Path(part_dir, "partition.json").read_text())
        self.schema = dsp.Schema.from_meta(meta)
        self.T, self.R = len(self.schema.node_types), len(self.schema.relations)
        self.bounds = np.asarray(meta["hetero"]["type_bounds"], dtype=np.int64)
        sizes = np.diff(self.bounds).reshape(meta["parts"], self.T)
        self.before = (np.cumsum(sizes, axis=0) - sizes).reshape(-1)
        self.features = {t: np.load(f"{part_dir}/features_{t}.npy")
                         for t, d in self.schema.feature_dims.items() if d}
        self.labels = np.load(f"{part_dir}/labels.npy")
        self.train = np.load(f"{part_dir}/train_idx.npy")
        self.rel_type = np.array([[self.schema.node_types.index(s), self.schema.node_types.index(d)]
                                  for s, _, d in self.schema.relations])
        if meta["parts"] == 1:
            self.indices = np.load(f"{part_dir}/part0/indices.npy").astype(np.int64)
            self.segments = np.load(f"{part_dir}/part0/relation_indptr.npy")

    def slot(self, ids):
        return np.searchsorted(self.bounds, np.asarray(ids), side="right") - 1

    def type_of(self, ids):
        return self.slot(ids) % self.T

    def type_index(self, ids):
        s = self.slot(ids)
        return self.before[s] + np.asarray(ids) - self.bounds[s]

    def neighbours(self, v, r):
        """Node v's in-neighbours through relation r (global ids)."""
        i = v * self.R + r
        return self.indices[self.segments[i]:self.segments[i + 1]]


@pytest.fixture(scope="module")
def lay(mag_p1):
    return Layout(mag_p1)


def edges_of(block):
    """(src local, dst local, relation) arrays of a block."""
    indptr = np.asarray(block.indptr)
    dst = np.repeat(np.arange(block.num_dst), np.diff(indptr))
    return np.asarray(block.indices), dst, np.asarray(block.edge_types).astype(np.int64)


def check_block(block, lay, fanouts):
    """Types, edges and counts of one block; fanouts: [relation] counts of its layer."""
    ids = np.asarray(block.src_ids)
    np.testing.assert_array_equal(np.asarray(block.src_types), lay.type_of(ids))
    src, dst, rel = edges_of(block)
    # Every edge's relation joins the types of its endpoints.
    np.testing.assert_array_equal(lay.rel_type[rel, 0], lay.type_of(ids[src]))
    np.testing.assert_array_equal(lay.rel_type[rel, 1], lay.type_of(ids[dst]))
    indptr = np.asarray(block.indptr)
    for d in range(block.num_dst):
        e = slice(indptr[d], indptr[d + 1])
        assert (np.diff(rel[e]) >= 0).all()  # relation by relation
        v = ids[d]
        for r in range(lay.R):
            picks = ids[src[e][rel[e] == r]]
            nbrs = lay.neighbours(v, r)
            # Without replacement: min(fanout, degree) distinct in-neighbours of the relation.
            assert len(picks) == min(fanouts[r], len(nbrs)), (d, r)
            assert len(set(picks.tolist())) == len(picks) and np.isin(picks, nbrs).all()


def rel_fanouts(lay, counts):
    """[layer from the seeds out][relation] from [relation][layer] counts."""
    return [[counts[r][layer] for r in range(lay.R)] for layer in range(len(counts[0]))]


def first_batch(path, **kw):
    kw = dict(dict(fanouts=FANOUTS, batch_size=BATCH, seed=1, prefetch=0), **kw)
    return next(dsp.Loader(path, **kw).iter_batches())


def test_schema_and_blocks(mag_p1, lay):
    loader = dsp.Loader(mag_p1, fanouts=FANOUTS, batch_size=BATCH, seed=1)
    assert loader.schema == lay.schema and lay.schema.target_type == "paper"
    assert len(lay.schema.relations) == 8 and ("author", "writes", "paper") in lay.schema.relations
    batches = list(loader.iter_batches())
    every = [[f] * lay.R for f in FANOUTS]
    for b in batches:
        assert b.x is None and b.schema == lay.schema
        assert all(blk.schema == lay.schema for blk in b.blocks)
        for layer, blk in enumerate(reversed(b.blocks)):
            check_block(blk, lay, every[layer])
        seeds = np.asarray(b.seeds)
        np.testing.assert_array_equal(np.asarray(b.blocks[-1].src_ids)[:len(seeds)], seeds)
        np.testing.assert_array_equal(np.asarray(b.y), lay.labels[seeds])
    # The seeds of an epoch are the target type's training seeds (the shuffle wraps around).
    seeds = np.concatenate([np.asarray(b.seeds) for b in batches])
    assert set(seeds.tolist()) == set(lay.train.tolist())
    assert (lay.type_of(seeds) == lay.schema.node_types.index("paper")).all()


def test_x_dict_rows_are_the_type_feature_rows(mag_p1, lay):
    b = first_batch(mag_p1)
    assert set(b.x_dict) == {t for t, d in lay.schema.feature_dims.items() if d} == {"paper"}
    ids = np.asarray(b.blocks[0].src_ids)
    types = np.asarray(b.blocks[0].src_types)
    for name, x in b.x_dict.items():
        t = lay.schema.node_types.index(name)
        rows = lay.type_index(ids[types == t])
        assert x.dtype == torch.float32 and x.shape == (len(rows), lay.schema.feature_dims[name])
        np.testing.assert_array_equal(x.numpy(), lay.features[name][rows])
    # Iterating yields (blocks, x_dict, y).
    blocks, x_dict, y = next(iter(dsp.Loader(mag_p1, fanouts=FANOUTS, batch_size=BATCH)))
    assert isinstance(x_dict, dict) and set(x_dict) == {"paper"}


def test_per_relation_fanouts_dict_and_text(mag_p1, lay):
    fan = {"writes": [2, 1], ("paper", "cites", "paper"): [3, 0], "*": [1, 1]}
    text = "writes:2,cites:3,*:1;writes:1,cites:0,*:1"
    a = first_batch(mag_p1, fanouts=fan)
    b = first_batch(mag_p1, fanouts=text)
    counts = [{"writes": [2, 1], "cites": [3, 0]}.get(name, [1, 1])
              for _, name, _ in lay.schema.relations]
    per_layer = rel_fanouts(lay, counts)
    for layer, blk in enumerate(reversed(a.blocks)):
        check_block(blk, lay, per_layer[layer])
    for x, y in zip(a.blocks, b.blocks):  # the same batch from either form
        for f in ("indptr", "indices", "src_ids", "edge_types", "src_types"):
            np.testing.assert_array_equal(np.asarray(getattr(x, f)), np.asarray(getattr(y, f)))
    # A list gives every relation the same counts, as the text "3,2" does.
    c = first_batch(mag_p1, fanouts="3,2")
    d = first_batch(mag_p1)
    np.testing.assert_array_equal(c.blocks[0].src_ids.numpy(), d.blocks[0].src_ids.numpy())


def test_unknown_relation_is_the_samplers_error(mag_p1, lay):
    keys = ", ".join("___".join(r) for r in lay.schema.relations)
    want = f"--fanouts: no relation 'writs' in the graph (relations: {keys})"
    for fan in ("writs:3;cites:2", {"writs": [3], "cites": [2]}):
        with pytest.raises(dsp.InvalidArgument) as e:
            dsp.Loader(mag_p1, fanouts=fan, batch_size=BATCH)
        assert str(e.value) == want


def test_dataset_directory_partitioned_on_the_fly(mag, lay):
    loader = dsp.Loader(mag, fanouts=FANOUTS, batch_size=BATCH, seed=1)
    assert loader.schema == lay.schema
    b = next(loader.iter_batches())
    on_the_fly = Layout(loader.partition_dir)
    np.testing.assert_array_equal(on_the_fly.type_of(b.blocks[0].src_ids.numpy()),
                                  b.blocks[0].src_types.numpy())
    assert set(b.x_dict) == {"paper"} and len(b.x_dict["paper"]) == int(
        (b.blocks[0].src_types == lay.schema.node_types.index("paper")).sum())


def test_block_to_dgl(mag_p1, lay):
    dgl = pytest.importorskip("dgl")
    b = first_batch(mag_p1)
    for blk in b.blocks:
        g = blk.to_dgl()
        ids, types = blk.src_ids.numpy(), blk.src_types.numpy()
        assert g.is_block and sorted(g.canonical_etypes) == sorted(lay.schema.relations)
        for t, name in enumerate(lay.schema.node_types):
            want = ids[types == t]
            n_dst = int((types[:blk.num_dst] == t).sum())
            assert (g.num_src_nodes(name), g.num_dst_nodes(name)) == (len(want), n_dst)
            np.testing.assert_array_equal(g.srcnodes[name].data[dgl.NID].numpy(), want)
            np.testing.assert_array_equal(g.dstnodes[name].data[dgl.NID].numpy(), want[:n_dst])
        src, dst, rel = edges_of(blk)
        for r, cet in enumerate(lay.schema.relations):
            u, v = g.edges(etype=cet)
            s_ids = g.srcnodes[cet[0]].data[dgl.NID][u].tolist()
            d_ids = g.dstnodes[cet[2]].data[dgl.NID][v].tolist()
            want = {(int(ids[s]), int(ids[d])) for s, d in zip(src[rel == r], dst[rel == r])}
            assert set(zip(s_ids, d_ids)) == want and len(s_ids) == len(want)
    # DGL's HeteroGraphConv runs on the blocks with x_dict as the input features.
    import dgl.nn as dglnn
    torch.manual_seed(0)
    h = {t: torch.zeros(b.blocks[0].src_types.eq(i).sum().item(), 8)
         for i, t in enumerate(lay.schema.node_types)}
    h.update(b.x_dict)
    conv = dglnn.HeteroGraphConv({r: dglnn.SAGEConv(8, 4, "mean")
                                  for r in lay.schema.relations}, aggregate="sum")
    g = b.blocks[0].to_dgl()
    out = conv(g, (h, {t: v[:g.num_dst_nodes(t)] for t, v in h.items()}))
    assert out["paper"].shape == (g.num_dst_nodes("paper"), 4)


class _StandInHeteroData:
    """The part of PyG's HeteroData that Batch.to_pyg uses: stores by node or edge type."""

    def __init__(self):
        self.stores = {}

    def __getitem__(self, key):
        return self.stores.setdefault(key, types.SimpleNamespace())


@pytest.fixture
def hetero_data(monkeypatch):
    try:
        import torch_geometric.data  # noqa: F401
    except ImportError:
        monkeypatch.setitem(sys.modules, "torch_geometric.data",
                            types.SimpleNamespace(HeteroData=_StandInHeteroData))


def test_batch_to_pyg_hetero_layout(mag_p1, lay, hetero_data):
    b = first_batch(mag_p1)
    data = b.to_pyg()
    blocks, schema = b.blocks, lay.schema
    ids, types = blocks[0].src_ids.numpy(), blocks[0].src_types.numpy()
    target = data[schema.target_type]
    assert target.batch_size == len(b.seeds) and torch.equal(target.y, b.y)
    np.testing.assert_array_equal(target.n_id[:len(b.seeds)].numpy(), b.seeds.numpy())
    # Every hop's new nodes per type, in blocks[0]'s source order.
    bounds = [0, blocks[-1].num_dst] + [blk.num_src for blk in reversed(blocks)]
    for t, name in enumerate(schema.node_types):
        store = data[name]
        np.testing.assert_array_equal(store.n_id.numpy(), ids[types == t])
        assert store.num_sampled_nodes == [int((types[lo:hi] == t).sum())
                                           for lo, hi in zip(bounds, bounds[1:])]
        if name in b.x_dict:
            assert torch.equal(store.x, b.x_dict[name])
    # Hop k's edges end at the nodes hop k - 1 added; in global ids they are those of the blocks.
    want, got = set(), set()
    first_new = 0
    for hop, blk in enumerate(reversed(blocks)):
        src, dst, rel = edges_of(blk)
        keep = dst >= first_new
        want |= {(int(ids[s]), int(r), int(ids[d])) for s, d, r in
                 zip(src[keep], dst[keep], rel[keep])}
        first_new = blk.num_dst
    for r, rel_type in enumerate(schema.relations):
        store = data[rel_type]
        assert store.edge_index.shape[0] == 2 and store.edge_index.dtype == torch.int64
        assert sum(store.num_sampled_edges) == store.edge_index.shape[1]
        u, v = store.edge_index
        s_ids = data[rel_type[0]].n_id[u].tolist()
        d_ids = data[rel_type[2]].n_id[v].tolist()
        got |= {(s, r, d) for s, d in zip(s_ids, d_ids)}
    assert got == want


def test_pyg_hetero_model_trims_the_layout_exactly(mag_p1, lay):
    # PyG's trim_to_layer drops, layer by layer, the hops that can no longer reach the seeds,
    # per node and edge type: with a correct layout a HeteroConv stack gives the seeds the same
    # outputs trimmed or not.
    pyg_nn = pytest.importorskip("torch_geometric.nn")
    from torch_geometric.utils import trim_to_layer
    b = first_batch(mag_p1)
    data = b.to_pyg()
    names, rels = lay.schema.node_types, lay.schema.relations
    torch.manual_seed(0)
    x0 = {t: data[t].x if t in b.x_dict else torch.randn(len(data[t].n_id), 8) for t in names}
    e0 = {r: data[r].edge_index for r in rels}
    convs = [pyg_nn.HeteroConv({r: pyg_nn.SAGEConv(8, 8) for r in rels}, aggr="sum")
             for _ in FANOUTS]
    nodes = {t: data[t].num_sampled_nodes for t in names}
    edges = {r: data[r].num_sampled_edges for r in rels}

    def run(trim):
        x, e = dict(x0), dict(e0)
        for i, conv in enumerate(convs):
            if trim:
                x, e, _ = trim_to_layer(i, nodes, edges, x, e)
            out = conv(x, e)
            x = {t: out[t].relu() if t in out else x[t] for t in x}
        return x[lay.schema.target_type][:data[lay.schema.target_type].batch_size]

    with torch.no_grad():
        torch.testing.assert_close(run(True), run(False))


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun not installed")
def test_two_ranks(mag_p2, tmp_path):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    r = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", sys.executable,
                        str(HERE / "hetero_mpi_loader.py"), mag_p2, str(tmp_path)],
                       env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    ranks = [json.loads((tmp_path / f"rank{i}.json").read_text()) for i in range(2)]
    lay = Layout(mag_p2)
    assert ranks[0]["steps"] == ranks[1]["steps"]
    seeds = ranks[0]["seeds"] + ranks[1]["seeds"]
    assert set(seeds) == set(lay.train.tolist())
    assert (lay.type_of(seeds) == lay.schema.node_types.index("paper")).all()


# ---- dsp.LinkLoader on a typed partition (link prediction on author___writes___paper)

WRITES = ("author", "writes", "paper")


@pytest.fixture(scope="module")
def links_p1(tmp_path_factory):
    data = tmp_path_factory.mktemp("data") / "mag-links"
    dsp.generate_hetero(str(data), papers=600, authors=400, institutions=20, fields=40,
                        feature_dim=8, seed=3, link_split="0.8,0.1,0.1")
    out = tmp_path_factory.mktemp("part") / "mag-links-p1"
    dsp.partition(str(data), str(out), parts=1)
    return str(out)


def test_link_loader_pairs_join_the_relations_types_without_their_edges(links_p1):
    lay = Layout(links_p1)
    assert lay.schema.link_relation == WRITES
    writes = lay.schema.relations.index(WRITES)
    rev = lay.schema.relations.index(("paper", "rev_writes", "author"))
    author, paper = lay.schema.node_types.index("author"), lay.schema.node_types.index("paper")
    loader = dsp.LinkLoader(links_p1, fanouts=[-1], batch_size=32, neg_ratio=3, seed=1,
                            prefetch=0)
    train = {tuple(e) for e in np.asarray(loader.local_edges).tolist()}
    b = next(loader.iter_batches())
    assert b.x is None and b.schema == lay.schema and set(b.x_dict) == {"paper"}
    seeds = b.seeds.numpy()
    src, dst, label = (p.numpy() for p in b.pairs)
    assert len(label) == 32 * 4 and (label == 1).sum() == 32
    assert (lay.type_of(seeds[src]) == author).all() and (lay.type_of(seeds[dst]) == paper).all()
    positives = set(zip(seeds[src][label == 1].tolist(), seeds[dst][label == 1].tolist()))
    assert positives <= train
    # Every neighbour sampled: each seed's row is its relations' segments without the batch's
    # edges (in writes) and their reverses (in rev_writes), nothing else left out.
    block = b.blocks[-1]
    ids = block.src_ids.numpy()
    e_src, e_dst, e_rel = edges_of(block)
    for d in range(block.num_dst):
        v = ids[d]
        for r in range(lay.R):
            got = sorted(ids[e_src[(e_dst == d) & (e_rel == r)]].tolist())
            gone = ({u for u, w in positives if w == v} if r == writes else
                    {w for u, w in positives if u == v} if r == rev else set())
            want = sorted(set(lay.neighbours(v, r).tolist()) - gone)
            assert got == want, (d, r)


def test_link_batch_to_pyg_puts_the_pairs_on_the_link_relation(links_p1, hetero_data):
    b = next(dsp.LinkLoader(links_p1, fanouts=[3, 2], batch_size=16, seed=2,
                            prefetch=0).iter_batches())
    data = b.to_pyg()
    store = data[WRITES]
    u, w = store.edge_label_index
    seeds = b.seeds
    assert torch.equal(data["author"].n_id[u], seeds[b.pairs.src])
    assert torch.equal(data["paper"].n_id[w], seeds[b.pairs.dst])
    assert torch.equal(store.edge_label, b.pairs.label)


def test_link_batch_to_dgl_gives_typed_pair_graphs(links_p1, dgl_stand_in):
    b = next(dsp.LinkLoader(links_p1, fanouts=[3, 2], batch_size=16, neg_ratio=2, seed=2,
                            prefetch=0).iter_batches())
    pos_g, neg_g, blocks = b.to_dgl()
    assert len(blocks) == len(b.blocks)
    src, dst, label = b.pairs
    for g, mask in ((pos_g, label == 1), (neg_g, label == 0)):
        assert set(g.edges) == set(b.schema.relations)  # every relation, empty but one
        u, w = g.edges[WRITES]
        author, paper = g.nodes["author"].data["_ID"], g.nodes["paper"].data["_ID"]
        assert torch.equal(author[u], b.seeds[src[mask]])
        assert torch.equal(paper[w], b.seeds[dst[mask]])
        assert sum(g.sizes["num_nodes_dict"].values()) == len(b.seeds)
        # each type's seeds in seed order: the last block's destinations of that type
        for name, n in g.sizes["num_nodes_dict"].items():
            assert n == len(g.nodes[name].data["_ID"])
            assert torch.equal(g.nodes[name].data["_ID"],
                               blocks[-1].dstnodes[name].data["_ID"])


def test_link_batch_to_dgl_typed_with_dgl(links_p1):
    dgl = pytest.importorskip("dgl")
    b = next(dsp.LinkLoader(links_p1, fanouts=[3, 2], batch_size=16, neg_ratio=2, seed=2,
                            prefetch=0).iter_batches())
    pos_g, neg_g, blocks = b.to_dgl()
    src, dst, label = b.pairs
    for g, mask in ((pos_g, label == 1), (neg_g, label == 0)):
        assert sorted(g.canonical_etypes) == sorted(b.schema.relations)
        u, w = g.edges(etype=WRITES)
        assert torch.equal(g.nodes["author"].data[dgl.NID][u], b.seeds[src[mask]])
        assert torch.equal(g.nodes["paper"].data[dgl.NID][w], b.seeds[dst[mask]])
        for t in b.schema.node_types:  # the pair graph's nodes are the last block's outputs
            assert g.num_nodes(t) == blocks[-1].num_dst_nodes(t)


def test_link_loader_unigram_negatives_are_papers_with_authorships(links_p1):
    """--negatives unigram on a typed graph: a negative's destination is a paper drawn by its
    in-degree^0.75 through writes, so never one without a training authorship."""
    lay = Layout(links_p1)
    paper = lay.schema.node_types.index("paper")
    loader = dsp.LinkLoader(links_p1, fanouts=[2], batch_size=64, neg_ratio=4, seed=1,
                            prefetch=0, negatives="unigram")
    authored = {w for _, w in np.asarray(loader.local_edges).tolist()}
    drawn = 0
    for b in loader.iter_batches():
        seeds = b.seeds.numpy()
        src, dst, label = (p.numpy() for p in b.pairs)
        w = seeds[dst][label == 0]
        assert (lay.type_of(w) == paper).all()
        assert set(w.tolist()) <= authored
        drawn += len(w)
    assert drawn == 4 * len(np.asarray(loader.local_edges))
