// The metric module (train/metrics.hpp) against references: ROC-AUC against a brute-force count
// over every (positive, negative) pair on random data with many ties, the multi-label mean over
// the columns that hold both classes, macro-F1 against a confusion matrix computed by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ccc/communicator.hpp"
#include "cora_batches.hpp"
#include "core/error.hpp"
#include "train/metrics.hpp"
#include "train/trainer.hpp"

namespace dsp {
namespace {

// P(s+ > s-) + P(s+ = s-) / 2 over every pair: what scikit-learn's roc_auc_score computes.
double brute_force_auc(const std::vector<float>& s, const std::vector<int8_t>& y) {
  int64_t twice = 0, pairs = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!y[i]) continue;
    for (size_t j = 0; j < s.size(); ++j) {
      if (y[j]) continue;
      twice += s[i] > s[j] ? 2 : s[i] == s[j] ? 1 : 0;
      ++pairs;
    }
  }
  return static_cast<double>(twice) / (2.0 * static_cast<double>(pairs));
}

TEST(Metrics, RocAucEqualsThePairCountWithTies) {
  for (int seed = 0; seed < 20; ++seed) {
    std::mt19937_64 g(seed);
    const int n = 1 + static_cast<int>(g() % 400);
    const int levels = 1 + static_cast<int>(g() % 12);  // few distinct scores: many ties
    std::vector<float> s(n);
    std::vector<int8_t> y(n);
    for (int i = 0; i < n; ++i) {
      y[i] = static_cast<int8_t>(g() % 3 == 0);
      s[i] = static_cast<float>(g() % levels) * 0.25f - 1.0f +
             (y[i] ? 0.2f : 0.0f) * static_cast<float>(g() % 2);
    }
    y[0] = 1;
    if (n > 1) y[1] = 0;
    const double a = roc_auc(s.data(), y.data(), n);
    if (n == 1) {
      EXPECT_TRUE(std::isnan(a));
      continue;
    }
    // The rank sum is exact, so the two agree to the last bit.
    EXPECT_EQ(a, brute_force_auc(s, y)) << "seed " << seed << " n " << n;
  }
}

TEST(Metrics, RocAucOfKnownCases) {
  const std::vector<float> s = {0.1f, 0.4f, 0.35f, 0.8f};
  const std::vector<int8_t> y = {0, 0, 1, 1};
  EXPECT_DOUBLE_EQ(roc_auc(s.data(), y.data(), 4), 0.75);  // scikit-learn's documented example
  const std::vector<float> tied = {0.5f, 0.5f, 0.5f};
  const std::vector<int8_t> ty = {1, 0, 0};
  EXPECT_DOUBLE_EQ(roc_auc(tied.data(), ty.data(), 3), 0.5);
  const std::vector<int8_t> one = {1, 1, 1};
  EXPECT_TRUE(std::isnan(roc_auc(tied.data(), one.data(), 3)));
}

// OGB's ogbn-proteins evaluator: the mean over label columns with both classes; a column of one
// class is left out.
TEST(Metrics, MeanRocAucSkipsColumnsWithOneClass) {
  std::mt19937_64 g(7);
  const int n = 60, L = 4;
  std::vector<float> s(n * L);
  std::vector<int8_t> y(n * L);
  for (int i = 0; i < n * L; ++i) {
    s[i] = static_cast<float>(g() % 9);
    y[i] = static_cast<int8_t>(g() % 2);
  }
  for (int i = 0; i < n; ++i) y[i * L + 2] = 1;  // column 2: positives only
  double sum = 0;
  for (int c : {0, 1, 3}) {
    std::vector<float> sc;
    std::vector<int8_t> yc;
    for (int i = 0; i < n; ++i) {
      sc.push_back(s[i * L + c]);
      yc.push_back(y[i * L + c]);
    }
    sum += brute_force_auc(sc, yc);
  }
  EXPECT_DOUBLE_EQ(mean_roc_auc(s, y, L), sum / 3);
}

// y_true 0 0 1 1 2 2 2, y_pred 0 1 1 1 2 0 2: per class F1 2*1/(2+1+1) = 0.5, 2*2/(4+1) = 0.8
// and 2*2/(4+1) = 0.8; scikit-learn's f1_score(average="macro") gives 0.7. A fourth class absent
// from both the labels and the predictions does not count.
TEST(Metrics, MacroF1OfAHandComputedConfusionMatrix) {
  const std::vector<int64_t> truth = {0, 0, 1, 1, 2, 2, 2};
  const std::vector<int64_t> pred = {0, 1, 1, 1, 2, 0, 2};
  for (int64_t classes : {3, 4}) {
    EvalTally t(false, classes);
    std::vector<float> logits(truth.size() * classes, 0.0f);
    for (size_t i = 0; i < pred.size(); ++i) logits[i * classes + pred[i]] = 1.0f;
    t.add(logits.data(), static_cast<int64_t>(truth.size()), truth.data());
    EXPECT_DOUBLE_EQ(t.macro_f1(), 0.7) << classes << " classes";
    EXPECT_DOUBLE_EQ(t.accuracy(), 5.0 / 7.0);
    EXPECT_DOUBLE_EQ(t.metric(MetricKind::kF1), 0.7);
    EXPECT_EQ(t.metric_names(), (std::vector<MetricKind>{MetricKind::kAcc, MetricKind::kF1}));
  }
  // Two classes: also the ROC-AUC of the softmax's p(class 1).
  EvalTally two(false, 2);
  const std::vector<float> logits2 = {0, 1, 2, 0, 0, 3, 1, 0};  // p(1) ~ .73, .12, .95, .27
  const std::vector<int64_t> y2 = {1, 0, 0, 1};
  two.add(logits2.data(), 4, y2.data());
  EXPECT_EQ(two.metric_names(),
            (std::vector<MetricKind>{MetricKind::kAcc, MetricKind::kF1, MetricKind::kRocauc}));
  // Positives .73, .27 against negatives .12, .95: two of the four pairs ranked right.
  EXPECT_DOUBLE_EQ(two.roc_auc(), 0.5);
  EXPECT_DOUBLE_EQ(two.accuracy(), 0.5);  // argmax 1, 0, 0, 0
  EXPECT_THROW(EvalTally(false, 3).roc_auc(), InvalidArgument);
  std::vector<int64_t> confusion = {1, 1, 0, 0, 2, 0, 1, 0, 2};
  EXPECT_DOUBLE_EQ(macro_f1(confusion, 3), 0.7);
}

// --loss bce: a binary tally ranks the logits' sigmoids (as dsp predict writes them) and counts
// each thresholded prediction; a multi-label tally does so per label entry.
TEST(Metrics, BceTallies) {
  EvalTally b(true, 1);
  const std::vector<float> logits = {-2.0f, 0.5f, 1.0f, -0.5f, 3.0f};
  const std::vector<int64_t> y = {0, 0, 1, 1, 1};
  b.add(logits.data(), 5, y.data());
  EXPECT_EQ(b.correct(), 3);  // -2 -> 0 right, 0.5 -> 1 wrong, 1 right, -0.5 wrong, 3 right
  EXPECT_EQ(b.total(), 5);
  std::vector<float> p;
  for (float x : logits) p.push_back(probability(x));
  const std::vector<int8_t> y8 = {0, 0, 1, 1, 1};
  EXPECT_EQ(b.roc_auc(), brute_force_auc(p, y8));
  EXPECT_DOUBLE_EQ(b.roc_auc(), 5.0 / 6.0);
  EXPECT_EQ(b.metric_names(), (std::vector<MetricKind>{MetricKind::kAcc, MetricKind::kRocauc}));
  EXPECT_THROW(b.macro_f1(), InvalidArgument);

  EvalTally m(true, 2);
  const std::vector<float> ml = {1, -1, 2, 1, -3, 0.5f};
  const std::vector<int8_t> my = {1, 0, 0, 1, 0, 0};
  m.add(ml.data(), 3, my.data());
  EXPECT_EQ(m.total(), 6);
  EXPECT_EQ(m.correct(), 4);  // row 1 column 0 (2 > 0 for 0) and row 2 column 1 wrong
  // Column 0: scores 1, 2, -3 for labels 1, 0, 0: AUC 1/2; column 1: -1, 1, 0.5 for 0, 1, 0: 1.
  EXPECT_DOUBLE_EQ(m.roc_auc(), 0.75);
  try {
    parse_choice<MetricKind>("mrr");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), "unknown metric 'mrr' (auto, acc, f1, rocauc)");
  }
}

// Cora's classes as multi-label rows (batches built by hand): column k is "class k", column 7
// "class >= 4", so a node carries two labels. --loss bce trains one logit per column, and the
// mean test ROC-AUC over the columns reaches a threshold.
LoadedBatch multilabel_batch(const test::CoraData& d, SampledBatch sb) {
  LoadedBatch lb = test::load_batch(d, std::move(sb));
  constexpr int64_t L = 8;
  lb.label_columns = L;
  for (int64_t y : lb.labels) {
    for (int64_t k = 0; k < 7; ++k) lb.label_matrix.push_back(static_cast<int8_t>(y == k));
    lb.label_matrix.push_back(static_cast<int8_t>(y >= 4));
  }
  lb.labels.clear();
  return lb;
}

TEST(Metrics, MultiLabelTrainsWithBce) {
  const test::CoraData& d = test::cora();
  auto comm = make_communicator("self");
  TrainConfig cfg = test::cora_config("sage", 3);
  cfg.model.loss = LossKind::kBce;
  cfg.model.out_dim = 8;
  Trainer t(cfg, *comm);
  const std::vector<int> fanouts = {10, 10};
  for (int64_t epoch = 0; epoch < 40; ++epoch) {
    auto batches = test::epoch_batches(d.train, 16, 3, epoch, true);
    EvalCounts train;
    for (size_t b = 0; b < batches.size(); ++b) {
      t.train_step(multilabel_batch(d, test::sample_batch(d.ds.graph, batches[b], fanouts, 3, epoch,
                                                          static_cast<int64_t>(b))),
                   &train);
    }
    EXPECT_EQ(train.total, static_cast<int64_t>(d.train.size()) * 8);  // every label entry
  }
  EvalTally tally = t.eval().new_tally();
  auto batches = test::epoch_batches(d.test, 1000, 0, 0, false);
  for (size_t b = 0; b < batches.size(); ++b) {
    t.eval().eval_batch(multilabel_batch(d, test::sample_batch(d.ds.graph, batches[b], {-1, -1}, 4,
                                                               0, static_cast<int64_t>(b))),
                        &tally);
  }
  tally.combine(*comm, "test");
  EXPECT_EQ(tally.total(), static_cast<int64_t>(d.test.size()) * 8);
  EXPECT_GE(tally.roc_auc(), 0.9) << "accuracy " << tally.accuracy();
  EXPECT_GE(tally.accuracy(), 0.85);

  // The batch's labels against the loss: multi-label rows need bce, bce class ids are binary.
  TrainConfig ce = test::cora_config("sage", 3);
  ce.model.loss = LossKind::kCe;
  ce.model.out_dim = 8;
  Trainer tc(ce, *comm);
  const LoadedBatch ml =
      multilabel_batch(d, test::sample_batch(d.ds.graph, batches[0], fanouts, 3, 0, 0));
  try {
    tc.train_step(ml);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()),
              "the labels are multi-label (8 columns): train with --loss bce (or auto), not "
              "--loss ce");
  }
  TrainConfig bin = test::cora_config("sage", 3);
  bin.model.loss = LossKind::kBce;
  bin.model.out_dim = 1;
  Trainer tb(bin, *comm);
  try {
    tb.train_step(
        test::load_batch(d, test::sample_batch(d.ds.graph, batches[0], fanouts, 3, 0, 0)));
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("is outside [0, 2)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dsp
