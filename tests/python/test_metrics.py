"""dsp train --loss bce on a binary graph: the test ROC-AUC it reports equals scikit-learn's
roc_auc_score on the probabilities dsp predict writes for the test nodes (compared when
scikit-learn is importable, skipped visibly otherwise), and always the brute-force pair count."""
import json
import os
import subprocess

import numpy as np
import pytest

import dsp


def pair_count_auc(scores, labels):
    """P(s+ > s-) + P(s+ = s-) / 2 over every (positive, negative) pair."""
    pos, neg = scores[labels == 1], scores[labels == 0]
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return (2 * int(greater) + int(ties)) / (2 * len(pos) * len(neg))


@pytest.fixture(scope="module")
def binary_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("binary")
    data = str(tmp / "data")
    subprocess.run([dsp.cli_path(), "generate", "community", data, "--nodes", "3000", "--edges",
                    "24000", "--communities", "8", "--classes", "2", "--features", "16",
                    "--seed", "5"], check=True, capture_output=True)
    metrics = str(tmp / "metrics.jsonl")
    r = dsp.train({"path": data, "fanouts": [10, 5], "epochs": 6, "batch_size": 128,
                   "hidden": 32, "loss": "bce", "seed": 2, "threads": 1,
                   "checkpoint_dir": str(tmp / "ck"), "metrics_file": metrics})
    out = dsp.predict(data, str(tmp / "ck" / "best.pt"), str(tmp / "pred"), output="probs")
    test_idx = np.load(os.path.join(data, "test_idx.npy"))
    labels = np.load(os.path.join(data, "labels.npy"))[test_idx]
    probs = out["probabilities"][test_idx, 0]
    with open(metrics) as f:
        records = [json.loads(line) for line in f]
    return r, probs, labels, records


def test_reported_rocauc_is_the_pair_count_of_the_predictions(binary_run):
    r, probs, labels, records = binary_run
    assert r["metric"] == "rocauc" and r["test_acc_at_best"] >= 0.9
    assert pair_count_auc(probs, labels) == r["test_acc_at_best"]
    best = records[r["best_epoch"] - 1]
    assert best["test_rocauc"] == r["test_acc_at_best"] and best["metric"] == "rocauc"
    assert {"val_acc", "test_acc", "val_rocauc"} <= set(best)


def test_reported_rocauc_equals_scikit_learns(binary_run):
    metrics = pytest.importorskip("sklearn.metrics", reason="scikit-learn is not installed")
    r, probs, labels, _ = binary_run
    assert metrics.roc_auc_score(labels, probs) == pytest.approx(r["test_acc_at_best"], abs=1e-12)
