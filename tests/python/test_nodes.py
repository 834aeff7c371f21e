"""dsp.Loader(nodes=...), split="all", the refusal of an empty split, and the id maps
dsp.to_original_ids / dsp.to_dsp_ids between a partition's ids and the dataset's own.

Run as a script under mpirun (test_two_ranks), it is one rank of the 2-rank case."""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import dsp

FANOUTS = [5, 5]
HERE = pathlib.Path(__file__).resolve()


def seeds_of(loader, epoch=None):
    """The seeds of one epoch, concatenated (numpy, partition ids)."""
    return np.concatenate([np.asarray(b.seeds) for b in loader.iter_batches(epoch)])


def some_nodes(n, k=300, seed=0):
    """k distinct node ids of [0, n) in no particular order (training seeds or not)."""
    return np.random.default_rng(seed).choice(n, size=k, replace=False)


@pytest.fixture(scope="session")
def cora_no_splits(cora, tmp_path_factory):
    """Cora without train_idx.npy and valid_idx.npy (test_idx.npy kept)."""
    out = tmp_path_factory.mktemp("data") / "cora-no-splits"
    shutil.copytree(cora, out)
    for name in ("train_idx.npy", "valid_idx.npy"):
        (out / name).unlink()
    meta = json.loads((out / "dataset.json").read_text())
    meta.update(num_train=0, num_valid=0)
    (out / "dataset.json").write_text(json.dumps(meta))
    return str(out)


# -- Loader(nodes=...) ---------------------------------------------------------------------------


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("prefetch", [0, 2])
def test_nodes_are_the_seeds_once_per_epoch(cora_p1, shuffle, prefetch):
    ids = some_nodes(2708)
    loader = dsp.Loader(cora_p1, fanouts=FANOUTS, batch_size=64, nodes=ids, shuffle=shuffle,
                        seed=3, prefetch=prefetch)
    assert len(loader) == 5  # ceil(300 / 64)
    for _ in range(2):  # epochs 0 and 1
        got = dsp.to_original_ids(cora_p1, seeds_of(loader))
        assert len(got) == len(ids) and set(got.tolist()) == set(ids.tolist())
    np.testing.assert_array_equal(dsp.to_original_ids(cora_p1, loader.local_seeds.numpy()),
                                  np.sort(ids))


def test_nodes_from_a_dataset_directory(cora):
    # Partitioned on the fly: the loader maps with its own partition's renumbering.
    ids = some_nodes(2708, 100, seed=1)
    loader = dsp.Loader(cora, fanouts=FANOUTS, batch_size=32, nodes=ids.tolist(), seed=0)
    got = loader.to_original_ids(seeds_of(loader))
    assert sorted(got.tolist()) == sorted(ids.tolist())
    np.testing.assert_array_equal(loader.to_dsp_ids(got), seeds_of(loader, 0))


def test_nodes_of_a_split_give_that_splits_batches(cora, cora_p1):
    # nodes= keeps shuffle, batch_size and seed as the splits do: the test ids given as nodes
    # make the batches of split="test".
    test_ids = np.load(f"{cora}/test_idx.npy")  # the dataset's own ids
    for shuffle in (True, False):
        a = dsp.Loader(cora_p1, fanouts=FANOUTS, batch_size=128, split="test", shuffle=shuffle,
                       seed=9)
        b = dsp.Loader(cora_p1, fanouts=FANOUTS, batch_size=128, nodes=test_ids,
                       shuffle=shuffle, seed=9)
        assert len(a) == len(b) == 8
        for x, y in zip(a.iter_batches(), b.iter_batches()):
            np.testing.assert_array_equal(x.seeds.numpy(), y.seeds.numpy())
            np.testing.assert_array_equal(x.x.numpy(), y.x.numpy())
            np.testing.assert_array_equal(x.blocks[0].src_ids.numpy(), y.blocks[0].src_ids.numpy())


def test_nodes_take_any_int_array_like(cora_p1):
    import torch

    ids = [7, 3, 2000]
    for given in (ids, tuple(ids), np.array(ids, dtype=np.int32), np.array(ids, dtype=np.uint16),
                  torch.tensor(ids)):
        loader = dsp.Loader(cora_p1, fanouts=FANOUTS, nodes=given, shuffle=False)
        assert dsp.to_original_ids(cora_p1, seeds_of(loader)).tolist() == sorted(ids)


def test_split_all_covers_every_node_once(cora_p1):
    for shuffle in (True, False):
        loader = dsp.Loader(cora_p1, fanouts=FANOUTS, batch_size=500, split="all",
                            shuffle=shuffle, seed=2)
        got = seeds_of(loader)
        assert len(loader) == 6 and len(got) == 2708
        np.testing.assert_array_equal(np.sort(got), np.arange(2708))


# -- errors --------------------------------------------------------------------------------------


def test_bad_nodes_are_refused_naming_the_first(cora_p1):
    def refused(nodes, message, **kw):
        with pytest.raises(dsp.InvalidArgument, match="^" + re.escape(message) + "$"):
            dsp.Loader(cora_p1, fanouts=FANOUTS, nodes=nodes, **kw)

    refused([1, 2708, -1], f"{cora_p1}: nodes entry 1 is node 2708, outside the graph's [0, 2708)")
    refused([4, -3], f"{cora_p1}: nodes entry 1 is node -3, outside the graph's [0, 2708)")
    refused([5, 6, 7, 6, 5],
            f"{cora_p1}: nodes entry 3 is node 6 again (entry 1): each node may be given once")
    refused([], f"{cora_p1}: nodes is empty: there is nothing to load")
    refused([1.0, 2.0], f"{cora_p1}: nodes: node ids must be integers, got an array of float64")
    refused([[1, 2]], f"{cora_p1}: nodes must be a 1-d array of node ids, got shape (1, 2)")
    refused([1], "nodes= replaces the split: it cannot be combined with split='test'",
            split="test")
    with pytest.raises(dsp.InvalidArgument, match=r"^unknown split 'dev' \(train, valid, test, all\)$"):
        dsp.Loader(cora_p1, fanouts=FANOUTS, split="dev")


@pytest.mark.parametrize("partition", [False, True])
def test_an_absent_split_is_refused(cora_no_splits, tmp_path, partition):
    path = cora_no_splits
    if partition:
        path = str(tmp_path / "p1")
        dsp.partition(cora_no_splits, path, parts=1)
    with pytest.raises(dsp.FormatError, match="^" + re.escape(
            f"{path}: the dataset has no training ids (train_idx.npy missing or empty): "
            "split='train' has nothing to load") + "$"):
        dsp.Loader(path, fanouts=FANOUTS)
    with pytest.raises(dsp.FormatError, match="^" + re.escape(
            f"{path}: the dataset has no validation ids (valid_idx.npy missing or empty): "
            "split='valid' has nothing to load") + "$"):
        dsp.Loader(path, fanouts=FANOUTS, split="valid")
    # What it has still loads: its test split, every node, given nodes.
    assert len(dsp.Loader(path, fanouts=FANOUTS, split="test", batch_size=500)) == 2
    assert len(dsp.Loader(path, fanouts=FANOUTS, split="all", batch_size=1000)) == 3
    assert len(dsp.Loader(path, fanouts=FANOUTS, nodes=[3, 1])) == 1


# -- to_original_ids / to_dsp_ids ---------------------------------------------------------------


def test_id_maps_of_a_partition(cora_p2):
    new2old = np.load(f"{cora_p2}/new2old.npy")
    everything = np.arange(2708)
    original = dsp.to_original_ids(cora_p2, everything)
    assert isinstance(original, np.ndarray) and original.dtype == np.int64
    np.testing.assert_array_equal(original, new2old)
    assert not np.array_equal(original, everything)  # two parts: a real renumbering
    x = some_nodes(2708, 500, seed=4)
    np.testing.assert_array_equal(dsp.to_dsp_ids(cora_p2, dsp.to_original_ids(cora_p2, x)), x)
    np.testing.assert_array_equal(dsp.to_original_ids(cora_p2, dsp.to_dsp_ids(cora_p2, x)), x)
    # Shapes are kept; an empty list is an empty array.
    pairs = x[:10].reshape(2, 5).astype(np.int32)
    assert dsp.to_dsp_ids(cora_p2, pairs).shape == (2, 5)
    assert dsp.to_original_ids(cora_p2, []).shape == (0,)


def test_id_maps_of_torch_tensors(cora_p2):
    import torch

    x = torch.tensor([0, 5, 2707], dtype=torch.int32)
    got = dsp.to_original_ids(cora_p2, x)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.int64
    assert torch.equal(dsp.to_dsp_ids(cora_p2, got), x.long())


def test_id_maps_of_a_dataset_directory_are_the_identity(cora):
    x = np.array([0, 17, 2707])
    np.testing.assert_array_equal(dsp.to_original_ids(cora, x), x)
    np.testing.assert_array_equal(dsp.to_dsp_ids(cora, x), x)


def test_id_map_errors(cora, cora_p2, tmp_path):
    for fn in (dsp.to_original_ids, dsp.to_dsp_ids):
        for path in (cora_p2, cora):
            with pytest.raises(dsp.InvalidArgument, match="^" + re.escape(
                    f"{path}: ids entry 2 is 2708, outside the graph's node ids [0, 2708)") + "$"):
                fn(path, [0, 1, 2708, -1])
        with pytest.raises(dsp.InvalidArgument, match="^" + re.escape(
                f"{cora_p2}: node ids must be integers, got an array of float64") + "$"):
            fn(cora_p2, [0.5])
        with pytest.raises(dsp.IoError, match="^" + re.escape(
                f"{tmp_path}: neither a partition directory (partition.json) nor a dataset "
                "directory (dataset.json)") + "$"):
            fn(str(tmp_path), [0])


# -- two ranks -----------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun not installed")
def test_two_ranks(cora_p2, tmp_path):
    # Each rank keeps the given nodes it owns; over the ranks every one is a seed once per
    # (unshuffled) epoch, and split="all" covers every node once.
    ids = some_nodes(2708, 400, seed=5)
    np.save(tmp_path / "ids.npy", ids)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    r = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", sys.executable, str(HERE),
                        cora_p2, str(tmp_path)], env=env, capture_output=True, text=True,
                       timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    ranks = [json.loads((tmp_path / f"rank{i}.json").read_text()) for i in range(2)]
    offsets = json.loads(pathlib.Path(cora_p2, "partition.json").read_text())["offsets"]
    for d in ranks:
        lo, hi = offsets[d["rank"]], offsets[d["rank"] + 1]
        assert d["nodes"] and all(lo <= s < hi for s in d["nodes"] + d["all"])
        assert set(d["shuffled"]) == set(d["nodes"])
    original = dsp.to_original_ids(cora_p2, ranks[0]["nodes"] + ranks[1]["nodes"])
    assert sorted(original.tolist()) == sorted(ids.tolist())
    assert sorted(ranks[0]["all"] + ranks[1]["all"]) == list(range(2708))


def _run_rank(part_dir, out_dir):
    """One rank of test_two_ranks: the seeds of an epoch of Loader(nodes=) (unshuffled and
    shuffled) and of split="all", written to rank<r>.json."""
    ids = np.load(f"{out_dir}/ids.npy")
    nodes = dsp.Loader(part_dir, fanouts=FANOUTS, batch_size=32, nodes=ids, shuffle=False)
    shuffled = dsp.Loader(part_dir, fanouts=FANOUTS, batch_size=32, nodes=ids, seed=1)
    every = dsp.Loader(part_dir, fanouts=FANOUTS, batch_size=256, split="all", shuffle=False)
    out = {"rank": nodes.rank, "nodes": seeds_of(nodes).tolist(),
           "shuffled": seeds_of(shuffled).tolist(), "all": seeds_of(every).tolist()}
    with open(f"{out_dir}/rank{nodes.rank}.json", "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    _run_rank(sys.argv[1], sys.argv[2])
