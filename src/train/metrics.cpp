#include "train/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.hpp"

namespace dsp {

const Names<MetricKind>& names_of(MetricKind) {
  using M = MetricKind;
  static const Names<M> n(
      "metric", {{M::kAuto, "auto"}, {M::kAcc, "acc"}, {M::kF1, "f1"}, {M::kRocauc, "rocauc"}});
  return n;
}

float probability(float logit) { return 1.0f / (1.0f + std::exp(-logit)); }

double roc_auc(const float* scores, const int8_t* labels, int64_t n, int64_t stride) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return scores[a * stride] < scores[b * stride]; });
  // Sum of the positives' ranks (1-based), tied scores sharing their average rank: half-integers,
  // summed exactly in double for any split size dsp handles, so the AUC does not depend on the
  // order the rows arrived in.
  double rank_sum = 0;
  int64_t pos = 0;
  for (int64_t i = 0; i < n;) {
    int64_t j = i, p = 0;
    const float s = scores[order[i] * stride];
    for (; j < n && scores[order[j] * stride] == s; ++j) p += labels[order[j] * stride] != 0;
    rank_sum += static_cast<double>(p) * (static_cast<double>(i + 1 + j) / 2.0);
    pos += p;
    i = j;
  }
  const int64_t neg = n - pos;
  if (pos == 0 || neg == 0) return std::numeric_limits<double>::quiet_NaN();
  const double u = rank_sum - static_cast<double>(pos) * static_cast<double>(pos + 1) / 2.0;
  return u / (static_cast<double>(pos) * static_cast<double>(neg));
}

double mean_roc_auc(const std::vector<float>& scores, const std::vector<int8_t>& labels,
                    int64_t columns) {
  DSP_CHECK_ARG(columns > 0 && scores.size() == labels.size() &&
                    static_cast<int64_t>(scores.size()) % columns == 0,
                "ROC-AUC: {} scores and {} labels in {} columns", scores.size(), labels.size(),
                columns);
  const int64_t n = static_cast<int64_t>(scores.size()) / columns;
  double sum = 0;
  int64_t counted = 0;
  for (int64_t c = 0; c < columns; ++c) {
    const double a = roc_auc(scores.data() + c, labels.data() + c, n, columns);
    if (std::isnan(a)) continue;
    sum += a;
    ++counted;
  }
  return counted ? sum / counted : std::numeric_limits<double>::quiet_NaN();
}

double macro_f1(const std::vector<int64_t>& confusion, int64_t classes) {
  DSP_CHECK_ARG(static_cast<int64_t>(confusion.size()) == classes * classes,
                "macro-F1: a confusion matrix of {} entries for {} classes", confusion.size(),
                classes);
  double sum = 0;
  int64_t counted = 0;
  for (int64_t k = 0; k < classes; ++k) {
    int64_t fp = 0, fn = 0;
    for (int64_t j = 0; j < classes; ++j) {
      if (j == k) continue;
      fn += confusion[k * classes + j];
      fp += confusion[j * classes + k];
    }
    const int64_t tp = confusion[k * classes + k];
    if (tp + fp + fn == 0) continue;
    sum += 2.0 * static_cast<double>(tp) / static_cast<double>(2 * tp + fp + fn);
    ++counted;
  }
  return counted ? sum / counted : 0.0;
}

EvalTally::EvalTally(bool bce, int64_t columns) : bce_(bce), columns_(columns) {
  DSP_CHECK_ARG(columns > 0, "an evaluation needs at least one output column, got {}", columns);
  if (!bce) confusion_.assign(static_cast<size_t>(columns * columns), 0);
}

void EvalTally::add(const float* logits, int64_t n, const int64_t* labels) {
  if (bce_) {
    DSP_CHECK_ARG(columns_ == 1, "binary labels for a {}-column output", columns_);
    for (int64_t i = 0; i < n; ++i) {
      scores_.push_back(probability(logits[i]));
      labels_.push_back(static_cast<int8_t>(labels[i] != 0));
      correct_ += (logits[i] > 0) == (labels[i] != 0);
    }
    total_ += n;
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * columns_;
    const int64_t pred = std::max_element(row, row + columns_) - row;
    correct_ += pred == labels[i];
    if (columns_ == 2) {  // a 2-class softmax's p(class 1), as scikit-learn and OGB score it
      scores_.push_back(probability(row[1] - row[0]));
      labels_.push_back(static_cast<int8_t>(labels[i] == 1));
    }
    DSP_CHECK_ARG(labels[i] >= 0 && labels[i] < columns_, "label {} outside [0, {})", labels[i],
                  columns_);
    ++confusion_[labels[i] * columns_ + pred];
  }
  total_ += n;
}

void EvalTally::add(const float* logits, int64_t n, const int8_t* labels) {
  DSP_CHECK_ARG(bce_, "0/1 label rows are evaluated with --loss bce");
  const int64_t m = n * columns_;
  for (int64_t i = 0; i < m; ++i) {
    scores_.push_back(probability(logits[i]));
    labels_.push_back(static_cast<int8_t>(labels[i] != 0));
    correct_ += (logits[i] > 0) == (labels[i] != 0);
  }
  total_ += m;
}

void EvalTally::combine(Communicator& comm, const std::string& label) {
  if (comm.size() <= 1) return;
  OpOptions o;
  o.label = label;
  o.host_buffers = true;
  std::vector<int64_t> sums = {correct_, total_};
  sums.insert(sums.end(), confusion_.begin(), confusion_.end());
  comm.all_reduce(sums.data(), static_cast<int64_t>(sums.size()), DType::kInt64, ReduceOp::kSum, o);
  correct_ = sums[0];
  total_ = sums[1];
  std::copy(sums.begin() + 2, sums.end(), confusion_.begin());
  const int64_t columns = score_columns();
  if (columns == 0) return;
  // Every rank's rows to every rank: the row counts, then the rows padded to the largest count.
  const int64_t rows = static_cast<int64_t>(scores_.size()) / columns;
  std::vector<int64_t> counts(static_cast<size_t>(comm.size()));
  comm.all_gather(&rows, counts.data(), 1, DType::kInt64, o);
  const int64_t most = *std::max_element(counts.begin(), counts.end());
  if (most == 0) return;
  const int64_t width = most * columns;
  scores_.resize(static_cast<size_t>(width), 0.0f);
  labels_.resize(static_cast<size_t>(width), 0);
  std::vector<float> all_scores(static_cast<size_t>(width * comm.size()));
  std::vector<int8_t> all_labels(all_scores.size());
  comm.all_gather(scores_.data(), all_scores.data(), width, DType::kFloat32, o);
  comm.all_gather(labels_.data(), all_labels.data(), width, DType::kInt8, o);
  scores_.clear();
  labels_.clear();
  for (int p = 0; p < comm.size(); ++p) {
    const auto b = static_cast<std::ptrdiff_t>(p * width);
    const auto e = b + static_cast<std::ptrdiff_t>(counts[p] * columns);
    scores_.insert(scores_.end(), all_scores.begin() + b, all_scores.begin() + e);
    labels_.insert(labels_.end(), all_labels.begin() + b, all_labels.begin() + e);
  }
}

double EvalTally::accuracy() const {
  return total_ > 0 ? static_cast<double>(correct_) / static_cast<double>(total_) : 0.0;
}

double EvalTally::macro_f1() const {
  DSP_CHECK_ARG(!bce_, "macro-F1 is a multi-class metric (--loss ce)");
  return dsp::macro_f1(confusion_, columns_);
}

double EvalTally::roc_auc() const {
  DSP_CHECK_ARG(score_columns() > 0,
                "ROC-AUC needs per-seed scores: a binary or multi-label task (--loss bce) or two "
                "classes (--loss ce), not {}",
                columns_);
  if (scores_.empty()) return std::numeric_limits<double>::quiet_NaN();
  return mean_roc_auc(scores_, labels_, score_columns());
}

int64_t EvalTally::score_columns() const { return bce_ ? columns_ : columns_ == 2 ? 1 : 0; }

double EvalTally::metric(MetricKind m) const {
  if (m == MetricKind::kAcc) return accuracy();
  if (m == MetricKind::kF1) return macro_f1();
  if (m == MetricKind::kRocauc) return roc_auc();
  DSP_THROW("EvalTally::metric: {} is resolved by the job first", m);
}

std::vector<MetricKind> EvalTally::metric_names() const {
  using M = MetricKind;
  if (bce_) return {M::kAcc, M::kRocauc};
  if (columns_ == 2) return {M::kAcc, M::kF1, M::kRocauc};
  return {M::kAcc, M::kF1};
}

}  // namespace dsp
