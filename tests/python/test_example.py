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
