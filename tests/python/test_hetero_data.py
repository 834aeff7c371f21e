"""Your own typed graph: dsp.save_hetero_dataset from dicts of arrays, dsp.load_hetero_dataset,
and dsp.from_pyg (HeteroData) / dsp.from_dgl (heterograph), against `dsp convert --from
ogb-hetero` of the same graph written in OGB's raw heterogeneous layout."""
import gzip
import json
import subprocess

import numpy as np
import pytest

import dsp

# dsp.load_hetero_dataset's keys that are dsp.save_hetero_dataset's keywords.
LOAD_KEYS = ("num_nodes", "edge_index", "x", "y", "train_idx", "valid_idx", "test_idx",
             "target_type", "name")
COUNTS = {"paper": 60, "author": 40, "institution": 5, "field_of_study": 8}  # not in name order


def _gz(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.write("".join(",".join(str(v) for v in row) + "\n" for row in rows))


@pytest.fixture(scope="module")
def graph():
    """A small OGB-MAG-shaped graph as arrays: edges per relation (unsorted, some repeated,
    paper self-citations), paper features of exactly representable values, labels, split ids in
    no particular order."""
    rng = np.random.default_rng(63)

    def edges(src, dst, m):
        e = np.stack([rng.integers(0, COUNTS[src], m), rng.integers(0, COUNTS[dst], m)])
        return np.concatenate([e, e[:, :5]], axis=1)  # five repeated edges

    perm = rng.permutation(COUNTS["paper"])
    return {
        "edge_index": {
            ("paper", "cites", "paper"): edges("paper", "paper", 150),
            ("author", "writes", "paper"): edges("author", "paper", 120),
            ("paper", "has_topic", "field_of_study"): edges("paper", "field_of_study", 90),
            ("author", "affiliated_with", "institution"): edges("author", "institution", 40),
        },
        "x": {"paper": (rng.integers(-8, 8, (COUNTS["paper"], 6)) / 4).astype(np.float32)},
        "y": rng.integers(0, 3, COUNTS["paper"]),
        "train_idx": perm[:30], "valid_idx": perm[30:40], "test_idx": perm[40:],
    }


def _write_raw(root, g):
    """`g` in OGB's raw heterogeneous layout (ogbn-mag's): root/raw/..., root/split/time/."""
    raw = root / "raw"
    _gz(raw / "num-node-dict.csv.gz", [list(COUNTS), list(COUNTS.values())])
    for (s, r, d), e in g["edge_index"].items():
        _gz(raw / "relations" / f"{s}___{r}___{d}" / "edge.csv.gz", e.T.tolist())
        _gz(raw / "relations" / f"{s}___{r}___{d}" / "num-edge-list.csv.gz", [[e.shape[1]]])
    _gz(raw / "node-feat" / "paper" / "node-feat.csv.gz",
        [[repr(float(v)) for v in row] for row in g["x"]["paper"]])
    _gz(raw / "node-label" / "paper" / "node-label.csv.gz", [[v] for v in g["y"]])
    for part in ("train", "valid", "test"):
        _gz(root / "split" / "time" / "paper" / f"{part}.csv.gz",
            [[v] for v in g[part + "_idx"]])


def _files(d):
    return {p.relative_to(d).as_posix(): p for p in sorted(d.rglob("*")) if p.is_file()}


def _meta(d):
    with open(d / "dataset.json") as f:
        return json.load(f)


def assert_same_dataset(a, b):
    """The same files, the same bytes for every array, and the same dataset.json but for the
    provenance ("extra")."""
    fa, fb = _files(a), _files(b)
    assert sorted(fa) == sorted(fb)
    for name in fa:
        if name != "dataset.json":
            assert fa[name].read_bytes() == fb[name].read_bytes(), name
    ma, mb = _meta(a), _meta(b)
    del ma["extra"], mb["extra"]
    assert ma == mb


def _masks(g):
    out = {}
    for key in ("train_idx", "valid_idx", "test_idx"):
        m = np.zeros(COUNTS["paper"], dtype=bool)
        m[g[key]] = True
        out[key] = m
    return out


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "add_reverse"])
def converted(request, graph, tmp_path_factory):
    """(add_reverse, `dsp convert --from ogb-hetero [--add-reverse]` of the raw layout)."""
    tmp = tmp_path_factory.mktemp("ogb")
    root = tmp / "ogbn_tiny"
    _write_raw(root, graph)
    out = tmp / "converted"
    cmd = [dsp.cli_path(), "convert", "--from", "ogb-hetero", str(root), str(out)]
    if request.param:
        cmd.insert(4, "--add-reverse")
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return request.param, out


def _save(out, g, **kw):
    # The dicts in another order than the raw layout's: the files do not depend on it.
    args = {"num_nodes": dict(reversed(COUNTS.items())),
            "edge_index": dict(reversed(list(g["edge_index"].items()))),
            "x": g["x"], "y": {"paper": g["y"]},
            **{k: g[k] for k in ("train_idx", "valid_idx", "test_idx")}}
    args.update(kw)
    return dsp.save_hetero_dataset(out, **args)


def test_the_same_bytes_as_convert(graph, converted, tmp_path):
    add_reverse, conv = converted
    meta = _save(tmp_path / "saved", graph, name="ogbn_tiny", add_reverse=add_reverse)
    assert_same_dataset(tmp_path / "saved", conv)
    assert meta == _meta(tmp_path / "saved")
    extra, conv_extra = meta["extra"], _meta(conv)["extra"]
    assert extra["importer"] == "dsp.save_hetero_dataset"
    assert extra["add_reverse"] == add_reverse
    assert extra["input_edges"] == conv_extra["input_edges"]
    h = meta["hetero"]
    assert [t["name"] for t in h["node_types"]] == sorted(COUNTS)
    assert h["target_type"] == "paper" and h["num_classes"] == 3
    assert len(h["relations"]) == (8 if add_reverse else 4)
    cites = next(r for r in h["relations"] if r["name"] == "cites")
    assert cites["edges"] == len({tuple(e) for e in graph["edge_index"][
        ("paper", "cites", "paper")].T})  # repeats merged


def test_edge_forms_tensors_and_masks(graph, tmp_path):
    torch = pytest.importorskip("torch")
    base = tmp_path / "base"
    _save(base, graph, **_masks(graph))
    # (src, dst) tuples, "src___rel___dst" keys, torch tensors, [N, 1] labels of the type named
    # by target_type=, boolean masks.
    edges = {"___".join(k): (torch.from_numpy(e[0]), torch.from_numpy(e[1]))
             for k, e in graph["edge_index"].items()}
    masks = {k: torch.from_numpy(v) for k, v in _masks(graph).items()}
    dsp.save_hetero_dataset(tmp_path / "t", num_nodes=COUNTS, edge_index=edges,
                            x={"paper": torch.from_numpy(graph["x"]["paper"])},
                            y=torch.from_numpy(graph["y"]).view(-1, 1), target_type="paper",
                            **masks)
    assert_same_dataset(tmp_path / "t", base)


def test_load_and_save_again(graph, tmp_path):
    _save(tmp_path / "a", graph, add_reverse=True)
    d = dsp.load_hetero_dataset(tmp_path / "a")
    assert d["num_nodes"] == COUNTS and d["target_type"] == "paper" and d["name"] == "dataset"
    assert np.array_equal(d["x"]["paper"], graph["x"]["paper"])
    assert np.array_equal(d["y"], graph["y"])
    assert np.array_equal(d["train_idx"], graph["train_idx"])
    assert ("paper", "rev_writes", "author") in d["edge_index"]
    indptr, indices = d["csr"][("author", "writes", "paper")]
    assert len(indptr) == COUNTS["paper"] + 1 and not indices.flags.writeable
    dsp.save_hetero_dataset(tmp_path / "b", **{k: d[k] for k in LOAD_KEYS})
    assert_same_dataset(tmp_path / "b", tmp_path / "a")
    with pytest.raises(dsp.FormatError, match="not a heterogeneous dataset"):
        dsp.load_hetero_dataset(_homogeneous(tmp_path))
    with pytest.raises(dsp.FormatError, match="is a heterogeneous dataset"):
        dsp.load_dataset(str(tmp_path / "a"))


def test_a_generated_dataset_loads_and_saves_again(tmp_path):
    dsp.generate_hetero(str(tmp_path / "gen"), papers=300, authors=150, institutions=10,
                        fields=20, classes=4, feature_dim=8, seed=3)
    d = dsp.load_hetero_dataset(tmp_path / "gen")
    dsp.save_hetero_dataset(tmp_path / "again", **{k: d[k] for k in LOAD_KEYS})
    # The same files, byte for byte; the generator lists its relations in its own order.
    fa, fb = _files(tmp_path / "again"), _files(tmp_path / "gen")
    assert sorted(fa) == sorted(fb)
    for name in fa:
        if name != "dataset.json":
            assert fa[name].read_bytes() == fb[name].read_bytes(), name
    ha, hb = _meta(tmp_path / "again")["hetero"], _meta(tmp_path / "gen")["hetero"]
    assert sorted(map(str, ha.pop("relations"))) == sorted(map(str, hb.pop("relations")))
    assert ha == hb


def _homogeneous(tmp_path):
    out = tmp_path / "homo"
    dsp.save_dataset(out, edge_index=[[0], [1]])
    return out


def test_features_per_type(tmp_path):
    meta = dsp.save_hetero_dataset(
        tmp_path / "f", edge_index={("a", "r", "b"): [[0, 1], [2, 0]]},
        x={"a": np.ones((2, 3), dtype=np.float16), "b": np.zeros((3, 2), dtype=np.float64)})
    types = {t["name"]: t for t in meta["hetero"]["node_types"]}
    assert (types["a"]["count"], types["a"]["feature_dim"], types["a"]["feature_dtype"]) == \
        (2, 3, "float16")
    assert (types["b"]["count"], types["b"]["feature_dim"], types["b"]["feature_dtype"]) == \
        (3, 2, "float32")
    assert meta["hetero"]["target_type"] == "" and meta["num_train"] == 0


def _refusals(out):
    """(keywords, exception, exact message) of bad inputs."""
    w = ("author", "writes", "paper")
    n = {"author": 3, "paper": 4}
    e = {w: [[0, 1, 2], [0, 3, 1]]}
    x = np.ones((4, 2), dtype=np.float32)
    nan_x = x.copy()
    nan_x[2, 1] = np.nan
    p = "dsp.save_hetero_dataset: "
    return [
        (dict(num_nodes=n, edge_index={("author", "writes", "book"): [[0], [0]]}),
         dsp.InvalidArgument, p + "edge_index[('author', 'writes', 'book')] names node type "
         "'book', which num_nodes does not list (author, paper)"),
        (dict(num_nodes=n, edge_index={w: [[0, 3], [0, 0]]}), dsp.InvalidArgument,
         p + "edge_index[('author', 'writes', 'paper')]: edge 1 (3 -> 0): source id 3 is "
         "outside author's 3 ids"),
        (dict(num_nodes=n, edge_index={w: ([0, 1], [0, -1])}), dsp.InvalidArgument,
         p + "edge_index[('author', 'writes', 'paper')]: edge 1 (1 -> -1): destination id -1 "
         "is outside paper's 4 ids"),
        (dict(num_nodes=n, edge_index=e, x={"paper": x[:3]}), dsp.InvalidArgument,
         p + "x['paper'] has 3 rows but node type paper has 4 nodes"),
        (dict(num_nodes=n, edge_index=e, x={"book": x}), dsp.InvalidArgument,
         p + "x['book']: node type 'book' is not listed in num_nodes (author, paper)"),
        (dict(num_nodes=n, edge_index=e, x={"paper": x[0]}), dsp.InvalidArgument,
         p + "x['paper'] must be a 2-d array [num_nodes, num_features], got shape (2,)"),
        (dict(num_nodes=n, edge_index=e, x={"paper": nan_x}), dsp.InvalidArgument,
         f"{out}/nodes/paper/features.npy: feature 1 of node 2 is NaN; features must be finite"),
        (dict(num_nodes=n, edge_index=e, y={"author": [0, 1, 0]}, target_type="paper"),
         dsp.InvalidArgument, p + "y is given for node type 'author' but the target type is "
         "'paper'; labels and splits are on the target type only"),
        (dict(num_nodes=n, edge_index=e, y={"paper": [0, 1, 0, 1]}, train_idx={"author": [0]}),
         dsp.InvalidArgument, p + "train_idx is given for node type 'author' but the target "
         "type is 'paper'; labels and splits are on the target type only"),
        (dict(num_nodes=n, edge_index=e, y={"paper": [0, 1, 0, 1], "author": [0, 0, 0]}),
         dsp.InvalidArgument, p + "y is given for 2 node types (author, paper); labels and "
         "splits are on the one target type"),
        (dict(num_nodes=n, edge_index=e, y=[0, 1, 0, 1]), dsp.InvalidArgument,
         p + "y is an array: name its node type with target_type= (or pass y={type: ...})"),
        (dict(num_nodes=n, edge_index=e, y=[0, 1, 0], target_type="paper"), dsp.InvalidArgument,
         p + "y has 3 labels but the target type paper has 4 nodes"),
        (dict(num_nodes=n, edge_index=e, y=[0, 1, 0], target_type="book"), dsp.InvalidArgument,
         p + "target_type 'book' is not one of the node types (author, paper)"),
        (dict(num_nodes=n, edge_index=e, y={"paper": [0, 1, -2, 1]}), dsp.InvalidArgument,
         f"{out}/labels.npy: label of node 2 is -2, not in [-1, 2)"),
        (dict(num_nodes=n, edge_index=e, target_type="paper", train_idx=[True, False, True]),
         dsp.InvalidArgument, p + "train_idx is a boolean mask of shape (3,) but the target "
         "type paper has 4 nodes"),
        (dict(num_nodes=n, edge_index=e, train_idx={"paper": [1, 4]}), dsp.InvalidArgument,
         f"{out}/train_idx.npy: element 1 is 4, outside paper's 4 ids"),
        (dict(num_nodes=n, edge_index=e, test_idx={"paper": [3, 0, 3]}), dsp.InvalidArgument,
         f"{out}/test_idx.npy: paper 3 appears more than once (element 2)"),
        (dict(num_nodes=n, edge_index={"writes": [[0], [0]]}), dsp.InvalidArgument,
         p + "edge_index key 'writes' must be a tuple (src_type, relation, dst_type) or a string "
         "'src_type___relation___dst_type'"),
        (dict(num_nodes=n, edge_index={w: [[0], [0], [0]]}), dsp.InvalidArgument,
         p + "edge_index[('author', 'writes', 'paper')] must have shape [2, E] (row 0 sources, "
         "row 1 targets) or be a tuple (src, dst), got shape (3, 1)"),
        (dict(num_nodes=n, edge_index={w: ([0, 1], [0])}), dsp.InvalidArgument,
         p + "edge_index[('author', 'writes', 'paper')] is a tuple (src, dst) of 2 sources and "
         "1 targets"),
        (dict(num_nodes=n, edge_index={w: [[0.5], [0]]}), dsp.InvalidArgument,
         p + "edge_index[('author', 'writes', 'paper')] must hold integers, got an array of "
         "float64"),
        (dict(num_nodes={"author": 3, "paper": -1}, edge_index={}), dsp.InvalidArgument,
         p + "num_nodes['paper'] must be a count >= 0, got -1"),
        (dict(num_nodes={"a/b": 1}, edge_index={}), dsp.InvalidArgument,
         p + "node type name 'a/b' must be non-empty, without '___' or '/'"),
        (dict(num_nodes=n, edge_index=[[0], [0]]), dsp.InvalidArgument,
         p + "edge_index must be a dict {(src_type, relation, dst_type): [2, E] edges}, got "
         "list"),
    ]


@pytest.mark.parametrize("case", range(len(_refusals("out"))))
def test_refusals_leave_nothing(tmp_path, case):
    out = tmp_path / "ds"
    kw, exc, message = _refusals(str(out))[case]
    with pytest.raises(exc) as e:
        dsp.save_hetero_dataset(out, **kw)
    assert str(e.value) == message
    assert list(tmp_path.iterdir()) == []  # no directory, no staging leftovers


def test_existing_output(tmp_path):
    out = tmp_path / "ds"
    e = {("a", "r", "a"): [[0], [1]]}
    dsp.save_hetero_dataset(out, edge_index=e)
    with pytest.raises(dsp.IoError) as err:
        dsp.save_hetero_dataset(out, edge_index=e)
    assert str(err.value) == f"{out}: already exists (pass overwrite=True to replace it)"
    meta = dsp.save_hetero_dataset(out, edge_index=e, num_nodes={"a": 5}, overwrite=True)
    assert meta["hetero"]["node_types"][0]["count"] == 5


def _pyg(g, torch):
    from torch_geometric.data import HeteroData
    data = HeteroData()
    for t, n in COUNTS.items():
        data[t].num_nodes = n
    data["paper"].x = torch.from_numpy(g["x"]["paper"])
    data["paper"].y = torch.from_numpy(g["y"])
    data["paper"].train_mask, data["paper"].val_mask, data["paper"].test_mask = (
        torch.from_numpy(m) for m in _masks(g).values())
    for et, e in g["edge_index"].items():
        data[et].edge_index = torch.from_numpy(e)
    return data


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_from_pyg_hetero(graph, tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch_geometric")
    _save(tmp_path / "direct", graph, add_reverse=True, **_masks(graph))
    data = _pyg(graph, torch)
    meta = dsp.from_pyg(data, tmp_path / "pyg", add_reverse=True)
    assert meta["extra"]["importer"] == "dsp.from_pyg"
    assert_same_dataset(tmp_path / "pyg", tmp_path / "direct")
    # T.ToSparseTensor's adj_t (row v, a target, lists its sources) instead of edge_index.
    import torch_geometric.transforms as T
    sparse = T.ToSparseTensor()(_pyg(graph, torch))
    assert all("edge_index" not in sparse[et] for et in sparse.edge_types)
    dsp.from_pyg(sparse, tmp_path / "adj_t", add_reverse=True)
    assert_same_dataset(tmp_path / "adj_t", tmp_path / "direct")
    # Labels on two types: the target is named by keyword.
    data["author"].y = torch.zeros(COUNTS["author"], dtype=torch.long)
    with pytest.raises(dsp.InvalidArgument) as e:
        dsp.from_pyg(data, tmp_path / "two")
    assert str(e.value) == ("dsp.from_pyg: labels or splits on 2 node types (author: y; paper: "
                            "y, train_mask, val_mask, test_mask); a dataset has one target type: "
                            "pass target_type=")
    meta = dsp.from_pyg(data, tmp_path / "two", target_type="paper")
    assert meta["hetero"]["target_type"] == "paper" and meta["num_train"] == 30
    # An edge type whose node type the HeteroData does not list.
    from torch_geometric.data import HeteroData
    bare = HeteroData()
    bare["paper"].num_nodes = 4
    bare["author", "writes", "paper"].edge_index = torch.tensor([[0], [1]])
    with pytest.raises(dsp.InvalidArgument) as e:
        dsp.from_pyg(bare, tmp_path / "bare")
    assert str(e.value) == ("dsp.from_pyg: edge type ('author', 'writes', 'paper') names node "
                            "type 'author', which is not one of the HeteroData's node types "
                            "(paper): set data['author'].num_nodes")
    assert not (tmp_path / "bare").exists()


def test_from_dgl_heterograph(graph, tmp_path):
    torch = pytest.importorskip("torch")
    dgl = pytest.importorskip("dgl")
    _save(tmp_path / "direct", graph, **_masks(graph))
    g = dgl.heterograph({et: (torch.from_numpy(e[0]), torch.from_numpy(e[1]))
                         for et, e in graph["edge_index"].items()}, num_nodes_dict=COUNTS)
    g.nodes["paper"].data["feat"] = torch.from_numpy(graph["x"]["paper"])
    g.nodes["paper"].data["label"] = torch.from_numpy(graph["y"])
    for key, mask in zip(("train_mask", "val_mask", "test_mask"), _masks(graph).values()):
        g.nodes["paper"].data[key] = torch.from_numpy(mask)
    meta = dsp.from_dgl(g, tmp_path / "dgl")
    assert meta["extra"]["importer"] == "dsp.from_dgl"
    assert_same_dataset(tmp_path / "dgl", tmp_path / "direct")


def test_train_rgcn_on_the_written_dataset(graph, tmp_path):
    _save(tmp_path / "ds", graph, add_reverse=True)
    r = dsp.train({"path": str(tmp_path / "ds"), "model": "rgcn", "fanouts": [5, 5],
                   "epochs": 2, "batch_size": 16, "hidden": 16})
    assert r["epochs_run"] == 2 and 0.0 <= r["best_val_acc"] <= 1.0
