// `dsp train` end to end (run_training: partition on the fly, collective sampler, feature store,
// trainer, pipeline, evaluation, checkpoints) in one process.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.hpp"
#include "graph/dataset.hpp"
#include "graph/generate.hpp"
#include "graph/import.hpp"
#include "layout/partition.hpp"
#include "train/job.hpp"

namespace dsp {
namespace {
namespace fs = std::filesystem;

std::string temp_dir(const std::string& name) {
  auto p = fs::temp_directory_path() / fmt::format("dsp_job_{}_{}", name, ::getpid());
  fs::remove_all(p);
  return p.string();
}

const std::string& cora_dir() {
  static std::string dir = [] {
    std::string d = temp_dir("cora");
    OgbImportOptions o;
    o.name = "cora";
    write_dataset(import_ogb_raw(std::string(DSP_TEST_DATA_DIR) + "/cora", o), d);
    return d;
  }();
  return dir;
}

JobConfig cora_config() {
  JobConfig c;
  c.path = cora_dir();
  c.train.model.model = "sage";
  c.train.model.hidden = 32;
  c.train.lr = 0.01;
  c.train.weight_decay = 5e-4;
  c.train.num_threads = 1;
  c.fanouts = {10, 10};
  c.eval_fanouts = {25, 25};
  c.batch_size = 16;
  c.epochs = 20;
  c.backend = "self";
  c.progress = false;
  return c;
}

TEST(Job, CoraGraphSageThroughThePipelineReachesThePublishedBand) {
  JobConfig c = cora_config();
  c.seed = 1;
  JobResult r = run_training(c);
  EXPECT_EQ(r.epochs_run, 20);
  EXPECT_GE(r.test_acc_at_best, 0.78) << "best val " << r.best_val_acc;
  EXPECT_GT(r.cache_hit_rate, 0.0);
}

TEST(Job, CommunityGraphReachesItsAttainableAccuracy) {
  CommunityOptions co;
  co.num_nodes = 20000;
  co.num_edges = 200000;
  co.num_communities = 16;
  co.num_classes = 8;
  co.feature_dim = 32;
  co.seed = 4;
  Dataset ds = generate_community(co);
  double bound = ds.meta.extra.at("accuracy_bound").get<double>();
  std::string dir = temp_dir("community");
  write_dataset(ds, dir);
  JobConfig c;
  c.path = dir;
  c.train.model.hidden = 64;
  c.train.num_threads = 1;
  c.fanouts = {10, 5};
  c.batch_size = 256;
  c.epochs = 4;
  c.backend = "self";
  c.progress = false;
  JobResult r = run_training(c);
  // Features alone give about half of this (the generator's test); the graph must add the rest.
  EXPECT_GE(r.test_acc_at_best, 0.9 * bound) << "bound " << bound;
  fs::remove_all(dir);
}

TEST(Job, ResumeEqualsUninterruptedTraining) {
  JobConfig c = cora_config();
  c.epochs = 4;
  c.eval_every = 0;
  c.seed = 7;
  c.checkpoint_dir = temp_dir("ckpt_a");
  JobResult straight = run_training(c);

  JobConfig first = c;
  first.checkpoint_dir = temp_dir("ckpt_b");
  first.epochs = 2;
  run_training(first);
  JobConfig second = first;
  second.epochs = 4;
  second.resume = true;
  JobResult resumed = run_training(second);
  EXPECT_EQ(resumed.epochs_run, 2);
  EXPECT_EQ(resumed.final_loss, straight.final_loss);  // bit-identical, not approximately
  fs::remove_all(c.checkpoint_dir);
  fs::remove_all(first.checkpoint_dir);
}

// PaGraph's sizing after the first batch: no memory left for a cache caches nothing, ample memory
// caches the whole part (one rank: every gathered row then comes from the cache).
TEST(Job, CacheSizedAfterTheFirstBatchFromTheMemoryLeft) {
  JobConfig c = cora_config();
  c.epochs = 1;
  c.cache_auto = true;
  c.cache_memory = 1;
  EXPECT_EQ(run_training(c).cache_hit_rate, 0.0);
  c.cache_memory = int64_t{1} << 40;
  EXPECT_EQ(run_training(c).cache_hit_rate, 1.0);
  c.cache_ratio = 0.1;
  try {
    run_training(c);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("give it or --cache-ratio, not both"), std::string::npos)
        << e.what();
  }
}

TEST(Job, BadInput) {
  JobConfig c = cora_config();
  c.epochs = 1;
  c.train.model.model = "gin";
  try {
    run_training(c);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown model 'gin'"), std::string::npos) << e.what();
  }
  c = cora_config();
  c.layers = 3;
  try {
    run_training(c);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("--fanouts has 2 entries but the model has 3 layers"),
              std::string::npos)
        << e.what();
  }
  c = cora_config();
  c.fanouts = {10, 0};
  EXPECT_THROW(run_training(c), InvalidArgument);
  c = cora_config();
  c.path = temp_dir("nothing_here");
  try {
    run_training(c);
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("neither a partition directory"), std::string::npos);
  }

  // Resuming a checkpoint of another model shape.
  c = cora_config();
  c.epochs = 1;
  c.checkpoint_dir = temp_dir("ckpt_shape");
  run_training(c);
  c.train.model.hidden = 64;
  c.epochs = 2;
  c.resume = true;
  try {
    run_training(c);
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("shape"), std::string::npos) << e.what();
  }
  // Resuming a checkpoint with a partition of another dataset.
  CommunityOptions co;
  co.num_nodes = 2708;
  co.num_edges = 5000;
  co.feature_dim = 1433;
  co.num_classes = 7;
  Dataset other = generate_community(co);
  std::string other_dir = temp_dir("other");
  write_dataset(other, other_dir);
  c.path = other_dir;
  c.train.model.hidden = 32;
  try {
    run_training(c);
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("trained on another dataset"), std::string::npos)
        << e.what();
  }
  // A partition directory made for another number of ranks.
  std::string part = temp_dir("part2");
  PartitionOptions po;
  po.parts = 2;
  po.verbose = false;
  partition_dataset(load_dataset(cora_dir()), po, part);
  c = cora_config();
  c.path = part;
  try {
    run_training(c);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("has 2 parts but the job has 1 ranks"), std::string::npos)
        << e.what();
  }
  fs::remove_all(part);
  fs::remove_all(other_dir);
  fs::remove_all(c.checkpoint_dir);
}

// Removes the shared Cora dataset directory after all tests.
class Cleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(fs::temp_directory_path() / fmt::format("dsp_job_cora_{}", ::getpid()), ec);
  }
};
const auto* const kCleanup = ::testing::AddGlobalTestEnvironment(new Cleanup);

}  // namespace
}  // namespace dsp
