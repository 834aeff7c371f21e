"""The Loader on a multi-label dataset: y is each seed's int8 row of 0/1 labels."""
import numpy as np
import pytest

import dsp


@pytest.fixture(scope="module")
def multilabel(tmp_path_factory):
    d = tmp_path_factory.mktemp("ml")
    meta = dsp.generate_community(str(d / "g"), nodes=600, edges=4000, communities=6,
                                  multilabel=5, features=8, seed=3)
    assert meta["multilabel"] is True and meta["num_classes"] == 5
    dsp.partition(str(d / "g"), str(d / "p1"), parts=1)
    return str(d / "p1")


def test_y_is_the_seeds_label_rows(multilabel):
    loader = dsp.Loader(multilabel, fanouts=[5, 5], batch_size=64, as_tensor=False, seed=1)
    labels = np.load(f"{multilabel}/labels.npy")
    assert labels.dtype == np.int8 and labels.shape[1] == 5
    seen = 0
    for b in loader.iter_batches():
        assert b.y.dtype == np.int8 and b.y.shape == (len(b.seeds), 5)
        np.testing.assert_array_equal(b.y, labels[b.seeds])
        seen += len(b.seeds)
    assert seen == len(np.load(f"{multilabel}/train_idx.npy"))


def test_y_as_torch_tensor(multilabel):
    torch = pytest.importorskip("torch")
    blocks, x, y = next(iter(dsp.Loader(multilabel, fanouts=[5, 5], batch_size=32)))
    assert y.dtype == torch.int8 and y.shape == (32, 5)
    assert set(torch.unique(y).tolist()) <= {0, 1}
