"""Shared fixtures: Cora converted and partitioned once per session.

scripts/test-python.sh runs these tests against the installed wheel (DSP_TEST_INSTALLED=1, from
outside the source tree); they also run on a build tree with PYTHONPATH=<build>/python. Tests
that need DGL or PyTorch Geometric skip when it cannot be imported, and the summary counts them.
"""
import pathlib
import re

import pytest

import dsp

REPO = pathlib.Path(__file__).resolve().parents[2]
CORA_RAW = REPO / "tests" / "data" / "cora"


FRAMEWORKS = ("dgl", "torch_geometric")


def pytest_configure(config):
    # The tiers of scripts/test.sh: --quick runs -m "not slow and not full", the gate (CI)
    # -m "not full", --full everything.
    config.addinivalue_line("markers", "slow: a whole job or a multi-process run (not in --quick)")
    config.addinivalue_line("markers", "full: only in the full tier (scripts/test.sh --full)")


def pytest_terminal_summary(terminalreporter):
    for name in FRAMEWORKS:
        n = sum(1 for r in terminalreporter.stats.get("skipped", [])
                if re.search(rf"could not import '{name}[.']", str(r.longrepr)))
        if n:
            terminalreporter.write_line(f"{n} test(s) skipped: {name} cannot be imported here")


@pytest.fixture(scope="session")
def cora(tmp_path_factory):
    out = tmp_path_factory.mktemp("data") / "cora"
    dsp.convert_ogb(str(CORA_RAW), str(out))
    return str(out)


@pytest.fixture(scope="session")
def cora_p1(cora, tmp_path_factory):
    out = tmp_path_factory.mktemp("part") / "cora-p1"
    dsp.partition(cora, str(out), parts=1)
    return str(out)


@pytest.fixture(scope="session")
def cora_p2(cora, tmp_path_factory):
    out = tmp_path_factory.mktemp("part") / "cora-p2"
    dsp.partition(cora, str(out), parts=2)
    return str(out)


def assert_same_predictions(out, ref_logits, ref_classes):
    """A Python model's logits against dsp predict's: within 1e-4 of their scale, and the same
    class wherever the top two logits are more than 1e-6 apart."""
    import numpy as np
    assert out.shape == ref_logits.shape
    assert np.abs(out - ref_logits).max() <= 1e-4 * np.abs(ref_logits).max()
    top2 = np.sort(out, axis=1)[:, -2:]
    differ = out.argmax(1) != ref_classes
    assert not np.any(differ & (top2[:, 1] - top2[:, 0] > 1e-6)), np.flatnonzero(differ)


class _StandInDglGraph:
    """What LinkBatch.to_dgl and Block.to_dgl touch of a DGL graph: its edges as given, node and
    edge data (per type too)."""

    def __init__(self, edges, **sizes):
        import collections
        import types
        self.edges, self.sizes = edges, sizes
        self.ndata, self.srcdata, self.dstdata, self.edata = {}, {}, {}, {}
        typed = lambda: collections.defaultdict(lambda: types.SimpleNamespace(data={}))
        self.nodes, self.srcnodes, self.dstnodes = typed(), typed(), typed()


@pytest.fixture
def dgl_stand_in(monkeypatch):
    """A stand-in `dgl` module (graph, heterograph, create_block, NID), so that the conversions
    run where DGL cannot be installed."""
    import sys
    import types
    dgl = types.ModuleType("dgl")
    dgl.NID = "_ID"
    dgl.graph = lambda edges, num_nodes: _StandInDglGraph(edges, num_nodes=num_nodes)
    dgl.heterograph = lambda edges, num_nodes_dict: _StandInDglGraph(
        edges, num_nodes_dict=num_nodes_dict)
    dgl.create_block = lambda edges, **sizes: _StandInDglGraph(edges, **sizes)
    monkeypatch.setitem(sys.modules, "dgl", dgl)
    return dgl
