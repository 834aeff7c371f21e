"""The examples train on dsp.Loader to the C++ trainer's Cora band (published GraphSAGE:
0.79-0.82; test_trainer.cpp's bound for the C++ GraphSAGE: 0.78): plain PyTorch, PyG's and DGL's
own SAGEConv, and DistributedDataParallel over two MPI ranks."""
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import dsp

# Whole examples (training runs): not in the quick tier.
pytestmark = pytest.mark.slow

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
EPOCHS = "30"


def accuracy(stdout):
    return float(re.search(r"test at best val ([0-9.]+)", stdout).group(1))


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, **(env or {})))
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def needs(module):
    return pytest.mark.skipif(importlib.util.find_spec(module) is None,
                              reason=f"could not import '{module}'")


@pytest.mark.parametrize("example", [
    "train_sage.py",
    pytest.param("pyg_sage.py", marks=needs("torch_geometric")),
    pytest.param("dgl_sage.py", marks=needs("dgl")),
])
def test_single_process(cora, example):
    out = run([sys.executable, str(EXAMPLES / example), cora, EPOCHS])
    assert accuracy(out) >= 0.78, out


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun not installed")
def test_ddp_two_ranks(cora):
    out = run(["mpirun", "--oversubscribe", "-np", "2", sys.executable,
               str(EXAMPLES / "ddp_sage.py"), cora, EPOCHS],
              env={"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    # Rank 0 alone reports, the accuracy over both ranks' seeds.
    assert sum(line.startswith("best val") for line in out.splitlines()) == 1, out
    assert accuracy(out) >= 0.78, out


def test_feature_normalisation_is_a_choice(cora, cora_p1, tmp_path):
    # Row normalisation by default only where the reference examples use it (the Planetoid
    # datasets, Cora here, as dataset or partition directory); none on other datasets; the
    # option chooses for any.
    torch = pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("examples_common", EXAMPLES / "common.py")
    common = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(common)
    other = str(tmp_path / "sbm")
    dsp.generate_community(other, nodes=200, edges=1000, features=4, classes=2)
    assert [common.feature_normalisation(d) for d in (cora, cora_p1, other)] == [
        "row", "row", "none"]
    assert common.feature_normalisation(cora, "none") == "none"
    assert common.feature_normalisation(other, "row") == "row"
    args = common.parse_args(["x.py", cora, "5", "--normalize-features", "none"])
    assert (args.data, args.epochs, args.normalize_features) == (cora, 5, "none")
    assert common.parse_args(["x.py"]).normalize_features is None
    x = torch.tensor([[1.0, 3.0], [0.0, 0.0]])
    assert torch.equal(common.normalise(x, "none"), x)
    assert torch.equal(common.normalise(x, "row"), torch.tensor([[0.25, 0.75], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="normalize must be 'none' or 'row', got 'standard'"):
        common.BlockStack([], normalize="standard")
    # The examples' command line: the choice reaches the model.
    out = run([sys.executable, str(EXAMPLES / "train_sage.py"), cora, "1",
               "--normalize-features", "none"])
    assert out.startswith("features: none normalisation\n"), out
    assert run([sys.executable, str(EXAMPLES / "train_sage.py"), other, "1"]).startswith(
        "features: none normalisation\n")
