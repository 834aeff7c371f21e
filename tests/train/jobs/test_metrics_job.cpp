// dsp train's --loss and --metric end to end: a binary task trained with --loss bce reaches a
// ROC-AUC threshold, and the test ROC-AUC it reports equals the one recomputed by brute force
// from what dsp predict writes for the test nodes; --metric f1 picks by macro-F1; the
// combinations that cannot work are refused with one message each.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "error_of.hpp"
#include "graph/dataset.hpp"
#include "graph/generate.hpp"
#include "graph/import.hpp"
#include "graph/npy.hpp"
#include "train/job.hpp"
#include "train/metrics.hpp"
#include "train/predict.hpp"

namespace dsp {
namespace {
namespace fs = std::filesystem;

std::string temp_dir(const std::string& name) {
  auto p = fs::temp_directory_path() / fmt::format("dsp_metrics_{}_{}", name, ::getpid());
  fs::remove_all(p);
  return p.string();
}

// A community graph of `classes` classes written to a temporary directory.
std::string community_dir(const std::string& name, int classes, int64_t nodes) {
  CommunityOptions co;
  co.num_nodes = nodes;
  co.num_edges = 8 * nodes;
  co.num_communities = 8;
  co.num_classes = classes;
  co.feature_dim = 16;
  co.seed = 5;
  std::string d = temp_dir(name);
  write_dataset(generate_community(co), d);
  return d;
}

// A two-class community graph (dsp generate community --classes 2).
const std::string& binary_dir() {
  static const std::string dir = community_dir("binary", 2, 3000);
  return dir;
}

// A three-class one.
const std::string& three_class_dir() {
  static const std::string dir = community_dir("three", 3, 1000);
  return dir;
}

JobConfig binary_config() {
  JobConfig c;
  c.rank.path = binary_dir();
  c.rank.backend = "self";
  c.train.model.hidden = 32;
  c.train.num_threads = 1;
  c.sampler.fanouts = {10, 5};
  c.batch_size = 128;
  c.epochs = 6;
  c.seed = 2;
  c.progress = false;
  return c;
}

std::vector<nlohmann::json> records(const std::string& f) {
  std::vector<nlohmann::json> out;
  std::ifstream in(f);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// P(p+ > p-) + P(p+ = p-) / 2 over every pair of the test nodes (scikit-learn's roc_auc_score),
// p = column `column` of the [n, columns] probabilities.
double brute_force_test_auc(const Array& probs, const Dataset& ds, int64_t column = 0) {
  const int64_t columns = probs.dim(1);
  int64_t twice = 0, pairs = 0;
  const int64_t n = ds.test_idx.dim(0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t u = ds.test_idx.int_at(i);
    if (ds.labels.int_at(u) != 1) continue;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t v = ds.test_idx.int_at(j);
      if (ds.labels.int_at(v) != 0) continue;
      const float a = probs.data<float>()[u * columns + column],
                  b = probs.data<float>()[v * columns + column];
      twice += a > b ? 2 : a == b ? 1 : 0;
      ++pairs;
    }
  }
  return static_cast<double>(twice) / (2.0 * static_cast<double>(pairs));
}

TEST(Metrics, BinaryBceReportsThePredictedRocAuc) {
  JobConfig c = binary_config();
  c.train.model.loss = LossKind::kBce;
  c.checkpoint_dir = temp_dir("binary_ck");
  c.metrics_file = c.checkpoint_dir + "_metrics.jsonl";
  const JobResult r = run_training(c);
  ASSERT_EQ(r.eval, "full");
  EXPECT_EQ(r.metric, "rocauc");
  EXPECT_GE(r.test_acc_at_best, 0.9) << "best val ROC-AUC " << r.best_val_acc;
  const auto recs = records(c.metrics_file);
  ASSERT_EQ(recs.size(), 6u);
  for (const char* key : {"val_acc", "test_acc", "val_rocauc", "test_rocauc"}) {
    EXPECT_TRUE(recs.back().contains(key)) << key;
  }
  EXPECT_EQ(recs.back().at("metric"), "rocauc");
  EXPECT_FALSE(recs.back().contains("val_f1"));

  PredictConfig p;
  p.rank.path = binary_dir();
  p.rank.backend = "self";
  p.rank.threads = 1;
  p.checkpoint = c.checkpoint_dir + "/best.pt";
  p.out = temp_dir("binary_out");
  p.output = PredictOutput::kProbs;
  const PredictResult pr = run_predict(p);
  EXPECT_EQ(pr.width, 1);  // one logit: its sigmoid
  const Array probs = load_npy(p.out + "/probabilities.npy");
  ASSERT_EQ(probs.shape(), (std::vector<int64_t>{3000, 1}));
  const Dataset ds = load_dataset(binary_dir());
  EXPECT_EQ(brute_force_test_auc(probs, ds), r.test_acc_at_best);
  // predictions.npy: 1 where the probability is above one half.
  const Array pred = load_npy(p.out + "/predictions.npy");
  for (int64_t v = 0; v < 3000; v += 97) {
    EXPECT_EQ(pred.int_at(v), probs.data<float>()[v] > 0.5f ? 1 : 0) << v;
  }
  for (const std::string& d : {c.checkpoint_dir, c.metrics_file, p.out}) fs::remove_all(d);
}

// --metric rocauc with a softmax over two classes (--loss ce): the ROC-AUC of p(class 1), as
// scikit-learn and OGB score it, equal to the one recomputed from dsp predict's probabilities.
TEST(Metrics, TwoClassSoftmaxRocAuc) {
  JobConfig c = binary_config();
  c.metric = MetricKind::kRocauc;
  c.epochs = 3;
  c.checkpoint_dir = temp_dir("softmax_ck");
  const JobResult r = run_training(c);
  EXPECT_EQ(r.metric, "rocauc");
  EXPECT_GE(r.test_acc_at_best, 0.85);
  PredictConfig p;
  p.rank.path = binary_dir();
  p.rank.backend = "self";
  p.rank.threads = 1;
  p.checkpoint = c.checkpoint_dir + "/best.pt";
  p.out = temp_dir("softmax_out");
  p.output = PredictOutput::kProbs;
  run_predict(p);
  const Array probs = load_npy(p.out + "/probabilities.npy");
  ASSERT_EQ(probs.shape(), (std::vector<int64_t>{3000, 2}));
  // The two computations of p(class 1) round differently (float sigmoid of the logits'
  // difference, double softmax): ties may split, nothing more.
  EXPECT_NEAR(brute_force_test_auc(probs, load_dataset(binary_dir()), 1), r.test_acc_at_best, 1e-3);
  for (const std::string& d : {c.checkpoint_dir, p.out}) fs::remove_all(d);
}

// --metric f1 on class labels: the best epoch by macro-F1, every metric in the record.
TEST(Metrics, MacroF1PicksTheBestEpoch) {
  JobConfig c = binary_config();
  c.metric = MetricKind::kF1;
  c.epochs = 2;
  c.metrics_file = temp_dir("f1") + ".jsonl";
  const JobResult r = run_training(c);
  EXPECT_EQ(r.metric, "f1");
  const auto recs = records(c.metrics_file);
  ASSERT_EQ(recs.size(), 2u);
  double best = -1;
  for (const auto& rec : recs) {
    EXPECT_TRUE(rec.contains("val_acc") && rec.contains("test_f1")) << rec.dump();
    best = std::max(best, rec.at("val_f1").get<double>());
  }
  EXPECT_EQ(r.best_val_acc, best);
  EXPECT_GT(r.test_acc_at_best, 0.8);
  fs::remove_all(c.metrics_file);
}

void expect_refused(const JobConfig& c, const std::string& message) {
  try {
    run_training(c);
    FAIL() << "accepted: " << message;
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

TEST(Metrics, RefusesWhatCannotWork) {
  JobConfig c = binary_config();
  c.rank.path = three_class_dir();
  c.metric = MetricKind::kRocauc;
  c.train.model.loss = LossKind::kCe;
  expect_refused(c,
                 "--metric rocauc ranks per-seed scores: a binary task (a 2-class softmax's "
                 "p(class 1), or --loss bce) or a multi-label one; the dataset has 3 classes");
  c.rank.path = binary_dir();
  c.metric = MetricKind::kF1;
  c.train.model.loss = LossKind::kBce;
  expect_refused(c,
                 "--metric f1 is the multi-class macro-F1 (--loss ce); with --loss bce pick acc "
                 "or rocauc");
  EXPECT_EQ(test::error_of<InvalidArgument>([] {
              JobConfig::from_json({{"metric", "auc"}}, "job.json");
            }),
            "unknown metric 'auc' (auto, acc, f1, rocauc)");
  EXPECT_EQ(test::error_of<InvalidArgument>([] {
              JobConfig::from_json({{"loss", "mse"}}, "job.json");
            }),
            "unknown loss 'mse' (auto, ce, bce)");
  c.metric = MetricKind::kAuto;
  c.train.model.loss = LossKind::kCe;
  c.link.task = TaskKind::kLink;
  expect_refused(c,
                 "--loss ce with --task link: link prediction trains with binary cross-entropy "
                 "of the pairs' logits (--loss bce or auto)");
}

// --loss bce on a dataset of more than two classes is refused before training.
TEST(Metrics, BceNeedsTwoClasses) {
  CommunityOptions co;
  co.num_nodes = 400;
  co.num_edges = 2000;
  co.num_communities = 4;
  co.num_classes = 3;
  co.feature_dim = 4;
  const std::string dir = temp_dir("three");
  write_dataset(generate_community(co), dir);
  JobConfig c = binary_config();
  c.rank.path = dir;
  c.train.model.loss = LossKind::kBce;
  expect_refused(c,
                 "--loss bce on class labels is binary (one logit, label 1 positive): the "
                 "dataset has 3 classes, not 2; train with --loss ce");
  fs::remove_all(dir);
}

// A generated multi-label graph (dsp generate community --multilabel 6): --loss auto trains one
// logit per label with BCE, and the mean ROC-AUC over the labels (OGB's ogbn-proteins metric)
// picks the best epoch; full-neighbour and sampled evaluation both give it; dsp predict writes
// L sigmoid columns and L 0/1 predictions.
TEST(Metrics, MultiLabelGraphTrainsToItsRocAuc) {
  CommunityOptions co;
  co.num_nodes = 3000;
  co.num_edges = 24000;
  co.num_communities = 12;
  co.num_classes = 6;
  co.multilabel = 6;
  co.feature_dim = 16;
  co.train_frac = 0.5;
  co.valid_frac = 0.1;
  co.seed = 8;
  const std::string dir = temp_dir("multilabel");
  write_dataset(generate_community(co), dir);
  JobConfig c = binary_config();
  c.rank.path = dir;
  c.epochs = 10;
  c.checkpoint_dir = temp_dir("multilabel_ck");
  c.metrics_file = c.checkpoint_dir + "_metrics.jsonl";
  const JobResult r = run_training(c);
  ASSERT_EQ(r.eval, "full");
  EXPECT_EQ(r.metric, "rocauc");
  EXPECT_GE(r.test_acc_at_best, 0.9) << "best val " << r.best_val_acc;
  const auto recs = records(c.metrics_file);
  ASSERT_FALSE(recs.empty());
  EXPECT_TRUE(recs.back().contains("val_rocauc") && recs.back().contains("test_acc"));

  JobConfig s = c;
  s.eval = EvalMode::kSampled;
  s.checkpoint_dir.clear();
  s.metrics_file.clear();
  const JobResult sr = run_training(s);
  EXPECT_EQ(sr.eval, "sampled");
  EXPECT_GE(sr.test_acc_at_best, 0.9) << "sampled evaluation";

  PredictConfig p;
  p.rank.path = dir;
  p.rank.backend = "self";
  p.rank.threads = 1;
  p.checkpoint = c.checkpoint_dir + "/best.pt";
  p.out = temp_dir("multilabel_out");
  p.output = PredictOutput::kProbs;
  run_predict(p);
  EXPECT_EQ(load_npy(p.out + "/probabilities.npy").shape(), (std::vector<int64_t>{3000, 6}));
  const Array pred = load_npy(p.out + "/predictions.npy");
  EXPECT_EQ(pred.shape(), (std::vector<int64_t>{3000, 6}));
  EXPECT_EQ(pred.dtype(), DType::kInt8);

  JobConfig ce = s;
  ce.train.model.loss = LossKind::kCe;
  expect_refused(ce,
                 "--loss ce on multi-label labels (6 columns): a node may carry several labels; "
                 "train with --loss bce (or auto)");
  for (const std::string& d : {dir, c.checkpoint_dir, c.metrics_file, p.out}) fs::remove_all(d);
}

}  // namespace
}  // namespace dsp
