"""C++ errors arrive as Python exceptions of the matching class with the CLI's message."""
import json
import os
import subprocess

import pytest

import dsp


def cli_error(*args):
    """The message `dsp ARGS` prints after 'dsp: error: ' (the CLI shipped in the package)."""
    r = subprocess.run([dsp.cli_path(), *args], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    line = [ln for ln in r.stderr.splitlines() if ln.startswith("dsp: error: ")][-1]
    return line[len("dsp: error: "):]


def test_hierarchy():
    assert issubclass(dsp.InvalidArgument, dsp.Error)
    assert issubclass(dsp.InvalidArgument, ValueError)
    assert issubclass(dsp.IoError, dsp.Error) and issubclass(dsp.IoError, OSError)
    assert issubclass(dsp.FormatError, dsp.Error) and issubclass(dsp.Error, RuntimeError)
    assert dsp.Error.__module__ == "dsp"


def test_missing_directory(tmp_path):
    missing = str(tmp_path / "nope")
    with pytest.raises(dsp.IoError) as e:
        dsp.Loader(missing, fanouts=[10])
    msg = (f"{missing}: neither a partition directory (partition.json) nor a dataset directory "
           "(dataset.json)")
    assert str(e.value) == msg
    with pytest.raises(dsp.IoError) as e2:
        dsp.train({"path": missing, "fanouts": [5, 5], "epochs": 1})
    assert str(e2.value) == msg
    cli = cli_error("train", missing, "--fanouts", "5,5", "--epochs", "1")
    assert cli == msg


def test_missing_dataset_for_partition(tmp_path):
    missing = str(tmp_path / "nope")
    with pytest.raises(dsp.Error) as e:
        dsp.partition(missing, str(tmp_path / "out"), parts=1)
    cli = cli_error("partition", missing, str(tmp_path / "out2"), "--parts", "1")
    assert cli == str(e.value)
    assert missing in str(e.value)


def test_partition_never_replaces_its_dataset(cora, tmp_path):
    # The CLI's guard, in the library: dsp.partition(ds, ds, overwrite=True) would have replaced
    # the dataset it reads.
    before = sorted(os.listdir(cora))
    with pytest.raises(dsp.InvalidArgument) as e:
        dsp.partition(cora, cora, parts=1, overwrite=True)
    assert "writing the partition there would destroy the dataset" in str(e.value)
    assert str(e.value) == cli_error("partition", cora, cora, "--parts", "1", "--overwrite")
    assert sorted(os.listdir(cora)) == before
    # The CLI's methods and checks, the same from Python.
    with pytest.raises(dsp.InvalidArgument) as e:
        dsp.partition(cora, str(tmp_path / "x"), parts=2, method="kway")
    assert str(e.value) == cli_error("partition", cora, str(tmp_path / "y"), "--parts", "2",
                                     "--method", "kway")
    with pytest.raises(dsp.InvalidArgument, match=r"^--cache-ratio must be in \[0, 1\], got 2"):
        dsp.partition(cora, str(tmp_path / "z"), parts=1, cache_ratio=2.0)
    meta = dsp.partition(cora, str(tmp_path / "blocks"), parts=2, method="bfs-blocks")
    assert meta["parts"] == 2 and meta["method"] == "bfs-blocks"


def test_bad_fanouts(cora_p1):
    with pytest.raises(dsp.InvalidArgument) as e:
        dsp.Loader(cora_p1, fanouts=[10, 0])
    assert str(e.value) == "--fanouts: fanouts must be -1 (all neighbours) or in [1, 4194304], got 0"
    with pytest.raises(ValueError):  # InvalidArgument is a ValueError
        dsp.Loader(cora_p1, fanouts=[-2])
    with pytest.raises(dsp.InvalidArgument) as e2:
        dsp.train({"path": cora_p1, "fanouts": [10, 0]})
    assert str(e2.value) == str(e.value)
    cli = cli_error("train", cora_p1, "--fanouts", "10,0")
    assert cli == str(e.value)


def test_bad_arguments(cora_p1):
    with pytest.raises(dsp.InvalidArgument, match="batch sizes must be > 0"):
        dsp.Loader(cora_p1, fanouts=[5], batch_size=0)
    with pytest.raises(dsp.InvalidArgument, match=r"^unknown split 'dev' \(train, valid, test, all\)$"):
        dsp.Loader(cora_p1, fanouts=[5], split="dev")
    with pytest.raises(dsp.InvalidArgument, match="^--fifo-rows must be >= 0, got -1$"):
        dsp.Loader(cora_p1, fanouts=[5], fifo_rows=-1)
    with pytest.raises(dsp.InvalidArgument,
                       match="^--topology-memory: expected a size such as 512M, 12G or 1.5GiB, "
                             "got '12Q'$"):
        dsp.Loader(cora_p1, fanouts=[5], topology_memory="12Q")
    with pytest.raises(dsp.InvalidArgument, match=r"^unknown transport 'tcp' \(auto, nccl, mpi\)$"):
        dsp.Loader(cora_p1, fanouts=[5], transport="tcp")
    with pytest.raises(dsp.InvalidArgument,
                       match=r"^--transport nccl: only GPU ranks \(--device cuda\) choose a "
                             r"transport; a CPU rank's channels are its communicator's "
                             r"\(--backend\)$"):
        dsp.Loader(cora_p1, fanouts=[5], transport="nccl")
    with pytest.raises(dsp.FormatError, match="unknown key 'epoch'"):
        dsp.train({"path": cora_p1, "epoch": 3})


def test_corrupt_file(cora, tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in os.listdir(cora):
        os.symlink(os.path.join(cora, f), bad / f)
    os.remove(bad / "dataset.json")
    meta = json.load(open(os.path.join(cora, "dataset.json")))
    meta["num_nodes"] = 5
    (bad / "dataset.json").write_text(json.dumps(meta))
    with pytest.raises(dsp.FormatError) as e:
        dsp.load_dataset(str(bad))
    cli = cli_error("info", str(bad))
    assert cli == str(e.value)


def test_cli_names_the_class_when_asked(tmp_path):
    # DSP_ERROR_TYPE=1 is how dsp.train learns the class of the CLI's error; people see the plain
    # line (cli_error above).
    missing = str(tmp_path / "nope")
    r = subprocess.run([dsp.cli_path(), "info", missing], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, DSP_ERROR_TYPE="1"))
    assert r.returncode == 1
    want = f"dsp: error (IoError): {missing}: no such dataset directory"
    assert r.stderr.splitlines()[-1] == want


def test_train_config_errors(cora_p1):
    # The CLI reads a temporary file; the messages speak of the dict the caller passed.
    with pytest.raises(dsp.FormatError) as e:
        dsp.train({"path": cora_p1, "epoch": 3})
    assert str(e.value) == "config: unknown key 'epoch'"
    with pytest.raises(dsp.FormatError) as e:
        dsp.train({"path": cora_p1, "epochs": "many"})
    assert str(e.value) == "config: key 'epochs' has the wrong type"
