// Training on low-precision feature partitions (dsp partition --feature-dtype): the job runs
// unchanged, its accuracy stays within a stated tolerance of the float32 partition's on a small
// community graph, and its result and metrics report the conversion's error beside the accuracy.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "graph/generate.hpp"
#include "layout/partition/partition.hpp"
#include "train/job.hpp"

namespace dsp {
namespace {
namespace fs = std::filesystem;

// Test accuracy may move by this much (absolute) between float32 and a narrower store: the
// rounding changes every batch's inputs a little, so the runs drift apart like two seeds would
// (measured here: at most 0.003 over the 6800 test nodes, relative RMS errors 2e-4 to 9e-3).
constexpr double kTolerance = 0.015;

struct Graph {
  Dataset ds;
  std::string root;
  Graph() {
    CommunityOptions co;
    co.num_nodes = 8000;
    co.num_edges = 60000;
    co.num_communities = 8;
    co.num_classes = 8;
    co.feature_dim = 16;
    co.seed = 12;
    ds = generate_community(co);
    root = (fs::temp_directory_path() / fmt::format("dsp_quant_train_{}", ::getpid())).string();
    fs::remove_all(root);
  }
  ~Graph() { fs::remove_all(root); }
};

JobResult train_on(const Graph& g, const std::string& dtype, const std::string& scale,
                   const std::string& normalize = "none", const std::string& metrics = "") {
  const std::string dir = g.root + "/" + dtype + scale + normalize;
  PartitionOptions o;
  o.verbose = false;
  o.overwrite = true;
  o.feature_dtype = parse_choice<FeatureDtype>(dtype);
  o.feature_scale = scale.empty() ? FeatureScale::kAuto : parse_choice<FeatureScale>(scale);
  partition_dataset(g.ds, o, dir);
  JobConfig c;
  c.rank.path = dir;
  c.rank.backend = "self";
  c.train.model.hidden = 32;
  c.train.num_threads = 1;
  c.train.normalize_features = parse_choice<FeatureNorm>(normalize);
  c.sampler.fanouts = {5, 5};
  c.batch_size = 256;
  c.epochs = 8;
  c.seed = 2;
  c.progress = false;
  c.metrics_file = metrics;
  return run_training(c);
}

TEST(QuantTrain, NarrowFeaturesTrainWithinToleranceAndReportTheirError) {
  const Graph g;
  const JobResult f32 = train_on(g, "float32", "");
  EXPECT_GT(f32.test_acc_at_best, 0.6);  // well above chance (1/8): the comparison means something
  EXPECT_EQ(f32.feature_dtype, "float32");
  EXPECT_EQ(f32.feature_rel_rms_error, 0.0);
  for (const auto& [dtype, scale] : {std::pair<const char*, const char*>{"bfloat16", ""},
                                     {"int8", "column"},
                                     {"int8", "row"},
                                     {"float16", ""}}) {
    SCOPED_TRACE(std::string(dtype) + " " + scale);
    const std::string metrics = g.root + "/metrics.jsonl";
    const JobResult r = train_on(g, dtype, scale, "none", metrics);
    std::printf("%s %s: test acc %.4f (float32 %.4f), relative RMS error %.3g\n", dtype, scale,
                r.test_acc_at_best, f32.test_acc_at_best, r.feature_rel_rms_error);
    EXPECT_NEAR(r.test_acc_at_best, f32.test_acc_at_best, kTolerance);
    EXPECT_EQ(r.feature_dtype, dtype);
    const PartitionMeta m = load_partition_meta(g.root + "/" + dtype + scale + "none");
    EXPECT_EQ(r.feature_rel_rms_error, m.feature_conversion.rel_rms_error);
    EXPECT_EQ(r.feature_max_abs_error, m.feature_conversion.max_abs_error);
    EXPECT_GT(r.feature_rel_rms_error, 0.0);
    EXPECT_EQ(r.to_json().at("feature_dtype"), dtype);
    std::ifstream in(metrics);
    std::string line, last;
    while (std::getline(in, line)) last = line;
    const nlohmann::json rec = nlohmann::json::parse(last);
    EXPECT_EQ(rec.at("feature_dtype"), dtype);
    EXPECT_EQ(rec.at("feature_rel_rms_error").get<double>(), r.feature_rel_rms_error);
  }
  // Standardised inputs: the column statistics are taken from the decoded int8 values.
  const JobResult s32 = train_on(g, "float32", "", "standard");
  const JobResult s8 = train_on(g, "int8", "row", "standard");
  EXPECT_NEAR(s8.test_acc_at_best, s32.test_acc_at_best, kTolerance);
}

}  // namespace
}  // namespace dsp
