"""Shared fixtures: Cora converted and partitioned once per session.

The module is found through PYTHONPATH=<build>/python (scripts/test.sh sets it); DSP_BUILD_DIR
(default: build) names the build tree whose `dsp` CLI the message tests compare against.
"""
import os
import pathlib

import pytest

import dsp

REPO = pathlib.Path(__file__).resolve().parents[2]
CORA_RAW = REPO / "tests" / "data" / "cora"


def cli_path():
    """The `dsp` CLI of the build tree the module came from (<build>/python/dsp/_dsp*.so)."""
    build = pathlib.Path(dsp._dsp.__file__).resolve().parents[2]
    exe = build / "tools" / "dsp"
    return str(exe) if exe.exists() else None


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
