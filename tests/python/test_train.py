"""dsp.train runs the `dsp train` CLI shipped in the package out of process: result, output, MPI."""
import os
import re
import shutil

import pytest

import dsp

MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def test_result_and_forwarded_output(cora_p1, capsys):
    r = dsp.train({"path": cora_p1, "fanouts": [5, 5], "epochs": 2, "batch_size": 64})
    assert r["epochs_run"] == 2 and 0.0 <= r["best_val_acc"] <= 1.0
    assert r["final_loss"] > 0 and r["best_epoch"] in (1, 2)  # epochs are numbered from 1
    # The CLI's results reach sys.stdout and its log sys.stderr (so notebooks and capture see
    # them), and the summary agrees with the result.
    captured = capsys.readouterr()
    assert f"best val acc        {r['best_val_acc']:.4f} (epoch {r['best_epoch']})" in captured.out
    assert re.search(r"^epoch   2 \| loss .* busy\) \| eval \d+\.\d\d s$", captured.out, re.M)
    assert "sage on" in captured.err and "epoch   2 | loss" not in captured.err
    # The per-epoch history, as a PyTorch loop would have kept it.
    assert [h["epoch"] for h in r["history"]] == [1, 2]
    assert r["history"][-1]["loss"] == r["final_loss"]
    assert max(h["val"] for h in r["history"]) == r["best_val_acc"]


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun not installed")
def test_two_ranks_under_mpirun(cora_p2, monkeypatch, capsys):
    for k, v in MPI_ENV.items():
        monkeypatch.setenv(k, v)
    r = dsp.train({"path": cora_p2, "fanouts": [5, 5], "epochs": 1, "batch_size": 32},
                  ranks=2, mpirun=("mpirun", "--oversubscribe"))
    assert r["epochs_run"] == 1 and r["bytes_communicated"] > 0  # rank 0 talked to rank 1
    assert "2 rank(s)" in capsys.readouterr().err


def test_refused_inside_an_mpi_job(cora_p1, monkeypatch):
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    with pytest.raises(dsp.NotSupported, match="call it from one process"):
        dsp.train({"path": cora_p1, "epochs": 1})


def test_bad_calls(cora_p1):
    with pytest.raises(dsp.InvalidArgument, match="ranks must be an integer >= 1, got 0"):
        dsp.train({"path": cora_p1}, ranks=0)
    with pytest.raises(dsp.InvalidArgument, match="config must be a JSON-serialisable dict"):
        dsp.train({"path": cora_p1, "epochs": object()})
    with pytest.raises(dsp.NotSupported, match="cannot run no-such-launcher: not found"):
        dsp.train({"path": cora_p1}, ranks=2, mpirun=("no-such-launcher",))


def test_cli_ships_with_the_package():
    exe = dsp.cli_path()
    assert os.path.dirname(exe) == os.path.join(os.path.dirname(dsp._dsp.__file__), "bin")
    assert os.access(exe, os.X_OK) and dsp._dsp.has_trainer


@pytest.mark.slow
def test_predict_and_embed_with_the_best_model(cora, cora_p1, tmp_path):
    import numpy as np
    ck = tmp_path / "ck"
    r = dsp.train({"path": cora_p1, "fanouts": [5, 5], "epochs": 3, "batch_size": 64,
                   "hidden": 16, "checkpoint_dir": str(ck)})
    out = dsp.predict(cora_p1, str(ck / "best.pt"), str(tmp_path / "p"), output="probs")
    pred, probs = out["predictions"], out["probabilities"]
    labels, test = np.load(f"{cora}/labels.npy"), np.load(f"{cora}/test_idx.npy")
    # The best model's predictions, in the dataset's own ids, give the job's test accuracy.
    assert pred.shape == labels.shape and probs.shape == (labels.size, int(labels.max()) + 1)
    assert np.mean(pred[test] == labels[test]) == pytest.approx(r["test_acc_at_best"], abs=1e-12)
    assert np.allclose(probs.sum(1), 1, atol=1e-5)
    emb = dsp.embed(cora_p1, str(ck / "best.pt"), str(tmp_path / "e"), nodes=[5, 0])
    assert emb.shape == (2, 16)
    with pytest.raises(dsp.IoError) as e:
        dsp.predict(cora_p1, str(ck / "best.pt"), str(tmp_path / "p"))
    # The CLI's "choose another --out, or give --overwrite", in the call's keywords.
    assert str(e.value) == (f"{tmp_path / 'p' / 'predictions.npy'} exists: remove it, choose "
                            "another out, or pass overwrite=True")
    with pytest.raises(dsp.InvalidArgument, match="nodes must be a 1-d array of integer"):
        dsp.embed(cora_p1, str(ck / "best.pt"), str(tmp_path / "e2"), nodes=[[1]])
    with pytest.raises(dsp.InvalidArgument, match="--node-type paper: .* is a homogeneous graph"):
        dsp.embed(cora_p1, str(ck / "best.pt"), str(tmp_path / "e3"), node_type="paper")


def test_info_explains_a_partition_directory(cora_p2):
    import subprocess
    r = subprocess.run([dsp.cli_path(), "info", cora_p2], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "parts        2 by metis" in r.stdout
    assert f"train with   mpirun -np 2 dsp train {cora_p2}" in r.stdout


def test_log_level_is_accepted_after_the_subcommand(cora_p2):
    import subprocess
    r = subprocess.run([dsp.cli_path(), "info", cora_p2, "--log-level", "warn"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([dsp.cli_path(), "info", cora_p2, "--log-level", "loud"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "loud" in r.stderr


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun not installed")
def test_eval_max_nodes_keeps_the_same_nodes_at_any_rank_count(cora_p1, cora_p2, monkeypatch,
                                                              capsys):
    """--eval-max-nodes 300: about 300 of Cora's 500 validation and 1000 test nodes (binomial,
    within 4 standard deviations), the same count at 1 and 2 ranks (a hash of the dataset id)."""
    for k, v in MPI_ENV.items():
        monkeypatch.setenv(k, v)
    counts = []
    for path, ranks in ((cora_p1, 1), (cora_p2, 2)):
        dsp.train({"path": path, "fanouts": [5, 5], "epochs": 1, "eval": "sampled",
                   "eval_max_nodes": 300}, ranks=ranks, mpirun=("mpirun", "--oversubscribe"))
        m = re.search(r"evaluation on (\d+) of the 500 validation and (\d+) of the 1000 test nodes",
                      capsys.readouterr().err)
        assert m, "no subsample line"
        counts.append((int(m.group(1)), int(m.group(2))))
    assert counts[0] == counts[1]
    valid, test = counts[0]
    assert abs(valid - 300) <= 4 * (500 * 0.6 * 0.4) ** 0.5
    assert abs(test - 300) <= 4 * (1000 * 0.3 * 0.7) ** 0.5


@pytest.mark.slow
def test_eval_auto_samples_where_full_would_read_more(tmp_path, capsys):
    """--eval auto: full-neighbour evaluation where it reads no more neighbour rows than sampling
    (or fewer than 10M), and the best model tested in full at the end where that reads at most 10
    sampled evaluations' rows (or 100M); a 300k-node graph (about 6M entries x 2 layers) evaluated on about 1000 nodes
    per split with fanouts 2,2 samples instead, and the log gives both estimates."""
    ds = str(tmp_path / "g")
    dsp.generate_community(ds, nodes=300000, edges=3000000, classes=4, features=8)
    dsp.train({"path": ds, "fanouts": [2, 2], "epochs": 1, "max_steps": 1,
               "eval_max_nodes": 1000})
    err = capsys.readouterr().err
    assert re.search(r"evaluation: sampled with fanouts 2,2 \(full neighbourhoods would read more: "
                     r".*; 1[12]\.\dM neighbour rows read against up to \d+\.\dk sampled\)", err), err
    # 12M rows is under 10 x 10M: the best model is still tested in full once at the end.
    assert "the best model is tested with full neighbourhoods at the end" in err, err
