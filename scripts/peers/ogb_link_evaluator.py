"""The values OGB's link evaluator (ogb.linkproppred.Evaluator, ogb 1.3.6) gives on the fixed
score arrays of tests/train/test_link.cpp (LinkMetrics.EqualOgbsEvaluatorOnFixedScores), which
pins them: dsp's Hits@K and MRR must equal OGB's on the same scores, ties included; and the
ROC-AUC PyG's and DGL's link examples report (scikit-learn's roc_auc_score of the positives,
label 1, and the negatives, label 0; per positive: the mean of each positive's against its own).

  shared negatives (ogbl-collab/ppa/ddi): Hits@K = Evaluator("ogbl-collab") with K set, MRR =
      Evaluator("ogbl-citation2") with every positive ranked against the same negatives;
  per-positive negatives (ogbl-citation2): MRR and Hits@1/3/10 = the means of its lists.
Scores are multiples of 1/4 (exact in float32), so ties are many. Run with a Python that has
torch and ogb (e.g. the DGL venv of scripts/peers: pip install ogb six outdated scikit-learn pandas).
"""
import numpy as np
import torch
from ogb.linkproppred import Evaluator
from sklearn.metrics import roc_auc_score


def auc(pos, neg):
    return roc_auc_score([1] * len(pos) + [0] * len(neg), list(pos) + list(neg))


def shared_scores():
    pos = [((i * 7) % 11) / 4.0 - 1.0 for i in range(12)]
    neg = [((j * 5) % 13) / 4.0 - 1.5 for j in range(20)]
    return pos, neg


def per_positive_scores(k=8):
    pos = [((i * 3) % 7) / 4.0 - 0.5 for i in range(6)]
    neg = [[((i * 5 + j * 3) % 9) / 4.0 - 0.75 for j in range(k)] for i in range(6)]
    return pos, neg


def main():
    pos, neg = shared_scores()
    ev = Evaluator("ogbl-collab")
    for k in (1, 3, 10, 20):
        ev.K = k
        r = ev.eval({"y_pred_pos": torch.tensor(pos), "y_pred_neg": torch.tensor(neg)})
        print(f"shared hits@{k} {r[f'hits@{k}']:.17g}")
    mrr = Evaluator("ogbl-citation2").eval(
        {"y_pred_pos": torch.tensor(pos), "y_pred_neg": torch.tensor([neg] * len(pos))})
    print(f"shared mrr {mrr['mrr_list'].double().mean().item():.17g}")
    print(f"shared auc {auc(pos, neg):.17g}")
    pos, neg = per_positive_scores()
    r = Evaluator("ogbl-citation2").eval(
        {"y_pred_pos": torch.tensor(pos), "y_pred_neg": torch.tensor(neg)})
    for key in ("hits@1", "hits@3", "hits@10", "mrr"):
        print(f"per_positive {key} {r[key + '_list'].double().mean().item():.17g}")
    print(f"per_positive auc {np.mean([auc([p], n) for p, n in zip(pos, neg)]):.17g}")


if __name__ == "__main__":
    main()
