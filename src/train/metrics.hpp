#pragma once
// Node classification metrics as OGB's evaluators compute them, exact across ranks. Torch-free.
//
//  accuracy  correct / total: the argmax class (--loss ce); with --loss bce each label entry's
//            thresholded prediction (logit > 0) against its 0/1 label.
//  macro-F1  (--loss ce) the mean over classes of 2 tp / (2 tp + fp + fn), from the confusion
//            matrix summed over all ranks (int64, exact); classes with tp + fp + fn = 0 (absent
//            from both the labels and the predictions) are left out, as scikit-learn's
//            f1_score(average="macro") over unique_labels(y_true, y_pred).
//  ROC-AUC   (--loss bce) scikit-learn's roc_auc_score: the Mann-Whitney statistic with average
//            ranks for tied scores (the trapezoid of the ROC curve), P(s+ > s-) + P(s+ = s-) / 2.
//            Multi-label: the mean over label columns with both classes present, as OGB's
//            ogbn-proteins evaluator. Every rank's (score, label) rows are gathered to every rank
//            and the AUC is computed on their union: identical on all ranks and at any rank count
//            (not a mean of per-rank AUCs).
#include <cstdint>
#include <string>
#include <vector>

#include "ccc/communicator.hpp"
#include "core/choice.hpp"

namespace dsp {

// What picks the best epoch (dsp train --metric): auto is resolved by the job from the loss.
enum class MetricKind { kAuto, kAcc, kF1, kRocauc };
const Names<MetricKind>& names_of(MetricKind);

// A logit's sigmoid in float32: the score ROC-AUC ranks and the probability dsp predict writes,
// so an AUC recomputed from predict's output equals the one training reported (float32 rounding
// turns far-out logits into tied probabilities; both see the same ties).
float probability(float logit);

// ROC-AUC of `n` scores against 0/1 labels (entry i at scores[i * stride], labels[i * stride]).
// NaN when the labels hold a single class (or n is 0).
double roc_auc(const float* scores, const int8_t* labels, int64_t n, int64_t stride = 1);

// The mean ROC-AUC over the label columns of row-major [n x columns] scores and 0/1 labels that
// hold both classes. NaN when no column does.
double mean_roc_auc(const std::vector<float>& scores, const std::vector<int8_t>& labels,
                    int64_t columns);

// Macro-F1 of a [classes x classes] confusion matrix (row: true class, column: predicted).
double macro_f1(const std::vector<int64_t>& confusion, int64_t classes);

// What an evaluation collects from its seeds' outputs on one rank, until combine().
//  ce  (bce false): `columns` classes; argmax predictions into counts and the confusion matrix;
//                   with 2 classes also the softmax's p(class 1) and the labels (ROC-AUC, as
//                   scikit-learn's roc_auc_score and OGB score a two-class softmax).
//  bce (bce true):  `columns` label columns (1: binary); the logits and labels are kept (ROC-AUC),
//                   counts get each entry's thresholded prediction.
class EvalTally {
 public:
  EvalTally() = default;
  EvalTally(bool bce, int64_t columns);

  // Row-major logits [n x columns] of n seeds and their int64 labels (ce; bce binary: 0/1).
  void add(const float* logits, int64_t n, const int64_t* labels);
  // Row-major logits and 0/1 labels [n x columns] (bce).
  void add(const float* logits, int64_t n, const int8_t* labels);
  // Collective over `comm` (host buffers): sums the counts and the confusion matrix, gathers the
  // scores of every rank to every rank. Call once; the metrics below are then global.
  void combine(Communicator& comm, const std::string& label);

  bool bce() const { return bce_; }
  int64_t correct() const { return correct_; }
  int64_t total() const { return total_; }
  double accuracy() const;
  double macro_f1() const;  // ce
  double roc_auc() const;   // bce, 2-class ce: the (mean) ROC-AUC; NaN without both classes
  double metric(MetricKind m) const;  // acc, f1 or rocauc (not auto)
  // The metrics this tally computes: ce {acc, f1} (2 classes: and rocauc); bce {acc, rocauc}.
  std::vector<MetricKind> metric_names() const;

 private:
  int64_t score_columns() const;  // columns of scores_: bce's; 1 for a 2-class ce; else 0
  bool bce_ = false;
  int64_t columns_ = 0;
  int64_t correct_ = 0, total_ = 0;
  std::vector<int64_t> confusion_;  // ce
  std::vector<float> scores_;       // [rows x score_columns()]
  std::vector<int8_t> labels_;
};

}  // namespace dsp
