// dsp train on a heterogeneous partition: R-GCN and hsage on the generated MAG-shaped graph
// (dsp generate hetero) reach its accuracy bound within a few points at one rank, the loader
// gives per-type rows, and what does not apply is refused with one message each.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "error_of.hpp"
#include "graph/generate.hpp"
#include "graph/generate_hetero.hpp"
#include "graph/hetero.hpp"
#include "layout/partition/partition.hpp"
#include "train/job.hpp"

namespace dsp {
namespace {
namespace fs = std::filesystem;
using test::error_of;

// 3000 papers (32 features, 5 classes; 900 train, 300 valid), 2000 authors, 100 institutions and
// 50 fields without features, the reverse relations: the bound is 0.920, features alone 0.515.
HeteroGenOptions small_mag() {
  HeteroGenOptions o;
  o.papers = 3000;
  o.authors = 2000;
  o.institutions = 100;
  o.fields = 50;
  o.classes = 5;
  o.feature_dim = 32;
  o.train_frac = 0.3;
  o.valid_frac = 0.1;
  o.seed = 1;
  return o;
}

struct HeteroGraph {
  HeteroDataset ds;
  std::string dir;
  HeteroGraph() {
    ds = generate_hetero(small_mag());
    dir = (fs::temp_directory_path() / fmt::format("dsp_hetero_train_{}", ::getpid())).string();
    PartitionOptions o;
    o.verbose = false;
    o.overwrite = true;
    partition_dataset(hetero_union(ds), o, dir);
  }
  ~HeteroGraph() { fs::remove_all(dir); }
  double bound() const { return ds.extra.at("accuracy_bound").get<double>(); }
};

const HeteroGraph& graph() {
  static const HeteroGraph g;
  return g;
}

JobConfig job(const std::string& model) {
  JobConfig c;
  c.rank.path = graph().dir;
  c.rank.backend = "self";
  c.train.model.model = parse_choice<ModelKind>(model);
  c.train.model.hidden = 64;
  c.train.num_threads = 1;
  c.sampler.fanouts = {10, 10};
  c.batch_size = 128;
  c.epochs = 10;
  c.seed = 1;
  c.progress = false;
  return c;
}

// Measured: rgcn 0.902, hsage 0.866 of the 0.920 bound (features alone 0.515).
TEST(HeteroTrain, RgcnAndHsageReachTheBound) {
  for (const std::string model : {"rgcn", "hsage"}) {
    const JobResult r = run_training(job(model));
    std::printf("[hetero] %s ranks=1 test=%.4f (bound %.3f)\n", model.c_str(), r.test_acc_at_best,
                graph().bound());
    EXPECT_EQ(r.eval, "sampled");
    EXPECT_GT(r.test_acc_at_best, graph().bound() - 0.07) << model;
    EXPECT_GT(r.feature_bytes_per_batch, 0) << "the papers' rows come through their store";
  }
}

// Per-relation fanouts (writes and cites only in the last layer: --fanouts text) train as well.
TEST(HeteroTrain, PerRelationFanouts) {
  JobConfig c = job("rgcn");
  parse_fanouts_option("writes:10,cites:10,has_topic:5;*:5", c.sampler.fanouts,
                       c.sampler.relation_fanouts);
  c.epochs = 6;
  const JobResult r = run_training(c);
  std::printf("[hetero] rgcn per-relation fanouts test=%.4f\n", r.test_acc_at_best);
  EXPECT_GT(r.test_acc_at_best, graph().bound() - 0.1);
}

// The start line names each type's input: the papers' 32 features, the learnt embeddings of the
// featureless types (not "0 features").
TEST(HeteroTrain, TheStartLineNamesEveryTypesInput) {
  JobConfig c = job("rgcn");
  c.epochs = 1;
  c.max_steps = 1;
  c.eval_every = 0;
  testing::internal::CaptureStderr();
  run_training(c);
  const std::string err = testing::internal::GetCapturedStderr();
  // The embeddings' width defaults to --hidden (64 here).
  EXPECT_NE(err.find("(5150 nodes, features author learnt 64, field_of_study learnt 64, "
                     "institution learnt 64, paper 32, 5 classes)"),
            std::string::npos)
      << err;
}

// --eval full on a typed graph: every neighbour of every relation sampled (fanouts -1), so each
// evaluated node sees its whole neighbourhood: the same figures as sampling more neighbours than
// any node has (fanouts 2^22), and reported as full.
TEST(HeteroTrain, FullEvaluationSamplesEveryNeighbour) {
  JobConfig full = job("rgcn");
  full.epochs = 2;
  full.eval = EvalMode::kFull;
  JobConfig wide = full;
  wide.eval = EvalMode::kSampled;
  wide.eval_fanouts = {1 << 22, 1 << 22};
  const JobResult a = run_training(full), b = run_training(wide);
  EXPECT_EQ(a.eval, "full");
  EXPECT_EQ(b.eval, "sampled");
  ASSERT_EQ(a.history.size(), b.history.size());
  for (size_t e = 0; e < a.history.size(); ++e) {
    EXPECT_EQ(a.history[e].at("val"), b.history[e].at("val")) << "epoch " << e + 1;
    EXPECT_EQ(a.history[e].at("test"), b.history[e].at("test")) << "epoch " << e + 1;
  }
  EXPECT_EQ(a.test_acc_full, a.test_acc_at_best);  // the full figure is the test at best
  EXPECT_GT(a.test_acc_at_best, 0.5);
}

TEST(HeteroTrain, ResumesFromACheckpoint) {
  JobConfig c = job("rgcn");
  c.epochs = 2;
  c.checkpoint_dir = graph().dir + "_ck";
  run_training(c);
  EXPECT_TRUE(fs::exists(c.checkpoint_dir + "/checkpoint.pt.embedding.0-of-1"));
  c.epochs = 3;
  c.resume = true;
  const JobResult r = run_training(c);
  EXPECT_EQ(r.epochs_run, 1);
  EXPECT_GT(r.test_acc_at_best, 0.5);
  fs::remove_all(c.checkpoint_dir);
}

TEST(HeteroTrain, Refusals) {
  auto refusal = [](const std::string& model, const std::function<void(JobConfig&)>& set) {
    JobConfig c = job(model);
    set(c);
    return error_of([&] { c.validate(); });
  };
  EXPECT_EQ(refusal("hsage", [](JobConfig& c) { c.sampler.temporal = TemporalKind::kUniform; }),
            "--model hsage does not support --temporal");
  EXPECT_EQ(refusal("rgcn", [](JobConfig& c) { c.preaggregate = true; }),
            "--model rgcn does not support --preaggregate (pre-aggregated rows are a homogeneous "
            "graph's)");
  EXPECT_EQ(refusal("rgcn", [](JobConfig& c) { c.sampler.kind = SamplerKind::kLabor; }),
            "--model rgcn does not support --sampler labor or layer (a heterogeneous graph is "
            "sampled node-wise, per relation)");
  EXPECT_EQ(
      refusal("rgcn", [](JobConfig& c) { c.train.normalize_features = FeatureNorm::kStandard; }),
      "--normalize-features standard with --model rgcn: per node type column statistics "
      "are not implemented; use row or none");

  JobConfig c = job("sage");
  EXPECT_EQ(error_of([&] { run_training(c); }),
            fmt::format("--model sage on the heterogeneous graph {}: train rgcn or hsage on it",
                        graph().dir));
  c = job("rgcn");
  c.embedding.dim = 16;
  EXPECT_EQ(error_of([&] { run_training(c); }),
            "--model rgcn: the nodes of a type without features enter with learnable rows of the "
            "hidden width (64), so the embedding width must be 64, got 16 (leave --embedding-dim "
            "out)");

  CommunityOptions co;  // a homogeneous graph
  co.num_nodes = 200;
  co.num_edges = 1000;
  co.feature_dim = 4;
  const std::string plain = graph().dir + "_plain";
  PartitionOptions po;
  po.verbose = false;
  po.overwrite = true;
  partition_dataset(generate_community(co), po, plain);
  c = job("hsage");
  c.rank.path = plain;
  EXPECT_EQ(error_of([&] { run_training(c); }),
            fmt::format("--model hsage needs a heterogeneous graph (dsp generate hetero, dsp "
                        "convert --from ogb-hetero); {} is homogeneous: train sage, gcn or gat on "
                        "it",
                        plain));
  fs::remove_all(plain);
}

}  // namespace
}  // namespace dsp
