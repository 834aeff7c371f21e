"""Python and the CLI take the same options: one table per command (core/options.hpp) makes the
CLI's flags and Python's keywords, so the two lists, their names and their defaults agree."""
import filecmp
import re
import subprocess

import pytest

import dsp
from dsp import _dsp

# command (as _dsp._options names it) -> the CLI's words, the Python function, its positionals
COMMANDS = {
    "partition": (["partition"], "partition"),
    "convert": (["convert"], "convert_edge_list"),
    "generate rmat": (["generate", "rmat"], "generate_rmat"),
    "generate community": (["generate", "community"], "generate_community"),
}


def cli_flags(words):
    """The long flags `dsp WORDS --help` lists (CLI11: '  -n,--nodes COUNT  help')."""
    r = subprocess.run([dsp.cli_path(), *words, "--help"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    flags = set(re.findall(r"^\s+(?:-\w,)?(--[a-z][a-z0-9-]*)", r.stdout, re.M))
    return flags - {"--help"}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_python_keywords_are_the_cli_flags(command):
    words, function = COMMANDS[command]
    table = _dsp._options(command)
    assert table, command
    # Every flag the CLI has is a Python keyword, and every keyword a flag.
    assert {o["flag"] for o in table} == cli_flags(words)
    for o in table:
        # The CLI's name: --no-self-loops <-> no_self_loops.
        assert o["key"] == o["flag"][2:].replace("-", "_"), o
        assert o["help"], o
        # The function documents it with its default.
        assert f"  {o['key']} = " in getattr(dsp, function).__doc__, o["key"]


def test_an_unknown_keyword_is_refused_with_the_command_named(tmp_path):
    with pytest.raises(dsp.FormatError, match=r"^dsp.generate_rmat: unknown key 'feature_dim'$"):
        dsp.generate_rmat(str(tmp_path / "x"), feature_dim=8)
    with pytest.raises(dsp.FormatError, match=r"^dsp.partition: key 'parts' has the wrong type$"):
        dsp.partition(str(tmp_path / "a"), str(tmp_path / "b"), parts="two")


@pytest.mark.parametrize("kind", ["rmat", "community"])
def test_generate_defaults_and_values_are_the_clis(tmp_path, kind):
    # The same options through Python and through the CLI write the same files, byte for byte;
    # and so do the defaults the two leave unset.
    gen = getattr(dsp, f"generate_{kind}")
    gen(str(tmp_path / "py"), nodes="3k", edges=20000, features=8, seed=3)
    r = subprocess.run([dsp.cli_path(), "generate", kind, str(tmp_path / "cli"), "--nodes", "3k",
                        "--edges", "20000", "-f", "8", "--seed", "3"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    cmp = filecmp.dircmp(str(tmp_path / "py"), str(tmp_path / "cli"))
    assert cmp.left_only == [] and cmp.right_only == [] and "indices.npy" in cmp.common
    _, mismatch, errors = filecmp.cmpfiles(str(tmp_path / "py"), str(tmp_path / "cli"),
                                           cmp.common, shallow=False)
    assert mismatch == [] and errors == []


def test_partition_dry_run_is_the_clis_estimate(cora, tmp_path):
    plan = dsp.partition(cora, str(tmp_path / "p"), parts=2, dry_run=True)
    assert plan["fits"] and plan["need_bytes"] > 0 and plan["budget_bytes"] > 0
    assert not (tmp_path / "p").exists()
    with pytest.raises(dsp.Error, match=r"^dsp partition needs about .* of memory but the budget "
                                        r"is "):
        dsp.partition(cora, str(tmp_path / "p"), parts=2, memory_budget="1K")
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("cls", ["Loader", "LinkLoader"])
def test_loader_keywords_are_the_engines_table(cls):
    # Every keyword of the Loaders but those Python handles is a key of the engine's table
    # (the Loader's own and dsp train's rank, seed order and link tables), with its default.
    import inspect
    table = {o["key"]: o["default"] for o in _dsp._options("loader")}
    params = inspect.signature(getattr(dsp, cls).__init__).parameters
    keywords = {k: p.default for k, p in params.items()
                if k not in dsp._NOT_ENGINE and p.kind is p.POSITIONAL_OR_KEYWORD}
    assert keywords and set(keywords) <= set(table), set(keywords) - set(table)
    for k, default in keywords.items():
        if default is not None:  # None: the table's default
            assert table[k] == (list(default) if isinstance(default, tuple) else default), k
