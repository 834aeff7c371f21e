"""dsp._data.convert_ogb_link: OGB's .pt link splits read with torch (here a stand-in that
unpickles dicts of numpy arrays, so the test needs no torch), converted by the dsp CLI."""
import gzip
import json
import os
import pickle
import sys

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
