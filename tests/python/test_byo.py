"""Bring your own graph: dsp.save_dataset from arrays (edge_index, CSR, scipy.sparse), and the
PyG / DGL adapters, against `dsp convert --from ogb` of the same Cora (tests/data/cora/raw)."""
import gzip
import pathlib
import sys

import numpy as np
import pytest

import dsp
from conftest import CORA_RAW

NPY_FILES = ("indptr.npy", "indices.npy", "features.npy", "labels.npy", "train_idx.npy",
             "valid_idx.npy", "test_idx.npy")


def _csv(name, dtype):
    with gzip.open(CORA_RAW / "raw" / name, "rt") as f:
        return np.loadtxt(f, delimiter=",", dtype=dtype, ndmin=1)


@pytest.fixture(scope="module")
def raw():
    """Cora's raw OGB arrays: edges [E, 2] (each undirected edge once), x, y, the split ids."""
    split = "split/public/"
    return {
        "edges": _csv("edge.csv.gz", np.int64).reshape(-1, 2),
        "num_nodes": int(_csv("num-node-list.csv.gz", np.int64)[0]),
        "x": _csv("node-feat.csv.gz", np.float32).reshape(2708, -1),
        "y": _csv("node-label.csv.gz", np.int64),
        "train_idx": _csv(split + "train.csv.gz", np.int64),
        "valid_idx": _csv(split + "valid.csv.gz", np.int64),
        "test_idx": _csv(split + "test.csv.gz", np.int64),
    }


def _node_data(raw):
    return {k: raw[k] for k in ("x", "y", "train_idx", "valid_idx", "test_idx")}


def _masks(raw):
    out = {}
    for key in ("train_idx", "valid_idx", "test_idx"):
        mask = np.zeros(raw["num_nodes"], dtype=bool)
        mask[raw[key]] = True
        out[key] = mask
    return out


def assert_same_dataset(saved, converted, directed=False):
    """The arrays of two dataset directories are the same bytes, and their metas agree but for
    the name, the provenance, and `saved` being marked ``directed`` as given."""
    for name in NPY_FILES:
        assert (saved / name).read_bytes() == (converted / name).read_bytes(), name
    a, b = dsp.load_dataset(str(saved))["meta"], dsp.load_dataset(str(converted))["meta"]
    for m in (a, b):
        del m["name"], m["extra"]
    b["directed"] = directed
    assert a == b


@pytest.fixture(scope="module")
def saved(raw, tmp_path_factory):
    """Cora written by dsp.save_dataset from its edge_index (one direction, undirected=True)."""
    out = tmp_path_factory.mktemp("byo") / "cora"
    meta = dsp.save_dataset(out, edge_index=raw["edges"].T, undirected=True, name="cora",
                            num_nodes=raw["num_nodes"], **_node_data(raw))
    assert meta["name"] == "cora" and meta["extra"]["importer"] == "dsp.save_dataset"
    return out


def test_edge_index_gives_the_converted_files(saved, cora):
    assert_same_dataset(saved, pathlib.Path(cora))
    meta = dsp.load_dataset(str(saved))["meta"]
    assert meta["num_edges"] == 2 * 5278 and not meta["directed"]


def test_torch_tensors_and_masks(raw, cora, tmp_path):
    torch = pytest.importorskip("torch")
    masks = {k: torch.from_numpy(v) for k, v in _masks(raw).items()}
    dsp.save_dataset(tmp_path / "t", edge_index=torch.from_numpy(raw["edges"].T.copy()),
                     undirected=True, x=torch.from_numpy(raw["x"]),
                     y=torch.from_numpy(raw["y"]).view(-1, 1), **masks)
    assert_same_dataset(tmp_path / "t", pathlib.Path(cora))


def test_masks_equal_index_splits(raw, saved, tmp_path):
    dsp.save_dataset(tmp_path / "m", edge_index=raw["edges"].T, undirected=True,
                     num_nodes=raw["num_nodes"], **{**_node_data(raw), **_masks(raw)})
    for name in ("train_idx.npy", "valid_idx.npy", "test_idx.npy"):
        assert (tmp_path / "m" / name).read_bytes() == (saved / name).read_bytes(), name


def test_csr_as_given_and_symmetrized(raw, cora, tmp_path):
    ds = dsp.load_dataset(cora)
    dsp.save_dataset(tmp_path / "c", csr=(ds["indptr"], ds["indices"]), **_node_data(raw))
    assert_same_dataset(tmp_path / "c", pathlib.Path(cora), directed=True)
    # One direction in dsp's layout (row v: the u of every edge u -> v), rebuilt with reverses.
    src, dst = raw["edges"][:, 0], raw["edges"][:, 1]
    order = np.lexsort((src, dst))
    indptr = np.zeros(raw["num_nodes"] + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=raw["num_nodes"]), out=indptr[1:])
    dsp.save_dataset(tmp_path / "s", csr=(indptr, src[order]), undirected=True,
                     **_node_data(raw))
    assert_same_dataset(tmp_path / "s", pathlib.Path(cora))


def test_scipy_matrix(raw, cora, tmp_path):
    sparse = pytest.importorskip("scipy.sparse")
    n = raw["num_nodes"]
    src, dst = raw["edges"][:, 0], raw["edges"][:, 1]
    adj = sparse.csr_matrix((np.ones(len(src)), (src, dst)), shape=(n, n))
    dsp.save_dataset(tmp_path / "a", adj=adj, undirected=True, **_node_data(raw))
    assert_same_dataset(tmp_path / "a", pathlib.Path(cora))
    # adj[u, v] is the edge u -> v: v's row lists u; its values are weights on request.
    w = sparse.coo_matrix(([2.5, 0.0, 4.0], ([0, 1, 2], [1, 2, 1])), shape=(3, 3))
    meta = dsp.save_dataset(tmp_path / "w", adj=w, edge_weight=True)
    ds = dsp.load_dataset(str(tmp_path / "w"))
    assert meta["has_weights"] and meta["directed"]
    assert ds["indptr"].tolist() == [0, 0, 2, 2] and ds["indices"].tolist() == [0, 2]
    assert ds["edge_weight"].tolist() == [2.5, 4.0]  # the stored zero is no edge


def test_edge_direction_and_weights(tmp_path):
    # PyG's convention: edge_index[:, i] = (source, target); dsp's row of v lists v's sources.
    meta = dsp.save_dataset(tmp_path / "d", edge_index=[[0, 2, 0], [1, 1, 1]],
                            edge_weight=[0.5, 2.0, 9.0], num_nodes=4)
    ds = dsp.load_dataset(str(tmp_path / "d"))
    assert ds["indptr"].tolist() == [0, 0, 2, 2, 2] and ds["indices"].tolist() == [0, 2]
    assert ds["edge_weight"].tolist() == [0.5, 2.0]  # the repeated edge keeps its first weight
    assert meta["num_nodes"] == 4 and meta["num_edges"] == 2 and meta["directed"]
    assert ds["features"] is None and ds["labels"] is None and ds["train_idx"] is None


def test_train_and_partition_the_saved_dataset(saved, tmp_path):
    r = dsp.train({"path": str(saved), "fanouts": [5, 5], "epochs": 1, "batch_size": 64,
                   "hidden": 16})
    assert r["epochs_run"] == 1 and 0.0 <= r["best_val_acc"] <= 1.0
    pm = dsp.partition(str(saved), str(tmp_path / "p2"), parts=2)
    assert pm["parts"] == 2
    blocks, x, y = next(iter(dsp.Loader(str(saved), fanouts=[4], batch_size=8, as_tensor=False)))
    assert x.shape[1] == 1433 and len(y) == 8


def _refusals(out):
    """(keywords, exception, exact message) of bad inputs, over Cora-sized arrays."""
    n = 2708
    ei = np.array([[0, 1, 5], [1, 2, 0]])
    x = np.ones((n, 4), dtype=np.float32)
    nan_x = x.copy()
    nan_x[7, 2] = np.nan
    return [
        (dict(edge_index=np.array([[0, 1], [1, n]]), num_nodes=n), dsp.InvalidArgument,
         f"dsp.save_dataset: edge_index: edge 1 (1 -> {n}) has a node id outside [0, {n})"),
        (dict(edge_index=ei, num_nodes=n, y=np.zeros(n - 1, dtype=np.int64)),
         dsp.InvalidArgument, f"{out}/labels.npy: expected int64[{n}], got int64[{n - 1}]"),
        (dict(edge_index=ei, num_nodes=n, x=x[:-1]), dsp.InvalidArgument,
         f"{out}/features.npy: wrong shape: expected [{n}, 4], got float32[{n - 1}, 4]"),
        (dict(edge_index=ei, num_nodes=n, x=nan_x), dsp.InvalidArgument,
         f"{out}/features.npy: feature 2 of node 7 is NaN; features must be finite"),
        (dict(edge_index=ei, num_nodes=n, train_idx=[3, n]), dsp.InvalidArgument,
         f"{out}/train_idx.npy: split id out of range: element 1 is {n}, not in [0, {n})"),
        (dict(edge_index=ei, num_nodes=n, test_idx=[3, 4, 3]), dsp.InvalidArgument,
         f"{out}/test_idx.npy: node 3 appears more than once (element 2)"),
        (dict(edge_index=ei, num_nodes=n, valid_idx=np.ones(n - 1, dtype=bool)),
         dsp.InvalidArgument, f"dsp.save_dataset: valid_idx is a boolean mask of shape "
                              f"({n - 1},) but the graph has {n} nodes"),
        (dict(edge_index=ei, csr=([0, 0], [])), dsp.InvalidArgument,
         "dsp.save_dataset: give exactly one graph input, edge_index, csr or adj; got "
         "edge_index and csr"),
        (dict(x=x), dsp.InvalidArgument,
         "dsp.save_dataset: give exactly one graph input, edge_index, csr or adj; got none"),
        (dict(edge_index=ei[0]), dsp.InvalidArgument,
         "dsp.save_dataset: edge_index must be a 2-d array, got shape (3,)"),
        (dict(edge_index=ei, y=np.zeros(6, dtype=np.float32)), dsp.InvalidArgument,
         "dsp.save_dataset: y must hold integers, got an array of float32"),
        (dict(edge_index=ei, edge_weight=[1.0]), dsp.InvalidArgument,
         "dsp.save_dataset: edge_weight has 1 values but edge_index has 3 edges"),
        (dict(edge_index=ei, edge_weight=[1.0, -1.0, 1.0]), dsp.InvalidArgument,
         f"{out}/edge_weight.npy: weight -1 of edge entry 2 (row 2) is negative; edge weights "
         "must be finite and >= 0"),
        (dict(csr=([0, 2, 1], [0, 1])), dsp.InvalidArgument,
         f"{out}/indptr.npy: indptr is not monotone at row 1 (2 > 1)"),
        (dict(csr=([0, 2, 1], [0, 1]), undirected=True), dsp.InvalidArgument,
         "dsp.save_dataset: csr indptr: indptr is not monotone at row 1 (2 > 1)"),
        (dict(csr=([0, 2, 2], [1, 0])), dsp.InvalidArgument,
         f"{out}/indices.npy: row 0 is not sorted: neighbour 0 (indices[1]) follows 1; each row "
         "must list its neighbours in ascending order"),
        (dict(csr=([0, 2, 2], [1, 7])), dsp.InvalidArgument,
         f"{out}/indices.npy: indices[1] = 7 is out of range [0, 2) (row 0)"),
        (dict(csr=([0, 2, 2], [0, 7]), undirected=True), dsp.InvalidArgument,
         "dsp.save_dataset: csr: edge 1 (7 -> 0) has a node id outside [0, 2)"),
        (dict(edge_index=ei, num_nodes=0), dsp.InvalidArgument,
         "dsp.save_dataset: edge_index: edge 0 (0 -> 1) has a node id outside [0, 0)"),
    ]


@pytest.mark.parametrize("case", range(len(_refusals("out"))))
def test_refusals_leave_nothing(tmp_path, case):
    out = tmp_path / "ds"
    kw, exc, message = _refusals(str(out))[case]
    with pytest.raises(exc) as e:
        dsp.save_dataset(out, **kw)
    assert str(e.value) == message
    assert list(tmp_path.iterdir()) == []  # no directory, no staging leftovers


def test_existing_output(tmp_path):
    out = tmp_path / "ds"
    dsp.save_dataset(out, edge_index=[[0], [1]])
    with pytest.raises(dsp.IoError) as e:
        dsp.save_dataset(out, edge_index=[[1], [0]])
    assert str(e.value) == f"{out}: already exists (pass overwrite=True to replace it)"
    with pytest.raises(dsp.InvalidArgument):  # a refused overwrite keeps the old dataset
        dsp.save_dataset(out, edge_index=[[1], [0]], y=[0], overwrite=True)
    assert dsp.load_dataset(str(out))["indices"].tolist() == [0]
    dsp.save_dataset(out, edge_index=[[1], [0]], overwrite=True)
    assert dsp.load_dataset(str(out))["indptr"].tolist() == [0, 1, 1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


@pytest.mark.parametrize("fn, module", [("from_pyg", "torch_geometric"), ("from_dgl", "dgl")])
def test_adapters_name_the_missing_package(tmp_path, monkeypatch, fn, module):
    monkeypatch.setitem(sys.modules, module, None)  # importing it raises ImportError
    with pytest.raises(ImportError, match=f"^dsp.{fn} needs {module}, which cannot be imported"):
        getattr(dsp, fn)(object(), tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_from_pyg(raw, cora, tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch_geometric")
    from torch_geometric.data import Data
    e = torch.from_numpy(raw["edges"].T.copy())
    masks = {k: torch.from_numpy(v) for k, v in _masks(raw).items()}
    data = Data(edge_index=torch.cat([e, e.flip(0)], 1), x=torch.from_numpy(raw["x"]),
                y=torch.from_numpy(raw["y"]), train_mask=masks["train_idx"],
                val_mask=masks["valid_idx"], test_mask=masks["test_idx"])
    meta = dsp.from_pyg(data, tmp_path / "pyg", name="cora")
    assert meta["extra"]["importer"] == "dsp.from_pyg" and meta["name"] == "cora"
    assert_same_dataset(tmp_path / "pyg", pathlib.Path(cora), directed=True)
    # A 1-d edge_attr becomes the edge weights; keywords override the Data.
    data.edge_attr = torch.ones(data.num_edges)
    meta = dsp.from_pyg(data, tmp_path / "w", test_idx=None)
    assert meta["has_weights"] and meta["num_test"] == 0
    # Several splits ([N, k] masks): one is picked by keyword.
    data.train_mask = torch.stack([masks["train_idx"], masks["valid_idx"]], 1)
    with pytest.raises(dsp.InvalidArgument) as e:
        dsp.from_pyg(data, tmp_path / "k")
    assert str(e.value) == ("dsp.from_pyg: train_mask has shape (2708, 2), several splits: pass "
                            "one as train_idx= (e.g. its first column)")
    assert not (tmp_path / "k").exists()
    meta = dsp.from_pyg(data, tmp_path / "k", train_idx=data.train_mask[:, 1])
    assert meta["num_train"] == 500


def test_from_dgl(raw, cora, tmp_path):
    torch = pytest.importorskip("torch")
    dgl = pytest.importorskip("dgl")
    src, dst = (torch.from_numpy(raw["edges"][:, i].copy()) for i in (0, 1))
    g = dgl.graph((src, dst), num_nodes=raw["num_nodes"])
    g.ndata["feat"] = torch.from_numpy(raw["x"])
    g.ndata["label"] = torch.from_numpy(raw["y"])
    for key, mask in zip(("train_mask", "val_mask", "test_mask"), _masks(raw).values()):
        g.ndata[key] = torch.from_numpy(mask)
    meta = dsp.from_dgl(g, tmp_path / "dgl", undirected=True)
    assert meta["extra"]["importer"] == "dsp.from_dgl"
    assert_same_dataset(tmp_path / "dgl", pathlib.Path(cora))
