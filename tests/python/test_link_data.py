"""Link-prediction data from Python. dsp._data.convert_ogb_link: OGB's .pt link splits read with
torch (here a stand-in that unpickles dicts of numpy arrays, so the test needs no torch),
converted by the dsp CLI. dsp.save_dataset(link_train=, link_valid=, ...): your own split beside
features and labels, loaded back by dsp.load_dataset, trained by dsp.train(task="link"), each
refusal naming its keyword or file; from_pyg / from_dgl pass the keywords through."""
import gzip
import json
import os
import pickle
import sys
import types

import numpy as np
import pytest

import dsp
from dsp import _data


class _PickleTorch:
    """torch.load for dicts pickled by the test."""

    @staticmethod
    def load(path, map_location=None, weights_only=None):
        with open(path, "rb") as f:
            return pickle.load(f)


def _gz(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.write(text)


def _ogbl(root, valid_neg=True):
    _gz(os.path.join(root, "raw", "edge.csv.gz"), "0,1\n1,2\n2,3\n3,4\n")
    _gz(os.path.join(root, "raw", "num-node-list.csv.gz"), "6\n")
    _gz(os.path.join(root, "raw", "num-edge-list.csv.gz"), "4\n")
    split = os.path.join(root, "split", "time")
    os.makedirs(split)
    valid = {"edge": np.array([[4, 5]])}
    if valid_neg:
        valid["edge_neg"] = np.array([[0, 3], [1, 5]])
    for name, d in (("train", {"edge": np.array([[0, 1], [1, 2], [3, 2]])}), ("valid", valid),
                    ("test", {"edge": np.array([[0, 5]]), "edge_neg": np.array([[0, 4]])})):
        with open(os.path.join(split, name + ".pt"), "wb") as f:
            pickle.dump(d, f)
    return split


@pytest.fixture
def cli(monkeypatch):
    if not os.access(dsp.cli_path(), os.X_OK):
        pytest.skip("the dsp CLI is not in this package")
    monkeypatch.setitem(sys.modules, "torch", _PickleTorch)


def test_pt_splits_become_link_files(tmp_path, cli):
    _ogbl(str(tmp_path / "ogbl_toy"))
    meta = _data.convert_ogb_link(tmp_path / "ogbl_toy", tmp_path / "out")
    assert meta["name"] == "ogbl_toy"
    assert meta["num_link_train"] == 3 and meta["num_link_valid_neg"] == 2
    out = tmp_path / "out"
    assert np.load(out / "link_train.npy").tolist() == [[0, 1], [1, 2], [3, 2]]
    assert np.load(out / "link_valid.npy").tolist() == [[4, 5]]
    assert np.load(out / "link_test_neg.npy").tolist() == [[0, 4]]
    assert json.loads((out / "dataset.json").read_text())["extra"]["importer"] == "ogb-link"


def test_missing_negatives_name_the_pt_file(tmp_path, cli):
    split = _ogbl(str(tmp_path / "ogbl_toy"), valid_neg=False)
    with pytest.raises(dsp.FormatError) as e:
        _data.convert_ogb_link(tmp_path / "ogbl_toy", tmp_path / "out")
    assert str(e.value) == (f"{split}/valid.pt: expected a dict with key 'edge_neg' (OGB's edge "
                            "splits), got ['edge']")
    assert not (tmp_path / "out").exists()


def test_a_held_out_edge_in_the_graph_is_kept_as_ogb_keeps_it(tmp_path, cli):
    # ogbl-collab's later collaborations repeat earlier ones: OGB's evaluation keeps them, and so
    # does the import, counting them and marking the dataset (whose check then accepts them).
    split = _ogbl(str(tmp_path / "ogbl_toy"))
    with open(os.path.join(split, "test.pt"), "wb") as f:
        pickle.dump({"edge": np.array([[2, 1]]), "edge_neg": np.array([[0, 4]])}, f)
    _data.convert_ogb_link(tmp_path / "ogbl_toy", tmp_path / "out")
    meta = json.loads((tmp_path / "out" / "dataset.json").read_text())
    assert meta["link_held_out_in_graph"] is True
    assert meta["extra"]["held_out_in_graph"] == {"test": 1}
    assert np.load(tmp_path / "out" / "link_test.npy").tolist() == [[2, 1]]
    # Without the mark, the same files are refused as a leak.
    del meta["link_held_out_in_graph"]
    (tmp_path / "out" / "dataset.json").write_text(json.dumps(meta))
    with pytest.raises(dsp.FormatError) as e:
        dsp.load_dataset(str(tmp_path / "out"))
    assert str(e.value) == (f"{tmp_path / 'out'}/link_test.npy: row 0: held-out edge (2, 1) is an "
                            "edge of the stored graph (in either direction); a split overlapping "
                            "the training graph is refused")


def test_citation2_splits_give_negatives_per_positive(tmp_path, cli):
    # ogbl-citation2's dicts: source_node, target_node and, for valid and test, target_node_neg
    # [E, K]; each positive keeps its own K negatives (its source, each target), in its order.
    split = _ogbl(str(tmp_path / "ogbl_toy"))
    for name, d in (("train", {"source_node": np.array([0, 1, 3]),
                               "target_node": np.array([1, 2, 2])}),
                    ("valid", {"source_node": np.array([4, 0]), "target_node": np.array([5, 2]),
                               "target_node_neg": np.array([[0, 1, 2], [3, 4, 5]])}),
                    ("test", {"source_node": np.array([0]), "target_node": np.array([5]),
                              "target_node_neg": np.array([[1, 2, 4]])})):
        with open(os.path.join(split, name + ".pt"), "wb") as f:
            pickle.dump(d, f)
    meta = _data.convert_ogb_link(tmp_path / "ogbl_toy", tmp_path / "out")
    assert meta["link_negatives_per_positive"] == 3
    out = tmp_path / "out"
    assert np.load(out / "link_valid.npy").tolist() == [[4, 5], [0, 2]]
    assert np.load(out / "link_valid_neg.npy").tolist() == [
        [4, 0], [4, 1], [4, 2], [0, 3], [0, 4], [0, 5]]
    assert np.load(out / "link_test_neg.npy").tolist() == [[0, 1], [0, 2], [0, 4]]
    with open(os.path.join(split, "test.pt"), "wb") as f:
        pickle.dump({"source_node": np.array([0]), "target_node": np.array([5]),
                     "target_node_neg": np.array([[1, 2, 4], [1, 2, 4]])}, f)
    with pytest.raises(dsp.FormatError) as e:
        _data.convert_ogb_link(tmp_path / "ogbl_toy", tmp_path / "bad")
    assert str(e.value) == (f"{split}/test.pt: 'target_node_neg' has 2 rows for 1 positives")


def test_an_existing_output_names_the_keyword(tmp_path, cli):
    # The CLI's message names its flag, --overwrite; the call's names its keyword.
    _ogbl(str(tmp_path / "ogbl_toy"))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(dsp.IoError) as e:
        _data.convert_ogb_link(tmp_path / "ogbl_toy", out)
    assert str(e.value) == f"{out}: already exists (pass overwrite=True to replace it)"
    assert _data.convert_ogb_link(tmp_path / "ogbl_toy", out, overwrite=True)["num_link_train"] == 3


def test_the_converter_is_the_packages():
    assert dsp.convert_ogb_link is _data.convert_ogb_link
    assert "convert_ogb_link" in dsp.__all__


# ---------------------------------------------------------------- dsp.save_dataset's link split


@pytest.fixture(scope="module")
def planted():
    """A planted undirected graph of 300 nodes in 4 communities: its distinct edges (min, max)
    split into training, validation and test edges, negatives that are no edge, community
    features and labels."""
    rng = np.random.default_rng(0)
    n, k = 300, 4
    comm = np.arange(n) % k
    edges = set()
    while len(edges) < 1500:
        u = int(rng.integers(n))
        same = rng.random() < 0.9
        v = int(rng.choice(np.flatnonzero(comm == comm[u]))) if same else int(rng.integers(n))
        if u != v:
            edges.add((min(u, v), max(u, v)))
    e = np.array(sorted(edges), dtype=np.int64)[rng.permutation(len(edges))]

    def negatives(count):
        out = set()
        while len(out) < count:
            u, v = (int(a) for a in rng.integers(n, size=2))
            if u != v and (min(u, v), max(u, v)) not in edges:
                out.add((u, v))
        return np.array(sorted(out), dtype=np.int64)

    x = (np.eye(k, dtype=np.float32)[comm] + rng.normal(0, 0.5, (n, k))).astype(np.float32)
    return {"n": n, "train": e[225:], "valid": e[:75], "test": e[75:225],
            "valid_neg": negatives(200), "test_neg": negatives(200), "x": x, "y": comm}


def _save_planted(path, p, **kw):
    """The planted split saved in each accepted layout: the graph as PyG's [2, E] edge_index,
    validation pairs [E, 2], their negatives [2, M], test pairs as DGL's (src, dst) tuple."""
    args = dict(edge_index=p["train"].T, undirected=True, x=p["x"], y=p["y"], num_nodes=p["n"],
                link_valid=p["valid"], link_valid_neg=p["valid_neg"].T,
                link_test=(p["test"][:, 0], p["test"][:, 1]), link_test_neg=p["test_neg"])
    args.update(kw)
    return dsp.save_dataset(path, **args)


def test_a_saved_link_split_round_trips_with_features(tmp_path, planted):
    p = planted
    meta = _save_planted(tmp_path / "ds", p)
    # Without link_train every edge of the graph trains, one pair (min, max) per undirected edge,
    # as dsp convert --from ogb-link does without train_edge.
    assert (meta["num_link_train"], meta["num_link_valid"], meta["num_link_test"],
            meta["num_link_valid_neg"], meta["num_link_test_neg"]) == (1275, 75, 150, 200, 200)
    assert meta["feature_dim"] == 4 and meta["num_classes"] == 4 and meta["directed"] is False
    assert "link_held_out_in_graph" not in meta
    ds = dsp.load_dataset(str(tmp_path / "ds"))
    assert ds["meta"] == meta
    assert ds["link_train"].dtype == np.int64 and ds["link_train"].shape == (1275, 2)
    assert ds["link_train"].tolist() == sorted(p["train"].tolist())
    for key in ("valid", "test", "valid_neg", "test_neg"):
        assert ds["link_" + key].tolist() == p[key].tolist(), key  # [E, 2], as given
    assert np.array_equal(ds["features"], p["x"]) and ds["labels"].tolist() == p["y"].tolist()
    # The files and keys of dsp convert --link-split.
    for name in ("link_train", "link_valid", "link_test", "link_valid_neg", "link_test_neg"):
        assert np.array_equal(np.load(tmp_path / "ds" / f"{name}.npy"), ds[name]), name
    # A dataset without a link split has none.
    dsp.save_dataset(tmp_path / "plain", edge_index=[[0], [1]])
    plain = dsp.load_dataset(str(tmp_path / "plain"))
    assert plain["link_train"] is None and plain["link_test_neg"] is None


def test_a_saved_link_split_trains(tmp_path, planted):
    _save_planted(tmp_path / "ds", planted)
    r = dsp.train({"path": str(tmp_path / "ds"), "task": "link", "epochs": 1, "fanouts": [5, 5],
                   "batch_size": 256, "hidden": 16, "hits_k": [10], "threads": 1})
    assert r["epochs_run"] == 1 and r["metric"] == "hits@10"
    assert 0.0 <= r["best_val_acc"] <= 1.0 and 0.0 <= r["test_acc_at_best"] <= 1.0


def test_subsets_the_format_holds(tmp_path, planted):
    p = planted
    # Training and test pairs without validation ones; explicit training pairs, a subset of the
    # graph's edges, in either direction of an undirected edge.
    train = p["train"][:100][:, ::-1]
    meta = _save_planted(tmp_path / "a", p, link_train=train, link_valid=None,
                         link_valid_neg=None)
    assert meta["num_link_train"] == 100 and meta["num_link_test"] == 150
    assert "num_link_valid" not in meta and "num_link_valid_neg" not in meta
    ds = dsp.load_dataset(str(tmp_path / "a"))
    assert ds["link_valid"] is None and ds["link_train"].tolist() == train.tolist()
    assert not (tmp_path / "a" / "link_valid.npy").exists()
    # Training needs both held-out splits: the refusal names the one that is missing.
    with pytest.raises(dsp.FormatError) as e:
        dsp.train({"path": str(tmp_path / "a"), "task": "link", "epochs": 1, "fanouts": [5, 5]})
    assert str(e.value) == (
        f"{tmp_path / 'a'}: the dataset has no link_valid.npy (held-out pairs and their "
        "negatives): link prediction chooses its best epoch on validation pairs and reports test "
        "pairs; add both (dsp.save_dataset(link_valid=..., link_test=..., link_valid_neg=..., "
        "link_test_neg=...), dsp convert --link-split)")
    # Training pairs alone (ogb-link --no-split's layout); empty splits are no splits.
    meta = dsp.save_dataset(tmp_path / "b", edge_index=p["train"].T, link_train=p["train"],
                            link_valid=np.zeros((0, 2), dtype=np.int64), link_valid_neg=[])
    assert meta["num_link_train"] == 1275 and "num_link_valid" not in meta
    # Held-out pairs that are graph edges, when the dataset says so (OGB's ogbl-collab).
    meta = _save_planted(tmp_path / "c", p, link_test=p["train"][:3],
                         link_held_out_in_graph=True)
    assert meta["link_held_out_in_graph"] is True
    assert dsp.load_dataset(str(tmp_path / "c"))["link_test"].tolist() == p["train"][:3].tolist()


def test_negatives_per_positive_as_citation2_gives_them(tmp_path, planted):
    # [E, K] destinations (ogbl-citation2's target_node_neg) or [E K, 2] pairs: each positive
    # keeps its own K, stored as (its source, destination) pairs; the job ranks each against them
    # and picks its epoch by MRR.
    p, k = planted, 4
    rng = np.random.default_rng(1)
    edges = {tuple(e) for e in np.concatenate([p["train"], p["valid"], p["test"]]).tolist()}

    def targets(pos):
        out = []
        for u, _ in pos.tolist():
            row = []
            while len(row) < k:
                w = int(rng.integers(p["n"]))
                if w != u and (min(u, w), max(u, w)) not in edges and w not in row:
                    row.append(w)
            out.append(row)
        return np.array(out, dtype=np.int64)

    vt, tt = targets(p["valid"]), targets(p["test"])
    pairs = np.stack([np.repeat(p["test"][:, 0], k), tt.reshape(-1)], axis=1)
    meta = _save_planted(tmp_path / "ds", p, link_valid_neg=vt, link_test_neg=pairs,
                         link_negatives_per_positive=k)
    assert meta["link_negatives_per_positive"] == k
    assert (meta["num_link_valid_neg"], meta["num_link_test_neg"]) == (75 * k, 150 * k)
    ds = dsp.load_dataset(str(tmp_path / "ds"))
    assert ds["link_negatives_per_positive"] == k
    assert ds["link_valid_neg"][:, 0].tolist() == np.repeat(p["valid"][:, 0], k).tolist()
    assert ds["link_valid_neg"][:, 1].tolist() == vt.reshape(-1).tolist()
    assert ds["link_test_neg"].tolist() == pairs.tolist()
    r = dsp.train({"path": str(tmp_path / "ds"), "task": "link", "epochs": 1, "fanouts": [5, 5],
                   "batch_size": 256, "hidden": 16, "hits_k": [1], "threads": 1})
    assert r["metric"] == "mrr" and r["best_val_acc"] == r["best_val_mrr"]
    # Above a random order's MRR: the mean of 1 / rank over ranks 1..K+1.
    assert sum(1 / i for i in range(1, k + 2)) / (k + 1) < r["test_mrr_at_best"] <= 1.0
    assert dsp.load_dataset(str(tmp_path / "ds"))["link_negatives_per_positive"] == k


def _link_refusals(out):
    """(keywords, exact message) of link splits the format cannot hold, on the graph 0-1-2-3-4
    (undirected) of 6 nodes."""
    ei = np.array([[0, 1, 2, 3], [1, 2, 3, 4]])
    ok = dict(edge_index=ei, undirected=True, num_nodes=6)
    bad = "dsp.save_dataset: "
    return [
        (dict(ok, link_valid=[[4, 5], [0, 5], [1, 5]]),
         bad + "link_valid needs link_valid_neg: Hits@K and MRR rank each held-out pair against "
         "the split's negative pairs (OGB's collab/ppa/ddi convention)"),
        (dict(ok, link_test_neg=[[0, 4], [0, 3], [1, 5]]),
         bad + "link_test_neg without link_test: negative pairs rank a held-out split's positive "
         "pairs; give both or neither"),
        (dict(ok, link_train=[[0, 1], [1, 2]]),
         bad + "link_train has shape (2, 2), which reads both as [2, E] (row 0 sources, row 1 "
         "targets) and as [E, 2] (one pair a row): pass it as a tuple (src, dst) of two 1-d "
         "arrays"),
        (dict(ok, link_test=[[4, 5]], link_test_neg=np.zeros((1, 100), dtype=np.int64)),
         bad + "link_test_neg must have shape [2, E] (row 0 sources, row 1 targets) or [E, 2] "
         "(one pair a row), got shape (1, 100); per-positive negatives ([E, K] destinations, as "
         "ogbl-citation2's) need link_negatives_per_positive=K"),
        (dict(ok, link_test=[[4, 5]], link_test_neg=np.zeros((2, 4), dtype=np.int64),
              link_negatives_per_positive=3),
         bad + "link_test_neg must hold 3 negatives for each of the 1 positives "
         "(link_negatives_per_positive=3): [1, 3] destinations or [3, 2] pairs, got shape (2, 4)"),
        (dict(ok, link_valid=[4, 5], link_valid_neg=[[0, 3]]),
         bad + "link_valid must be a 2-d array, got shape (2,)"),
        (dict(ok, link_train=np.array([[0.0, 1.0, 2.0], [1.0, 2.0, 3.0]])),
         bad + "link_train must hold integers, got an array of float64"),
        (dict(ok, link_test=([4, 5], [5])),
         bad + "link_test is a tuple (src, dst) of 2 sources and 1 targets"),
        (dict(ok, link_train=[[0, 1, 0], [1, 2, 2]]),
         f"{out}/link_train.npy: row 2: training edge (0, 2) is not an edge of the stored graph "
         "(row 2 of indices.npy does not list 0)"),
        (dict(ok, link_test=[[4, 5], [2, 1], [0, 5]], link_test_neg=[[0, 4]]),
         f"{out}/link_test.npy: row 1: held-out edge (2, 1) is an edge of the stored graph (in "
         "either direction); a split overlapping the training graph is refused"),
        (dict(ok, link_valid=[[4, 5]], link_valid_neg=[[0, 9]]),
         f"{out}/link_valid_neg.npy: row 0 column 1 is 9, not a node id in [0, 6)"),
    ]


@pytest.mark.parametrize("case", range(len(_link_refusals("out"))))
def test_link_refusals_name_the_keyword_or_file(tmp_path, case):
    out = tmp_path / "ds"
    kw, message = _link_refusals(str(out))[case]
    with pytest.raises(dsp.InvalidArgument) as e:
        dsp.save_dataset(out, **kw)
    assert str(e.value) == message
    assert list(tmp_path.iterdir()) == []


def test_hand_written_link_files_are_named_alone(tmp_path, planted):
    # A split written beside a dataset whose dataset.json does not count it is refused, naming
    # the file and the key to add, by the reader and so by dsp train (before, the files were
    # ignored and the trainer spoke of a missing link_train.npy).
    p = planted
    out = tmp_path / "ds"
    dsp.save_dataset(out, edge_index=p["train"].T, undirected=True, x=p["x"])
    np.save(out / "link_train.npy", p["train"])
    message = (f"{out}/link_train.npy exists but dataset.json has no num_link_train: count its "
               "pairs there (\"num_link_train\": 1275), or re-save the dataset with "
               "dsp.save_dataset(link_train=...) or dsp convert")
    with pytest.raises(dsp.FormatError) as e:
        dsp.load_dataset(str(out))
    assert str(e.value) == message
    with pytest.raises(dsp.FormatError) as e:
        dsp.train({"path": str(out), "task": "link", "epochs": 1, "threads": 1})
    assert str(e.value) == message
    # A split dataset.json counts but whose file is gone: that file, with the count.
    _save_planted(tmp_path / "full", p)
    os.remove(tmp_path / "full" / "link_valid.npy")
    with pytest.raises(dsp.IoError) as e:
        dsp.load_dataset(str(tmp_path / "full"))
    assert str(e.value) == (f"{tmp_path / 'full'}/link_valid.npy: missing, but dataset.json "
                            "counts 75 pairs")


def test_adapters_pass_the_link_keywords_through(tmp_path, planted, monkeypatch):
    # from_pyg and from_dgl with stand-ins for a PyG Data and a DGL graph (neither framework is
    # needed): save_dataset's link keywords reach the writer through **kw.
    monkeypatch.setattr(_data._interop, "require", lambda *args: None)
    p = planted
    links = dict(link_valid=p["valid"].T, link_valid_neg=p["valid_neg"], link_test=p["test"],
                 link_test_neg=p["test_neg"])
    data = types.SimpleNamespace(edge_index=p["train"].T, x=p["x"], y=p["y"], num_nodes=p["n"])
    meta = dsp.from_pyg(data, tmp_path / "pyg", undirected=True, **links)
    assert (meta["num_link_train"], meta["num_link_valid"], meta["num_link_test_neg"]) == (
        1275, 75, 200)
    assert meta["extra"]["importer"] == "dsp.from_pyg"

    class Graph:
        ntypes, canonical_etypes = ["_N"], [("_N", "_E", "_N")]
        ndata = {"feat": p["x"], "label": p["y"]}

        def edges(self):
            return p["train"][:, 0], p["train"][:, 1]

        def num_nodes(self):
            return p["n"]

    meta = dsp.from_dgl(Graph(), tmp_path / "dgl", undirected=True, **links)
    assert meta["num_link_valid_neg"] == 200 and meta["extra"]["importer"] == "dsp.from_dgl"
    for name in ("link_train", "link_valid", "link_test", "link_valid_neg", "link_test_neg"):
        assert (np.load(tmp_path / "pyg" / f"{name}.npy").tolist()
                == np.load(tmp_path / "dgl" / f"{name}.npy").tolist()), name


def test_pyg_random_link_split_as_the_readme_saves_it(tmp_path, planted):
    # docs/guide-link-prediction.md's example: PyG's RandomLinkSplit, its positives and negatives
    # per split by edge_label, the training graph's edges training.
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch_geometric")
    from torch_geometric.data import Data
    from torch_geometric.transforms import RandomLinkSplit
    p = planted
    e = torch.from_numpy(np.concatenate([p["train"], p["valid"], p["test"]]).T.copy())
    data = Data(edge_index=torch.cat([e, e.flip(0)], 1), x=torch.from_numpy(p["x"]),
                num_nodes=p["n"])
    torch.manual_seed(0)
    train, val, test = RandomLinkSplit(num_val=0.05, num_test=0.1, is_undirected=True)(data)

    def pos(d):
        return d.edge_label_index[:, d.edge_label == 1]

    def neg(d):
        return d.edge_label_index[:, d.edge_label == 0]

    meta = dsp.save_dataset(tmp_path / "links", edge_index=train.edge_index, undirected=True,
                            x=data.x, num_nodes=data.num_nodes, link_valid=pos(val),
                            link_valid_neg=neg(val), link_test=pos(test),
                            link_test_neg=neg(test))
    assert meta["num_link_train"] == train.edge_index.shape[1] // 2
    assert (meta["num_link_valid"], meta["num_link_test"]) == (75, 150)
    ds = dsp.load_dataset(str(tmp_path / "links"))
    assert ds["link_test"].tolist() == pos(test).T.tolist()
    assert ds["link_valid_neg"].tolist() == neg(val).T.tolist()
