// Data-parallel training under mpiexec -n 1..4: replicas bit-identical after every step, gradient
// averaging equal to one-rank training on the whole batch, evaluation counts reduced over ranks,
// resume on P ranks, (with 2 ranks) the Cora accuracy of the three models, and temporal and
// heterogeneous (R-GCN) training's accuracy bands at any rank count.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>

#include "../cora_batches.hpp"  // the mpi binary has no tests/ include path
#include "../link_fixtures.hpp"
#include "../predicted_accuracy.hpp"
#include "ccc/communicator.hpp"
#include "ccc/staged_communicator.hpp"
#include "core/error.hpp"
#include "graph/dataset.hpp"
#include "graph/generate.hpp"
#include "graph/generate_hetero.hpp"
#include "graph/hetero.hpp"
#include "graph/import.hpp"
#include "graph/npy.hpp"
#include "pipeline/rank/runtime.hpp"
#include "train/aggregate.hpp"
#include "train/inference.hpp"
#include "train/job.hpp"
#include "train/metrics.hpp"
#include "train/model.hpp"
#include "train/predict.hpp"
#include "train/device_io.hpp"
#include "train/trainer.hpp"

#include "mpi_test_main.hpp"

namespace dsp {
namespace {

using namespace dsp::test;
namespace fs = std::filesystem;
Communicator* g_comm = nullptr;

// Every rank's parameters equal rank 0's, bit for bit.
void expect_identical_replicas(Trainer& t, const std::string& when) {
  Communicator& c = *g_comm;
  std::vector<float> mine = t.state().flat_parameters();
  std::vector<float> all(mine.size() * c.size());
  c.all_gather(mine.data(), all.data(), static_cast<int64_t>(mine.size()), DType::kFloat32);
  for (int p = 1; p < c.size(); ++p) {
    ASSERT_EQ(0, std::memcmp(all.data(), all.data() + p * mine.size(), mine.size() * sizeof(float)))
        << "rank " << p << "'s parameters differ from rank 0's " << when;
  }
}

class Replicas : public ::testing::TestWithParam<std::string> {};

TEST_P(Replicas, BitIdenticalAfterEveryStep) {
  const CoraData& d = cora();
  Communicator& c = *g_comm;
  Trainer t(cora_config(GetParam(), 5), c);
  expect_identical_replicas(t, "after initialisation");
  CoraRunOptions o;
  o.batch_size = 40;  // 140 = 3 x 40 + 20: with 3 or 4 ranks the shares are uneven
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    auto batches = epoch_batches(d.train, o.batch_size, 5, epoch, true);
    for (size_t b = 0; b < batches.size(); ++b) {
      auto mine = rank_share(batches[b], c.rank(), c.size());
      float loss =
          t.train_step(load_batch(d, sample_batch(d.ds.graph, mine, o.fanouts, 5, epoch, b)));
      expect_identical_replicas(t, fmt::format("after epoch {} batch {}", epoch, b));
      float l0 = loss;
      c.broadcast(&l0, 1, DType::kFloat32, 0);
      EXPECT_EQ(loss, l0) << "the reported loss is the global one, the same on every rank";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, Replicas, ::testing::Values("sage", "gcn", "gat"));

// A job's step (Trainer::step) at P ranks: nothing read from the device while every rank has
// seeds, one wait a step for the gradient all-reduce at 2+ ranks (none alone); a step in which a
// rank has no seed reads the global count there (one read). The replicas stay identical and the
// tallies equal train_step's figures.
TEST(Replicas, AStepReadsNothingAndWaitsOnlyForTheAllReduce) {
  const CoraData& d = cora();
  Communicator& c = *g_comm;
  Trainer lazy(cora_config("sage", 6), c), eager(cora_config("sage", 6), c);
  const int steps = 3;
  double loss_sum = 0;
  const HostTraffic before = lazy.device_io().traffic();
  for (int64_t b = 0; b < steps; ++b) {
    std::vector<int64_t> seeds(d.train.begin() + 16 * b, d.train.begin() + 16 * b + 16);
    auto batch = load_batch(
        d, sample_batch(d.ds.graph, rank_share(seeds, c.rank(), c.size()), {10, 5}, 6, 0, b));
    lazy.step(batch);
    loss_sum += eager.train_step(batch);
  }
  const HostTraffic t = lazy.device_io().traffic() - before;
  EXPECT_EQ(t.reads, 0);
  EXPECT_EQ(t.syncs, c.size() > 1 ? steps : 0);
  expect_identical_replicas(lazy, "after the steps");
  EXPECT_TRUE(lazy.state().flat_parameters() == eager.state().flat_parameters());
  EXPECT_EQ(lazy.take_tally().loss_sum, loss_sum);

  // Rank 0 alone has seeds: the others read the global count, rank 0 reads nothing.
  std::vector<int64_t> seeds(d.train.begin(), d.train.begin() + 8);
  auto batch =
      load_batch(d, sample_batch(d.ds.graph, c.rank() == 0 ? seeds : std::vector<int64_t>{},
                                 {10, 5}, 6, 0, steps));
  const HostTraffic b0 = lazy.device_io().traffic();
  lazy.step(batch);
  EXPECT_EQ((lazy.device_io().traffic() - b0).reads, c.rank() == 0 ? 0 : 1);
  expect_identical_replicas(lazy, "after a step only rank 0 had seeds for");
}

// Without dropout a P-rank step on a batch equals a one-rank step on the whole batch (up to the
// order of float sums): the gradient is the mean over all the batch's seeds, however it is split.
TEST(GradientSync, EqualsOneRankOnTheWholeBatch) {
  const CoraData& d = cora();
  Communicator& c = *g_comm;
  auto self = make_communicator("self");
  TrainConfig cfg = cora_config("sage", 9);
  cfg.model.dropout = 0;
  Trainer dist(cfg, c), single(cfg, *self);
  std::vector<int64_t> seeds(d.train.begin(), d.train.begin() + 30);
  auto whole = load_batch(d, sample_batch(d.ds.graph, seeds, {10, 10}, 9, 0, 0));
  auto mine = load_batch(
      d, sample_batch(d.ds.graph, rank_share(seeds, c.rank(), c.size()), {10, 10}, 9, 0, 0));
  for (int i = 0; i < 3; ++i) {
    float ld = dist.train_step(mine);
    float ls = single.train_step(whole);
    EXPECT_NEAR(ld, ls, 1e-5);
  }
  auto a = dist.state().flat_parameters(), b = single.state().flat_parameters();
  ASSERT_EQ(a.size(), b.size());
  double max_diff = 0;
  for (size_t i = 0; i < a.size(); ++i)
    max_diff = std::max(max_diff, double(std::abs(a[i] - b[i])));
  EXPECT_LT(max_diff, 1e-5);
}

TEST(Evaluation, CountsReducedOverRanks) {
  const CoraData& d = cora();
  Communicator& c = *g_comm;
  Trainer t(cora_config("gcn", 2), c);
  CoraRunOptions o;
  EvalCounts e = cora_evaluate(t, d, d.valid, o, 0);
  EXPECT_EQ(e.total, 500);
  int64_t correct = e.correct;
  c.broadcast(&correct, 1, DType::kInt64, 0);
  EXPECT_EQ(e.correct, correct);
}

// Rank 0 writes the checkpoint; every rank resumes from it and continues bit-identically.
TEST(Resume, OnAllRanksEqualsUninterrupted) {
  const CoraData& d = cora();
  Communicator& c = *g_comm;
  int64_t pid = ::getpid();
  c.broadcast(&pid, 1, DType::kInt64, 0);
  const std::string path =
      (fs::temp_directory_path() / fmt::format("dsp_train_mpi_{}_{}.ckpt", pid, c.size())).string();
  TrainConfig cfg = cora_config("gat", 4);
  cfg.num_threads = 1;
  CoraRunOptions o;
  o.batch_size = 48;
  CoraRunResult straight, first, second;
  Trainer a(cfg, c);
  for (int e = 0; e < 3; ++e) cora_train_epoch(a, d, o, e, straight);
  {
    Trainer b(cfg, c);
    for (int e = 0; e < 2; ++e) cora_train_epoch(b, d, o, e, first);
    if (c.rank() == 0) b.state().save_checkpoint(path, 2);
    c.barrier();
  }
  Trainer r(cfg, c);
  CheckpointInfo info = r.state().load_checkpoint(path);
  ASSERT_EQ(info.epoch, 2);
  cora_train_epoch(r, d, o, 2, second);
  EXPECT_EQ(straight.losses[2], second.losses[0]);
  EXPECT_TRUE(a.state().flat_parameters() == r.state().flat_parameters());
  expect_identical_replicas(r, "after resume");
  c.barrier();
  if (c.rank() == 0) fs::remove(path);
}

// A GPU rank's trainer channel is device-space (NCCL, or MPI staged through pinned memory); its
// host payloads (initial parameters, evaluation counts) travel as OpOptions::host_buffers. Over
// the staged communicator (host memory standing in for the device) the replicas train exactly
// what they train over MPI itself.
TEST(StagedChannel, TrainsBitIdenticallyToTheHostChannel) {
  const CoraData& d = cora();
  Communicator& c = *g_comm;
  auto staged = make_staged_communicator(make_communicator("mpi"), make_host_staging());
  ASSERT_EQ(staged->memory_space(), MemorySpace::kDevice);
  const TrainConfig cfg = cora_config("sage", 4);
  Trainer host(cfg, c), dev(cfg, *staged);
  auto seeds =
      rank_share(std::vector<int64_t>(d.train.begin(), d.train.begin() + 60), c.rank(), c.size());
  for (int64_t b = 0; b < 3; ++b) {
    auto batch = load_batch(d, sample_batch(d.ds.graph, seeds, {10, 5}, 4, 0, b));
    EXPECT_EQ(host.train_step(batch), dev.train_step(batch)) << "step " << b;
  }
  const auto a = host.state().flat_parameters(), z = dev.state().flat_parameters();
  ASSERT_EQ(a.size(), z.size());
  EXPECT_EQ(0, std::memcmp(a.data(), z.data(), a.size() * sizeof(float)));
  CoraRunOptions o;
  const EvalCounts ea = cora_evaluate(host, d, d.valid, o, 0);
  const EvalCounts ez = cora_evaluate(dev, d, d.valid, o, 0);
  EXPECT_EQ(ea.total, 500);
  EXPECT_EQ(ez.total, 500);
  EXPECT_EQ(ea.correct, ez.correct);
}

// `cfg` run as it is and with emulate_device: the same losses, accuracies and traffic. Returns
// the emulated job's result.
JobResult expect_emulated_equals_cpu(JobConfig cfg, const std::string& what) {
  cfg.rank.emulate_device = false;
  const JobResult cpu = run_training(cfg);
  cfg.rank.emulate_device = true;
  const JobResult dev = run_training(cfg);
  EXPECT_EQ(dev.final_loss, cpu.final_loss) << what;
  EXPECT_EQ(dev.best_val_acc, cpu.best_val_acc) << what;
  EXPECT_EQ(dev.test_acc_at_best, cpu.test_acc_at_best) << what;
  EXPECT_EQ(dev.feature_bytes_per_batch, cpu.feature_bytes_per_batch) << what;
  EXPECT_EQ(dev.peer_bytes_per_batch, cpu.peer_bytes_per_batch) << what;
  return dev;
}

// Cora as a dataset directory in the temporary directory (rank 0 writes it), its path the same on
// every rank; `tag` keeps tests apart.
std::string cora_dataset_dir(const std::string& tag) {
  Communicator& c = *g_comm;
  int64_t pid = ::getpid();
  c.broadcast(&pid, 1, DType::kInt64, 0);
  const std::string dir =
      (fs::temp_directory_path() / fmt::format("dsp_{}_{}_{}", tag, pid, c.size())).string();
  if (c.rank() == 0) {
    OgbImportOptions o;
    o.name = "cora";
    write_dataset(import_ogb_raw(cora_dir(), o), dir);
  }
  c.barrier();
  return dir;
}

// Two epochs of a small GraphSAGE on the Cora dataset directory `dir`.
JobConfig small_cora_job(const std::string& dir) {
  JobConfig cfg;
  cfg.rank.path = dir;
  cfg.train.model.model = ModelKind::kSage;
  cfg.train.model.hidden = 16;
  cfg.train.num_threads = 1;
  cfg.sampler.fanouts = {5, 5};
  cfg.batch_size = 8;
  cfg.epochs = 2;
  cfg.seed = 3;
  cfg.progress = false;
  return cfg;
}

// The model's forward over the whole graph: every layer's block has every node as destination
// and its whole in-neighbour row (Cora's ids, row-normalised features): [N, classes].
torch::Tensor whole_graph_logits(GnnModel& model, const CoraData& d, int layers) {
  Block g;
  g.num_dst = g.num_src = d.num_nodes;
  const Csr& csr = d.ds.graph;
  g.indptr.assign(csr.rowptr(), csr.rowptr() + d.num_nodes + 1);
  for (int64_t k = 0; k < csr.num_edges(); ++k) g.indices.push_back(csr.indices.int_at(k));
  g.src_ids.resize(d.num_nodes);
  std::iota(g.src_ids.begin(), g.src_ids.end(), 0);
  const std::vector<Block> blocks(layers, g);
  auto x = torch::from_blob(const_cast<float*>(d.features.data()), {d.num_nodes, d.dim});
  torch::NoGradGuard ng;
  model.eval();
  return model.forward(blocks_to_tensors(blocks), x);
}

// Full-neighbour layer-wise inference (batches of 300 destinations, rows of other parts fetched
// from their owners) computes what the model computes on the whole graph, at every rank count
// (GCN with the whole graph's degrees, row normalisation applied to the input layer), its layer
// tables on the trainer's device (the reads counted).
class Layerwise : public ::testing::TestWithParam<std::string> {};

TEST_P(Layerwise, EqualsTheWholeGraphForward) {
  Communicator& c = *g_comm;
  const CoraData& d = cora();
  const std::string dir = cora_dataset_dir("layerwise_" + GetParam());
  RankOptions ro;
  ro.path = dir;
  ro.threads = 1;
  {
    RankRuntime rt(ro);
    TrainConfig tc = cora_config(GetParam(), 5);
    tc.normalize_features = FeatureNorm::kRow;
    Trainer t(tc, rt.channel(WorkerKind::kTrainer));
    InferenceOptions io;
    io.batch_size = 300;
    io.epoch = 1;  // past the trainer's initial broadcast: every collective has its own step
    const HostTraffic before = t.device_io().traffic();
    const std::vector<float> mine = layerwise_inference(rt, t, io);
    // The layers' tables stay on the trainer's device: alone, a rank reads only the last one
    // back; with peers also the rows they ask of it, once a batch of every layer after the first.
    const int64_t reads = (t.device_io().traffic() - before).reads,
                  most = (d.num_nodes + 299) / 300;
    if (c.size() == 1) {
      EXPECT_EQ(reads, 1);
    }
    EXPECT_LE(reads, 1 + most * (tc.model.layers - 1));
    const torch::Tensor ref = whole_graph_logits(t.model(), d, tc.model.layers);
    const PartitionMeta& meta = rt.part().meta;
    const int64_t first = meta.offsets[c.rank()], rows = meta.offsets[c.rank() + 1] - first;
    const int64_t width = d.classes;
    ASSERT_EQ(static_cast<int64_t>(mine.size()), rows * width);
    const Array new2old = load_npy(rt.partition_dir() + "/new2old.npy");
    double worst = 0;
    for (int64_t i = 0; i < rows; ++i) {
      const float* r = ref[new2old.int_at(first + i)].contiguous().data_ptr<float>();
      for (int64_t j = 0; j < width; ++j) {
        worst = std::max(worst, std::abs(static_cast<double>(mine[i * width + j]) - r[j]) /
                                    (1.0 + std::abs(r[j])));
      }
    }
    EXPECT_LT(worst, 1e-5) << "largest relative difference from the whole-graph forward";
    EXPECT_GT(ref.abs().max().item<float>(), 1e-3) << "the logits are all zero: nothing compared";
    CoordinatedCommunicator& main_ch = rt.channel(WorkerKind::kMain);
    main_ch.set_step(2, 0);
    main_ch.barrier();  // as a job ends: no rank leaves while another still runs an op
  }
  c.barrier();
  if (c.rank() == 0) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Models, Layerwise, ::testing::Values("sage", "gcn", "gat"));

// dsp predict under mpiexec: each rank infers its part, rank 0 writes the rows in the dataset's
// own ids; with the best model they give the job's (full-neighbour) test accuracy at any rank
// count. (Equality with the whole-graph forward at 1..4 ranks: Layerwise above.)
TEST(Predict, TheBestModelGivesTheJobsTestAccuracy) {
  Communicator& c = *g_comm;
  const std::string dir = cora_dataset_dir("predict");
  JobConfig cfg = small_cora_job(dir);
  cfg.checkpoint_dir = dir + "/ck";
  const JobResult r = run_training(cfg);
  ASSERT_EQ(r.eval, "full");
  PredictConfig p;
  p.rank.path = dir;
  p.rank.threads = 1;
  p.checkpoint = cfg.checkpoint_dir + "/best.pt";
  p.out = dir + "/out";
  p.batch_size = 500;  // several batches per part
  run_predict(p);
  if (c.rank() == 0) {
    EXPECT_EQ(predicted_test_accuracy(p.out + "/predictions.npy", load_dataset(dir)),
              r.test_acc_at_best);
  }
  c.barrier();
  if (c.rank() == 0) fs::remove_all(dir);
}

// A featureless planted community graph with a link split, written by rank 0 (its path the same
// on every rank); `bound` (every rank's) receives its achievable test Hits@K; per_positive > 0:
// that many negatives for each held-out edge.
std::string link_dataset_dir(const std::string& tag, double* bound, int64_t per_positive = 0) {
  Communicator& c = *g_comm;
  int64_t pid = ::getpid();
  c.broadcast(&pid, 1, DType::kInt64, 0);
  const std::string dir =
      (fs::temp_directory_path() / fmt::format("dsp_{}_{}_{}", tag, pid, c.size())).string();
  double b = 0;
  if (c.rank() == 0) {
    const Dataset ds = planted_link_graph(per_positive);
    b = ds.meta.extra.at("link_hits_bound").get<double>();
    write_dataset(ds, dir);
  }
  c.broadcast(&b, 1, DType::kFloat64, 0);
  if (bound) *bound = b;
  return dir;
}

// The same global batch at every rank count.
JobConfig link_job(const std::string& dir) {
  JobConfig cfg = link_job_config(dir, 256 / g_comm->size());
  cfg.seed = 2;
  return cfg;
}

// Link prediction at P ranks: each rank trains the edges whose source it owns (with negatives
// and edge exclusion through CSP), the embeddings' rows live on their owners and their gradients
// return there, evaluation scores each rank's share; the featureless planted graph's test
// Hits@50 comes near the best a community-aware scorer reaches, at any rank count.
TEST(Job, LinkPredictionReachesThePlantedHitsAtAnyRankCount) {
  Communicator& c = *g_comm;
  double bound = 0;
  const std::string dir = link_dataset_dir("link", &bound);
  const JobResult r = run_training(link_job(dir));
  EXPECT_GE(r.test_acc_at_best, 0.9 * bound) << "bound " << bound << " at " << c.size();
  c.barrier();
  if (c.rank() == 0) fs::remove_all(dir);
}

// Negatives per positive (OGB's ogbl-citation2 layout): each rank ranks its share of the
// held-out edges against their own negatives; the planted graph's test MRR (a scorer that knows
// the communities ranks the 88% within-community positives first) passes 0.8 after one epoch at
// any rank count, and MRR is what picked the epoch.
TEST(Job, PerPositiveMrrAtAnyRankCount) {
  Communicator& c = *g_comm;
  const std::string dir = link_dataset_dir("link_per_positive", nullptr, 20);
  JobConfig cfg = link_job(dir);
  cfg.epochs = 1;  // 0.867 at one rank
  cfg.link.hits_k = {10};
  const JobResult r = run_training(cfg);
  EXPECT_EQ(r.metric, "mrr");
  EXPECT_GE(r.test_mrr_at_best, 0.8) << "at " << c.size();
  c.barrier();
  if (c.rank() == 0) fs::remove_all(dir);
}

// Link prediction as a GPU rank runs it, kernels aside: the emulated sampler backend with edge
// exclusion, the embedding table in emulated device memory, staged channels; the same losses and
// Hits@50 as the CPU job.
TEST(Job, EmulatedDevicePathTrainsLinkPredictionAsTheCpuJob) {
  Communicator& c = *g_comm;
  const std::string dir = link_dataset_dir("link_emulated", nullptr);
  JobConfig cfg = link_job(dir);
  cfg.epochs = 1;
  cfg.max_steps = 8;
  expect_emulated_equals_cpu(cfg, "link");
  c.barrier();
  if (c.rank() == 0) fs::remove_all(dir);
}

// The whole job as a GPU rank runs it, kernels aside (RankOptions::emulate_device: device
// sampler and feature backends on the host, device-space trainer and loader channels staged over
// MPI), trains exactly what the CPU job trains: same losses, same accuracies.
TEST(Job, EmulatedDevicePathTrainsWhatTheCpuJobTrains) {
  Communicator& c = *g_comm;
  const std::string dir = cora_dataset_dir("emulated_job");
  JobConfig cfg = small_cora_job(dir);
  cfg.pipeline = PipelineMode::kPipelined;  // the same stage threads in both jobs: bit-equal sums
  const JobResult sym = expect_emulated_equals_cpu(cfg, "symmetric");
  if (c.size() > 1) {
    EXPECT_GT(sym.peer_bytes_per_batch, 0.0) << "no rows crossed the loader channel";
    // GNNLab's roles: the global queue's packed batches cross the device-space loader channel
    // as host buffers.
    cfg.roles = 1;
    expect_emulated_equals_cpu(cfg, "--roles 1");
  }
  c.barrier();
  if (c.rank() == 0) fs::remove_all(dir);
}

// Superbatches change where rows are read, never what trains: with its feature rows read from
// disk (DSP_BEYOND_MEMORY, through the mapping), the job loading its batches 4 at a time (and
// --read-ahead auto: 16) trains exactly what it trains without, and every cold row of its
// training loads comes from its group's sweep. In memory, auto reads nothing ahead.
TEST(Job, ReadAheadTrainsWhatTheJobWithoutItTrains) {
  Communicator& c = *g_comm;
  const std::string dir = cora_dataset_dir("read_ahead");
  JobConfig cfg = small_cora_job(dir);
  cfg.pipeline = PipelineMode::kPipelined;
  const JobResult plain = run_training(cfg);
  EXPECT_EQ(plain.read_ahead, 0) << "auto read ahead with the rows in memory";
  ::setenv("DSP_HUGE_PAGES", "0", 1);
  ::setenv("DSP_BEYOND_MEMORY", "1", 1);
  for (int k : {4, JobConfig::kReadAheadAuto}) {
    cfg.read_ahead = k;
    const JobResult r = run_training(cfg);
    EXPECT_EQ(r.read_ahead, k == 4 ? 4 : JobConfig::kAutoReadAhead);
    EXPECT_EQ(r.final_loss, plain.final_loss) << k;
    EXPECT_EQ(r.best_val_acc, plain.best_val_acc) << k;
    EXPECT_EQ(r.test_acc_at_best, plain.test_acc_at_best) << k;
    EXPECT_EQ(r.feature_bytes_per_batch, plain.feature_bytes_per_batch) << k;
    EXPECT_EQ(r.cold_rows_read_ahead, 1.0) << k;
  }
  ::unsetenv("DSP_BEYOND_MEMORY");
  ::unsetenv("DSP_HUGE_PAGES");
  c.barrier();
  if (c.rank() == 0) fs::remove_all(dir);
}

// The generated temporal community graph of tests/train/jobs/test_temporal_train.cpp as a dataset
// directory (rank 0 writes it, the path the same on every rank); `reachable` (every rank's)
// receives the accuracy its nodes with past edges allow: the bound, the others guessed (1 / C).
std::string temporal_dataset_dir(double* reachable) {
  Communicator& c = *g_comm;
  int64_t pid = ::getpid();
  c.broadcast(&pid, 1, DType::kInt64, 0);
  const std::string dir =
      (fs::temp_directory_path() / fmt::format("dsp_temporal_{}_{}", pid, c.size())).string();
  double r = 0;
  if (c.rank() == 0) {
    CommunityOptions co;
    co.num_nodes = 6000;
    co.num_edges = 120000;
    co.num_communities = 16;
    co.num_classes = 8;
    co.feature_dim = 16;
    co.feature_noise = 1.0;
    co.temporal = true;
    co.seed = 4;
    const Dataset ds = generate_community(co);
    const double bound = ds.meta.extra.at("accuracy_bound").get<double>();
    const double orphans = ds.meta.extra.at("nodes_without_past_edges").get<double>();
    r = (1 - orphans) * bound + orphans / co.num_classes;
    write_dataset(ds, dir);
  }
  c.broadcast(&r, 1, DType::kFloat64, 0);
  *reachable = r;
  return dir;
}

// dsp train --temporal uniform at P ranks: every rank samples its seeds at their node times
// through the owners of their neighbourhoods (the CSP's times travel beside the tasks), and the
// model reaches the band the 1-rank job reaches (tests/train/jobs/test_temporal_train.cpp: 0.838
// of a reachable 0.907, plain sampling 0.390) with the same global batch at every rank count. The
// job is not P-invariant (each rank's seeds are its part's), so the band is what is compared,
// and plain sampling's distance below it.
TEST(Job, TemporalTrainingReachesTheBoundAtAnyRankCount) {
  Communicator& c = *g_comm;
  double reachable = 0;
  const std::string dir = temporal_dataset_dir(&reachable);
  JobConfig cfg;
  cfg.rank.path = dir;
  cfg.train.model.hidden = 64;
  cfg.train.num_threads = 1;
  cfg.sampler.fanouts = {10, 10};
  options::find(sampler_options_table(), "temporal").parse(cfg.sampler, "uniform");
  cfg.batch_size = 64 / c.size();
  cfg.epochs = 40;
  cfg.seed = 1;
  cfg.progress = false;
  const JobResult r = run_training(cfg);
  options::find(sampler_options_table(), "temporal").parse(cfg.sampler, "off");
  const JobResult plain = run_training(cfg);  // every edge, also those after a node's time
  if (c.rank() == 0) {
    std::printf("[temporal] ranks=%d test=%.4f (reachable %.3f), plain sampling %.4f\n", c.size(),
                r.test_acc_at_best, reachable, plain.test_acc_at_best);
  }
  EXPECT_EQ(r.eval, "sampled");
  EXPECT_GT(r.test_acc_at_best, reachable - 0.08) << "at " << c.size() << " ranks";
  EXPECT_GT(r.test_acc_at_best, plain.test_acc_at_best + 0.25) << "at " << c.size() << " ranks";
  c.barrier();
  if (c.rank() == 0) fs::remove_all(dir);
}

// test_hetero_train.cpp's typed graph (bound 0.920, features alone 0.515), written and
// partitioned into one part per rank by rank 0 (its path the same on every rank); `bound` (every
// rank's) receives its accuracy bound.
// `link`: the link-prediction graph of tests/train/jobs/test_hetero_link.cpp instead (featureless,
// author___writes___paper split; the bound is its best Hits@K).
std::string hetero_dataset_dir(const std::string& tag, double* bound, bool link = false) {
  Communicator& c = *g_comm;
  int64_t pid = ::getpid();
  c.broadcast(&pid, 1, DType::kInt64, 0);
  const std::string dir =
      (fs::temp_directory_path() / fmt::format("dsp_{}_{}_{}", tag, pid, c.size())).string();
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
  if (link) {  // the graph of test_hetero_link.cpp's writes_graph()
    o = HeteroGenOptions{};
    o.papers = 3000;
    o.authors = 2000;
    o.institutions = 100;
    o.fields = 200;
    o.feature_dim = 0;
    o.link_split = LinkSplitOptions{};
    o.seed = 2;
  }
  double b = 0;
  if (c.rank() == 0) {
    const HeteroDataset ds = generate_hetero(o);
    b = ds.extra.at(link ? "link_hits_bound" : "accuracy_bound").get<double>();
    write_hetero_dataset(ds, dir + "/data");
    PartitionOptions po;
    po.parts = c.size();
    po.verbose = false;
    po.overwrite = true;
    partition_dataset(hetero_union(ds), po, dir + "/part");
  }
  c.broadcast(&b, 1, DType::kFloat64, 0);
  c.barrier();
  *bound = b;
  return dir;
}

JobConfig hetero_job(const std::string& dir, const std::string& model) {
  JobConfig cfg;
  cfg.rank.path = dir + "/part";
  cfg.train.model.model = parse_choice<ModelKind>(model);
  cfg.train.model.hidden = 64;
  cfg.train.num_threads = 1;
  cfg.sampler.fanouts = {10, 10};
  cfg.batch_size = 128 / g_comm->size();
  cfg.epochs = 10;
  cfg.seed = 1;
  cfg.progress = false;
  return cfg;
}

// dsp train --model rgcn on a heterogeneous partition at P ranks: every rank samples its part's
// seeds through all relations' owners, loads each featured type's rows through its store and the
// featureless types' learnable rows through the embedding table, and reaches the band the 1-rank
// job reaches (tests/train/jobs/test_hetero_train.cpp) with the same global batch.
TEST(Job, HeteroRgcnReachesTheBoundAtAnyRankCount) {
  Communicator& c = *g_comm;
  double bound = 0;
  const std::string dir = hetero_dataset_dir("hetero", &bound);
  const JobResult r = run_training(hetero_job(dir, "rgcn"));
  if (c.rank() == 0) {
    std::printf("[hetero] rgcn ranks=%d test=%.4f (bound %.3f)\n", c.size(), r.test_acc_at_best,
                bound);
  }
  EXPECT_EQ(r.eval, "sampled");
  EXPECT_GT(r.test_acc_at_best, bound - 0.07) << "at " << c.size() << " ranks";
  c.barrier();
  if (c.rank() == 0) fs::remove_all(dir);
}

// Link prediction on a relation of a typed graph at P ranks: each rank trains the authorships
// whose author it owns, negatives are papers anywhere, the exclusions (the edge and its reverse
// relation's) travel to their owners with their relation, evaluation samples every neighbour of
// the two types' nodes each rank owns; test Hits@50 near the 1-rank job's (0.764 of 0.822).
TEST(Job, TypedLinkPredictionAtAnyRankCount) {
  Communicator& c = *g_comm;
  double bound = 0;
  const std::string dir = hetero_dataset_dir("hetero_link", &bound, /*link=*/true);
  JobConfig cfg;
  cfg.rank.path = dir + "/part";
  cfg.train.model.model = ModelKind::kRgcn;
  cfg.train.num_threads = 1;
  cfg.link.task = TaskKind::kLink;
  cfg.batch_size = 512 / c.size();
  cfg.epochs = 3;
  cfg.seed = 1;
  cfg.progress = false;
  const JobResult r = run_training(cfg);
  if (c.rank() == 0) {
    std::printf("[hetero link] rgcn ranks=%d test hits@50 %.4f (bound %.3f)\n", c.size(),
                r.test_acc_at_best, bound);
  }
  EXPECT_GT(r.test_acc_at_best, 0.65) << "at " << c.size() << " ranks";
  c.barrier();
  if (c.rank() == 0) fs::remove_all(dir);
}

// Typed models through dsp predict and dsp embed at P ranks: every neighbour of every relation
// sampled for the target type's nodes, so the best model's predictions give the job's --eval full
// test accuracy exactly; dsp embed writes the last hidden layer's rows (after its ReLU) of every
// paper.
TEST(Predict, TypedModelsGiveTheJobsFullTestAccuracy) {
  Communicator& c = *g_comm;
  double bound = 0;
  const std::string dir = hetero_dataset_dir("hetero_predict", &bound);
  for (const char* model : {"rgcn", "hsage"}) {
    SCOPED_TRACE(model);
    JobConfig cfg = hetero_job(dir, model);
    cfg.epochs = 3;
    cfg.eval = EvalMode::kFull;
    cfg.checkpoint_dir = dir + "/ck_" + model;
    const JobResult r = run_training(cfg);
    ASSERT_EQ(r.eval, "full");
    PredictConfig p;
    p.rank.path = cfg.rank.path;
    p.rank.threads = 1;
    p.checkpoint = cfg.checkpoint_dir + "/best.pt";
    p.out = dir + "/out_" + model;
    p.batch_size = 700;  // several batches per part
    run_predict(p);
    PredictConfig e = p;
    e.output = PredictOutput::kEmbedding;
    e.out = dir + "/emb_" + model;
    run_predict(e);
    if (c.rank() == 0) {
      const HeteroDataset ds = load_hetero_dataset(dir + "/data");
      EXPECT_EQ(predicted_test_accuracy(p.out + "/predictions.npy", ds), r.test_acc_at_best);
      EXPECT_GT(r.test_acc_at_best, bound - 0.2);
      const Array emb = load_npy(e.out + "/embeddings.npy");
      EXPECT_EQ(emb.shape(), (std::vector<int64_t>{3000, 64}));
      const float* x = emb.data<float>();
      EXPECT_GE(*std::min_element(x, x + emb.numel()), 0.0f);  // after the ReLU
      EXPECT_GT(*std::max_element(x, x + emb.numel()), 0.0f);
    }
  }
  c.barrier();
  if (c.rank() == 0) fs::remove_all(dir);
}

// The gathered ROC-AUC (train/metrics.hpp) is computed on the union of every rank's rows, so
// given the same predictions it equals the one-process value exactly at any rank count (not a
// mean of per-rank AUCs), on every rank; the macro-F1's confusion matrix is summed exactly.
TEST(MetricsMpi, GatheredMetricsEqualTheOneProcessValues) {
  Communicator& c = *g_comm;
  const int64_t n = 997, L = 3;
  std::mt19937_64 g(11);
  std::vector<float> logits(n * L);
  std::vector<int8_t> y(n * L);
  std::vector<int64_t> cls(n);
  for (int64_t i = 0; i < n * L; ++i) {
    y[i] = static_cast<int8_t>(g() % 4 == 0);
    logits[i] = static_cast<float>(static_cast<int>(g() % 16) - 8) * 0.5f + (y[i] ? 1.0f : 0.0f);
  }
  for (int64_t i = 0; i < n; ++i) cls[i] = static_cast<int64_t>(g() % L);
  EvalTally whole_b(true, 1), whole_m(true, L), whole_c(false, L);
  std::vector<int64_t> binary(n);
  for (int64_t i = 0; i < n; ++i) binary[i] = y[i * L];
  std::vector<float> first(n);
  for (int64_t i = 0; i < n; ++i) first[i] = logits[i * L];
  whole_b.add(first.data(), n, binary.data());
  whole_m.add(logits.data(), n, y.data());
  whole_c.add(logits.data(), n, cls.data());
  // Uneven contiguous shares: rank r holds rows [r n^2 / ..., ...) of a quadratic split.
  auto bound = [&](int r) { return n * r * r / (c.size() * c.size()); };
  const int64_t b = bound(c.rank()), e = bound(c.rank() + 1);
  EvalTally part_b(true, 1), part_m(true, L), part_c(false, L);
  part_b.add(first.data() + b, e - b, binary.data() + b);
  part_m.add(logits.data() + b * L, e - b, y.data() + b * L);
  part_c.add(logits.data() + b * L, e - b, cls.data() + b);
  part_b.combine(c, "test:b");
  part_m.combine(c, "test:m");
  part_c.combine(c, "test:c");
  EXPECT_EQ(part_b.roc_auc(), whole_b.roc_auc());
  EXPECT_EQ(part_m.roc_auc(), whole_m.roc_auc());
  EXPECT_EQ(part_m.accuracy(), whole_m.accuracy());
  EXPECT_EQ(part_c.macro_f1(), whole_c.macro_f1());
  EXPECT_EQ(part_c.accuracy(), whole_c.accuracy());
  EXPECT_GT(whole_b.roc_auc(), 0.55);  // the scores carry the labels: not a constant 0.5
  EXPECT_LT(whole_b.roc_auc(), 0.95);
}

// A generated multi-label graph at any rank count: the job's partitions carry the label rows,
// BCE trains a logit per label, the mean ROC-AUC gathered over the ranks reaches a threshold, is
// the same on every rank, and equals the one recomputed from dsp predict's probabilities of the
// test nodes (written at this rank count) in one process.
TEST(MetricsMpi, MultiLabelJobReportsThePredictedMeanRocAuc) {
  Communicator& c = *g_comm;
  int64_t pid = ::getpid();
  c.broadcast(&pid, 1, DType::kInt64, 0);
  const std::string dir =
      (fs::temp_directory_path() / fmt::format("dsp_multilabel_{}_{}", pid, c.size())).string();
  if (c.rank() == 0) {
    CommunityOptions co;
    co.num_nodes = 3000;
    co.num_edges = 24000;
    co.num_communities = 12;
    co.num_classes = co.multilabel = 6;
    co.feature_dim = 16;
    co.train_frac = 0.5;
    co.valid_frac = 0.1;
    co.seed = 8;
    write_dataset(generate_community(co), dir);
  }
  c.barrier();
  JobConfig cfg = small_cora_job(dir);
  cfg.sampler.fanouts = {10, 5};
  cfg.batch_size = 128 / c.size();
  cfg.train.model.hidden = 32;
  cfg.epochs = 6;
  cfg.checkpoint_dir = dir + "/ck";
  const JobResult r = run_training(cfg);
  ASSERT_EQ(r.eval, "full");
  EXPECT_EQ(r.metric, "rocauc");
  EXPECT_GE(r.test_acc_at_best, 0.85) << c.size() << " ranks";
  double r0 = r.test_acc_at_best;
  c.broadcast(&r0, 1, DType::kFloat64, 0);
  EXPECT_EQ(r.test_acc_at_best, r0) << "every rank reports the union's ROC-AUC";
  PredictConfig p;
  p.rank.path = dir;
  p.rank.threads = 1;
  p.checkpoint = cfg.checkpoint_dir + "/best.pt";
  p.out = dir + "/out";
  p.output = PredictOutput::kProbs;
  run_predict(p);
  if (c.rank() == 0) {
    const Dataset ds = load_dataset(dir);
    const Array probs = load_npy(p.out + "/probabilities.npy");
    const int64_t L = 6;
    std::vector<float> s;
    std::vector<int8_t> y;
    for (int64_t i = 0; i < ds.test_idx.dim(0); ++i) {
      const int64_t v = ds.test_idx.int_at(i);
      for (int64_t k = 0; k < L; ++k) {
        s.push_back(probs.data<float>()[v * L + k]);
        y.push_back(ds.labels.data<int8_t>()[v * L + k]);
      }
    }
    EXPECT_EQ(mean_roc_auc(s, y, L), r.test_acc_at_best);
  }
  c.barrier();
  if (c.rank() == 0) fs::remove_all(dir);
}

}  // namespace
}  // namespace dsp

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  dsp::CommOptions opts;
  opts.timeout = std::chrono::seconds(120);
  auto comm = dsp::make_communicator("mpi", opts);
  dsp::g_comm = comm.get();
  const int failed = dsp::test::run_tests_on_all_ranks(*comm);
  dsp::g_comm = nullptr;
  comm.reset();
  return failed;
}
