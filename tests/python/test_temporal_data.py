"""Edge and node times through the Python dataset writer (save_dataset, from_pyg's time
attributes), dsp.load_dataset and dsp.generate_community(temporal=True)."""
import numpy as np
import pytest

import dsp


def test_save_dataset_times_round_trip(tmp_path):
    # 0 -> 1 twice: the earliest time (3) is kept.
    edge_index = np.array([[0, 2, 0, 1], [1, 1, 1, 2]])
    meta = dsp.save_dataset(tmp_path / "t", edge_index=edge_index,
                            edge_time=np.array([9, 5, 3, 7]), node_time=[10, 20, 30])
    assert meta["has_edge_time"] and meta["has_node_time"]
    ds = dsp.load_dataset(str(tmp_path / "t"))
    np.testing.assert_array_equal(ds["indices"], [0, 2, 1])
    np.testing.assert_array_equal(ds["edge_time"], [3, 5, 7])
    np.testing.assert_array_equal(ds["node_time"], [10, 20, 30])
    np.testing.assert_array_equal(np.load(tmp_path / "t" / "edge_time.npy"), [3, 5, 7])
    # A CSR in dsp's layout keeps its times as given.
    dsp.save_dataset(tmp_path / "c", csr=(ds["indptr"], ds["indices"]), edge_time=[1, 2, 3])
    np.testing.assert_array_equal(dsp.load_dataset(str(tmp_path / "c"))["edge_time"], [1, 2, 3])
    plain = dsp.load_dataset(str(tmp_path / "c"))
    assert plain["node_time"] is None


def test_save_dataset_time_errors(tmp_path):
    ei = np.array([[0, 1], [1, 2]])
    with pytest.raises(dsp.InvalidArgument, match="edge_time has 3 times but the graph has 2 "
                                                  "edges"):
        dsp.save_dataset(tmp_path / "a", edge_index=ei, edge_time=[1, 2, 3])
    with pytest.raises(dsp.InvalidArgument, match="edge_time must be a 1-d array of integer "
                                                  "times, got float64"):
        dsp.save_dataset(tmp_path / "a", edge_index=ei, edge_time=[1.5, 2.0])
    with pytest.raises(dsp.InvalidArgument, match="node_time needs edge_time"):
        dsp.save_dataset(tmp_path / "a", edge_index=ei, node_time=[1, 2, 3])
    with pytest.raises(dsp.InvalidArgument, match="node_time has 2 times but the graph has 3 "
                                                  "nodes"):
        dsp.save_dataset(tmp_path / "a", edge_index=ei, edge_time=[1, 2], node_time=[1, 2])
    assert not (tmp_path / "a").exists()


class _Data:
    """The attributes from_pyg reads of a torch_geometric Data."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def test_pyg_time_attributes():
    # from_pyg's reading of a Data's times (from_pyg itself needs torch_geometric installed).
    from dsp._data import _pyg_times
    t = np.array([4, 5, 6])
    assert _pyg_times(_Data(num_nodes=4, time=t), 3) == (t, None)
    assert _pyg_times(_Data(num_nodes=3, time=t), 2) == (None, t)
    assert _pyg_times(_Data(num_nodes=3, edge_time=t, node_time=None, time=t), 3) == (t, None)
    with pytest.raises(dsp.InvalidArgument, match="one value per edge and per node"):
        _pyg_times(_Data(num_nodes=3, time=t), 3)


def test_generate_temporal(tmp_path):
    meta = dsp.generate_community(str(tmp_path / "g"), nodes=2000, edges=20000, communities=8,
                                  classes=4, features=8, temporal=True, seed=2)
    assert meta["directed"] and meta["has_edge_time"] and meta["has_node_time"]
    extra = meta["extra"]
    assert extra["accuracy_bound"] == pytest.approx(1 - 0.1 * 0.75)
    assert extra["accuracy_bound_untimed"] == pytest.approx(0.45 + 0.1 / 4)
    ds = dsp.load_dataset(str(tmp_path / "g"))
    assert ds["edge_time"].dtype == np.int64 and len(ds["edge_time"]) == len(ds["indices"])
