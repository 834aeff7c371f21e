"""Dataset tools: convert, generate, load (zero-copy views), partition."""
import shutil
import subprocess

import numpy as np
import pytest

import dsp
from conftest import CORA_RAW


def test_load_dataset_views(cora):
    ds = dsp.load_dataset(cora)
    meta = ds["meta"]
    assert meta["num_nodes"] == 2708 and meta["num_classes"] == 7
    assert ds["features"].shape == (2708, 1433) and ds["features"].dtype == np.float32
    assert ds["indptr"].shape == (2709,) and ds["indptr"][-1] == len(ds["indices"])
    assert len(ds["train_idx"]) == 140 and ds["edge_weight"] is None
    # The arrays view the memory-mapped files: read-only, and equal to what numpy reads.
    assert not ds["features"].flags.writeable
    np.testing.assert_array_equal(ds["labels"], np.load(f"{cora}/labels.npy"))


def test_generate_partition_load(tmp_path):
    out = str(tmp_path / "sbm")
    meta = dsp.generate_community(out, nodes=2000, edges=10000, communities=8, features=16,
                                  classes=4, seed=1)
    assert meta["num_nodes"] == 2000 and meta["feature_dim"] == 16
    pm = dsp.partition(out, str(tmp_path / "sbm-p2"), parts=2, method="random",
                       cache_policy="random", cache_ratio=0.2)
    assert pm["parts"] == 2 and pm["method"] == "random"
    assert dsp.load_partition_meta(str(tmp_path / "sbm-p2"))["partition_id"] == pm["partition_id"]
    rm = dsp.generate_rmat(str(tmp_path / "rmat"), nodes=1000, edges=5000, features=8,
                           classes=3, feature_dtype="float16")
    assert rm["feature_dtype"] == "float16"
    # float16 features are widened to float32 by the loader.
    blocks, x, y = next(iter(dsp.Loader(str(tmp_path / "rmat"), fanouts=[4], batch_size=10)))
    feats = np.load(str(tmp_path / "rmat" / "features.npy"))
    assert x.dtype.is_floating_point and x.shape[1] == 8 and feats.dtype == np.float16
    with pytest.raises(dsp.InvalidArgument):
        dsp.generate_rmat(str(tmp_path / "bad"), nodes=0)


def _files(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


@pytest.mark.parametrize("kind", ["rmat", "community"])
def test_generate_out_of_core_identical(tmp_path, kind):
    # The generators take dsp generate's budget rules: out of core (external sort on disk), the
    # dataset is the same, byte for byte, as the in-memory one.
    gen = dsp.generate_rmat if kind == "rmat" else dsp.generate_community
    args = dict(nodes=3000, edges=20000, features=8, classes=4, feature_dtype="float16", seed=7)
    gen(str(tmp_path / "mem"), **args)
    gen(str(tmp_path / "ooc"), out_of_core=True, sort_buffer="64k", **args)
    mem, ooc = _files(tmp_path / "mem"), _files(tmp_path / "ooc")
    assert mem.keys() == ooc.keys() and "indices.npy" in mem
    for name in mem:
        assert mem[name] == ooc[name], name
    with pytest.raises(dsp.Error, match=r"needs about [0-9.]+ [KMG]iB of memory but the budget "
                                        r"is 1\.0 MiB"):
        gen(str(tmp_path / "small"), memory_budget="1M", **args)
    assert not (tmp_path / "small").exists()
    with pytest.raises(dsp.Error, match="--memory-budget: expected a size such as 512M"):
        gen(str(tmp_path / "bad"), memory_budget="12X", **args)


def test_convert_edge_list(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("# a triangle\n0 1\n1 2\n2 0\n")
    meta = dsp.convert_edge_list(str(path), str(tmp_path / "tri"), undirected=True, name="tri")
    assert meta["num_nodes"] == 3 and meta["num_edges"] == 6 and meta["name"] == "tri"
    with pytest.raises(dsp.IoError):
        dsp.convert_edge_list(str(tmp_path / "missing.txt"), str(tmp_path / "x"))
    with pytest.raises(dsp.Error):  # exists: needs overwrite=True
        dsp.convert_ogb(str(CORA_RAW), str(tmp_path / "tri"))


def test_convert_ogb_without_split(tmp_path):
    raw = tmp_path / "raw"
    shutil.copytree(str(CORA_RAW), str(raw), ignore=shutil.ignore_patterns("split"))
    with pytest.raises(dsp.IoError, match="no split folder.*--no-split"):
        dsp.convert_ogb(str(raw), str(tmp_path / "a"))
    meta = dsp.convert_ogb(str(raw), str(tmp_path / "b"), no_split=True)
    assert meta["num_nodes"] == 2708
    assert not (tmp_path / "b" / "train_idx.npy").exists()
    with pytest.raises(dsp.InvalidArgument, match="not both"):
        dsp.convert_ogb(str(CORA_RAW), str(tmp_path / "c"), split="x", no_split=True)



def _commands(tmp_path, cora):
    """Each command of the package that writes a directory, as f(out, **kw)."""
    edges = tmp_path / "edges.txt"
    edges.write_text("0 1\n1 2\n")
    return {
        "convert_ogb": lambda out, **kw: dsp.convert_ogb(str(CORA_RAW), out, **kw),
        "convert_edge_list": lambda out, **kw: dsp.convert_edge_list(str(edges), out, **kw),
        "generate_community": lambda out, **kw: dsp.generate_community(
            out, nodes=200, edges=1000, features=4, classes=2, **kw),
        "generate_rmat": lambda out, **kw: dsp.generate_rmat(out, nodes=256, edges=1000, **kw),
        "generate_hetero": lambda out, **kw: dsp.generate_hetero(
            out, papers=200, authors=100, institutions=10, fields=10, **kw),
        "partition": lambda out, **kw: dsp.partition(cora, out, parts=1, **kw),
        "save_dataset": lambda out, **kw: dsp.save_dataset(out, edge_index=[[0], [1]], **kw),
    }


@pytest.mark.parametrize("command", ["convert_ogb", "convert_edge_list", "generate_community",
                                     "generate_rmat", "generate_hetero", "partition",
                                     "save_dataset"])
def test_an_existing_output_names_the_keyword(cora, tmp_path, command):
    # The CLI's own C++ refuses an existing OUT naming its flag, --overwrite; from Python the
    # message names the keyword the call takes, overwrite=True (the same class, IoError), which
    # then replaces it.
    call = _commands(tmp_path, cora)[command]
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("kept")
    with pytest.raises(dsp.IoError) as e:
        call(str(out))
    assert str(e.value) == f"{out}: already exists (pass overwrite=True to replace it)"
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]
    call(str(out), overwrite=True)
    assert not (out / "mine.txt").exists()


def test_the_cli_still_names_its_flag(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    r = subprocess.run([dsp.cli_path(), "convert", "--from", "ogb", str(CORA_RAW), str(out)],
                       capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stderr) == (
        1, f"dsp: error: {out}: already exists (pass --overwrite to replace it)\n")


def test_preaggregate_kinds_as_a_list_or_the_flags_text(cora, tmp_path):
    # The CLI's "mean,gcn" and a Python list name the same kinds; an unknown one is refused by
    # the kinds' table with the CLI's message.
    for kinds in ("gcn", ["gcn"], "mean,gcn", ["mean", "gcn"]):
        out = tmp_path / f"p-{len(str(kinds))}-{isinstance(kinds, str)}"
        meta = dsp.partition(cora, str(out), parts=1, preaggregate=True, preaggregate_kinds=kinds)
        want = kinds.split(",") if isinstance(kinds, str) else kinds
        assert meta["preaggregated"] == want, kinds
    with pytest.raises(dsp.InvalidArgument, match="^unknown pre-aggregation kind 'max'"):
        dsp.partition(cora, str(tmp_path / "bad"), parts=1, preaggregate=True,
                      preaggregate_kinds="max")
