"""Memory refused, not killed: the Python API estimates its peak as the CLI does and, given a
memory_budget below the estimate, raises dsp.Error with the CLI's one line (naming
--memory-budget) before it allocates, leaving nothing behind. The figures in the line count each
process's own resident memory, so the line is matched as a pattern, the same for both."""
import os
import re
import subprocess

import pytest

import dsp

SIZE = r"[0-9.]+ [KMG]?i?B"
BUDGET = rf"but the budget is 1\.0 MiB \({SIZE} available\)"


def cli_error(*args, env=None):
    """The message `dsp ARGS` prints after 'dsp: error: ' (exit code 1)."""
    r = subprocess.run([dsp.cli_path(), *args], capture_output=True, text=True, timeout=120,
                       env=env)
    assert r.returncode == 1, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("dsp: error: ")]
    assert len(lines) == 1, r.stderr
    return lines[0][len("dsp: error: "):]


def refused(pattern, call):
    with pytest.raises(dsp.Error) as e:
        call()
    assert re.fullmatch(pattern, str(e.value)), str(e.value)


@pytest.mark.parametrize("kind", ["community", "rmat"])
def test_generate_refused(tmp_path, kind):
    out = tmp_path / "g"
    pattern = (rf"dsp generate \(out of core\) needs about {SIZE} of memory {BUDGET}: lower "
               r"--nodes or raise --memory-budget")
    generate = dsp.generate_community if kind == "community" else dsp.generate_rmat
    refused(pattern, lambda: generate(str(out), nodes=200000, memory_budget="1M"))
    assert not out.exists()
    cli = cli_error("generate", kind, str(out), "--nodes", "200000", "--memory-budget", "1M")
    assert re.fullmatch(pattern, cli), cli
    assert not out.exists()


def test_partition_refused(cora, tmp_path):
    out = tmp_path / "p"
    pattern = (rf"dsp partition needs about {SIZE} of memory {BUDGET}: use --method bfs-blocks "
               rf"\(about {SIZE}\) or --method random \(about {SIZE}\), or raise --memory-budget")
    refused(pattern, lambda: dsp.partition(cora, str(out), parts=2, memory_budget="1M"))
    assert not out.exists()
    cli = cli_error("partition", cora, str(out), "--parts", "2", "--memory-budget", "1M")
    assert re.fullmatch(pattern, cli), cli
    assert not out.exists()


@pytest.fixture
def private_tmpdir(tmp_path, monkeypatch):
    """TMPDIR of this test alone: where a partition on the fly would be written."""
    d = tmp_path / "tmpdir"
    d.mkdir()
    monkeypatch.setenv("TMPDIR", str(d))
    return d


def test_loader_partition_on_the_fly_refused(cora, private_tmpdir):
    pattern = (rf"the partition of {re.escape(cora)} on the fly \(1 part by metis\) needs about "
               rf"{SIZE} of memory {BUDGET}: raise --memory-budget")
    refused(pattern, lambda: dsp.Loader(cora, fanouts=[5, 5], memory_budget="1M"))
    refused(pattern, lambda: dsp.LinkLoader(cora, fanouts=[5, 5], memory_budget="1M"))
    assert os.listdir(private_tmpdir) == []
    # The default budget fits Cora: the same loader opens.
    assert dsp.Loader(cora, fanouts=[5, 5], as_tensor=False).steps > 0
    cli = cli_error("train", cora, "--epochs", "1", "--memory-budget", "1M",
                    env=dict(os.environ, TMPDIR=str(private_tmpdir)))
    assert re.fullmatch(pattern, cli), cli
    assert os.listdir(private_tmpdir) == []


def test_train_refused(cora, tmp_path, private_tmpdir):
    pattern = (rf"the partition of {re.escape(cora)} on the fly \(1 part by metis\) needs about "
               rf"{SIZE} of memory {BUDGET}: raise --memory-budget")
    ck = tmp_path / "ck"
    refused(pattern, lambda: dsp.train({"path": cora, "fanouts": [5, 5], "epochs": 1,
                                        "memory_budget": "1M", "checkpoint_dir": str(ck)}))
    assert not ck.exists()
    assert os.listdir(private_tmpdir) == []


def test_bad_budget_is_a_usage_error(cora):
    with pytest.raises(dsp.InvalidArgument) as e:
        dsp.Loader(cora, fanouts=[5], memory_budget="lots")
    assert str(e.value) == ("--memory-budget: expected a size such as 512M, 12G or 1.5GiB, got "
                            "'lots'")
