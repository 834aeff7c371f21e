"""The heterogeneous examples (examples/hetero_dgl.py: an R-GCN of DGL's HeteroGraphConv;
examples/hetero_pyg.py: PyG's to_hetero GraphSAGE) run one epoch on dsp.Loader over a small
MAG-shaped graph and report their accuracies; each is skipped, and counted, where its framework
cannot be imported."""
import importlib.util
import pathlib
import re
import subprocess
import sys

import pytest

import dsp

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def needs(module):
    return pytest.mark.skipif(importlib.util.find_spec(module) is None,
                              reason=f"could not import '{module}'")


@pytest.fixture(scope="module")
def small_mag(tmp_path_factory):
    data = tmp_path_factory.mktemp("data") / "mag"
    dsp.generate_hetero(str(data), papers=1000, authors=600, institutions=30, fields=60, seed=2)
    return str(data)


@pytest.mark.parametrize("example", [
    pytest.param("hetero_dgl.py", marks=needs("dgl")),
    pytest.param("hetero_pyg.py", marks=needs("torch_geometric")),
])
def test_one_epoch(small_mag, example):
    r = subprocess.run([sys.executable, str(EXAMPLES / example), small_mag, "1"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    epoch = re.search(r"epoch  0 loss ([0-9.]+) val ([0-9.]+) test ([0-9.]+)", r.stdout)
    assert epoch, r.stdout
    loss, val, test = map(float, epoch.groups())
    assert loss > 0 and 0 <= val <= 1 and 0 <= test <= 1
    assert re.search(r"^best val [0-9.]+ test at best val [0-9.]+$", r.stdout, re.M), r.stdout
