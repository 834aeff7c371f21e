// The job option table (train/job_options.hpp): each option declared once, and `dsp train`'s
// flags, --help and --config keys made from it.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/error.hpp"
#include "graph/io_test_util.hpp"
#include "train/job.hpp"
#include "train/job_options.hpp"

namespace dsp {
namespace {
using iotest::run_cli;
using iotest::TempDir;

// A config whose every key differs from its default: a key that to_json or from_json dropped, or
// read into the wrong field, shows up as a difference.
JobConfig unusual_config() {
  JobConfig c;
  c.rank.path = "/data/x";
  c.train.model.model = ModelKind::kGat;
  c.train.model.hidden = 7;
  c.sampler.fanouts = {3, 2};
  c.layers = 2;
  c.eval_fanouts = {4, 4};
  c.batch_size = 9;
  c.eval_batch_size = 99;
  c.eval = EvalMode::kSampled;
  c.epochs = 3;
  c.max_steps = 5;
  c.train.lr = 0.5;
  c.train.weight_decay = 0.25;
  c.train.optimizer = OptimizerKind::kSgd;
  c.train.momentum = 0.75;
  c.train.model.dropout = 0.125;
  c.train.model.heads = 3;
  c.train.model.out_heads = 2;
  c.rank.cache_policy = "random";
  c.rank.cache_ratio = 0.5;
  c.cache_auto = true;
  c.rank.cache_memory = 12345;
  c.rank.fifo_rows = 11;
  c.rank.fifo_shared_rows = 22;
  c.pipeline = PipelineMode::kPipelined;
  c.roles = JobConfig::kRolesAuto;
  c.roles_switch = RoleSwitch::kAlways;
  c.read_ahead = 8;
  c.sampler.kernel = SampleKernel::kTurbo;
  c.sampler.cuda_graphs = true;
  c.sampler.kind = SamplerKind::kLabor;  // --sampler labor
  c.sampler.labor_importance = 2;
  c.sampler.labor_layer_dependency = true;
  c.sampler.labor_batch_dependency = 3;
  c.sampler.layer_draws = LayerDraws::kWithout;
  c.sampler.temporal = TemporalKind::kRecent;
  c.ccc = false;
  c.eval_every = 2;
  c.patience = 5;
  c.train.normalize_features = FeatureNorm::kStandard;
  c.train.lr_schedule = LrScheduleKind::kStep;
  c.train.lr_gamma = 0.5;
  c.train.lr_step_size = 7;
  c.train.lr_patience = 3;
  c.train.tf32 = false;
  c.rank.partition_method = PartitionMethod::kRandom;
  c.checkpoint_dir = "/ck";
  c.checkpoint_every = 4;
  c.keep_checkpoints = 5;
  c.resume = true;
  c.resume_auto = true;  // "resume": "auto"
  c.seed = uint64_t{1} << 40;
  c.metrics_file = "/m.jsonl";
  c.metric = MetricKind::kF1;
  c.train.model.loss = LossKind::kCe;
  c.init_from = "/init";
  c.eval_max_nodes = 77;
  c.rank.log_file = "/log.txt";
  c.train.num_threads = 6;
  c.rank.backend = "mpi";
  c.rank.device = Device::cuda(1);
  c.rank.transport = Transport::kMpi;
  c.train.model.predictor = PredictorKind::kMlp;
  c.link.task = TaskKind::kLink;
  c.link.neg_ratio = 5;
  c.link.negatives = NegativeKind::kUnigram;
  c.link.exclude = ExcludeKind::kSelf;
  c.link.hits_k = {10, 100};
  c.link.recall_k = {20, 200};
  c.embedding.dim = 16;
  c.embedding.optimizer = EmbeddingOptimizer::kAdagrad;
  c.embedding.lr = 0.125;
  c.rank.topology_memory = 1 << 20;
  c.rank.emulate_device = true;
  c.rank.memory_budget = int64_t{3} << 30;
  c.seed_order.order = SeedOrder::kBfs;
  c.seed_order.bfs_sequences = 8;
  c.preaggregate = true;
  c.overwrite = true;
  return c;
}

TEST(JobOptions, EveryKeyRoundTripsThroughAConfigFile) {
  const JobConfig c = unusual_config();
  const nlohmann::json j = c.to_json();
  const nlohmann::json defaults = JobConfig().to_json();
  std::set<std::string> keys;
  for (const JobOption& o : job_options()) {
    if (o.key.empty()) continue;
    EXPECT_TRUE(keys.insert(o.key).second) << "key declared twice: " << o.key;
    EXPECT_NE(j.at(o.key), defaults.at(o.key))
        << "unusual_config leaves '" << o.key << "' at its default";
  }
  EXPECT_EQ(keys.size(), j.size());
  EXPECT_EQ(JobConfig::from_json(j, "cfg.json").to_json(), j);
}

TEST(JobOptions, FlagsAreTheTableAndTheirTextIsCheckedOnce) {
  TempDir tmp("job_options");
  auto help = run_cli("train --help", tmp);
  ASSERT_EQ(help.exit_code, 0) << help.err;
  std::set<std::string> flags;
  for (const JobOption& o : job_options()) {
    if (o.flag.empty()) continue;
    EXPECT_TRUE(flags.insert(o.flag).second) << "flag declared twice: " << o.flag;
    EXPECT_NE(help.out.find("  " + o.flag + " "), std::string::npos) << o.flag << " not in --help";
    EXPECT_NE(help.out.find(o.help.substr(0, 30)), std::string::npos) << o.flag << "'s help";
  }
  // A value given as text is read one way for every option of its type, each message once.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--epochs 3x", "--epochs: '3x' is not an integer"},
      {"--lr fast", "--lr: 'fast' is not a number"},
      {"--fanouts 10,x", "--fanouts: '10,x' is not a comma-separated list of integers"},
      {"--heads 99999999999", "--heads: 99999999999 is out of range"},
      {"--ccc maybe", "--ccc must be on or off, got 'maybe'"},
      {"--roles some", "--roles must be auto or a number of sampler-only ranks, got 'some'"},
      {"--read-ahead 2000",
       "--read-ahead must be auto or a number of batches in [0, 1024], got '2000'"},
      {"--seed -1", "--seed: must be a non-negative integer, got '-1'"},
      {"--epochs 0", "--epochs must be at least 1, got 0: a run trains"},
  };
  for (const auto& [args, message] : bad) {
    SCOPED_TRACE(args);
    auto r = run_cli("train /nonexistent " + args, tmp);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.err, "dsp: error: " + message + "\n");
  }
}

TEST(JobOptions, ConfigErrorsNameTheFileAndKey) {
  auto error_of = [](const std::string& text) {
    try {
      JobConfig::from_json(nlohmann::json::parse(text), "cfg.json");
    } catch (const FormatError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of(R"({"epoch": 3})"), "cfg.json: unknown key 'epoch'");
  EXPECT_EQ(error_of(R"({"no_progress": true})"), "cfg.json: unknown key 'no_progress'");
  EXPECT_EQ(error_of(R"({"epochs": "3"})"), "cfg.json: key 'epochs' has the wrong type");
  EXPECT_EQ(error_of(R"({"seed": -1})"), "cfg.json: 'seed' must be a non-negative integer");
  EXPECT_EQ(error_of("[1]"), "cfg.json: expected a JSON object");
}

}  // namespace
}  // namespace dsp
