// The pipeline under mpiexec -n 1..4 with the stand-in stages (tests/pipeline/standin.hpp), which
// do real collectives in every worker and check every value the trainer receives:
//  * thousands of batches with random delays in every worker, and the coordinator's launch
//    sequence identical on all ranks;
//  * the pipelined run delivers exactly the sequential run's batches (same blocks, features,
//  order);
//  * uneven partitions (3x the seeds of another rank, a rank with none) finish every epoch;
//  * the cost of coordination, printed.
// Output comes from rank 0 only; a failure on any rank fails the process.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "bench/pipeline_bench.hpp"
#include "ccc/coordinator.hpp"
#include "ccc/mpi/mpi_communicator.hpp"
#include "core/error.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/scheduler.hpp"
#include "pipeline/standin.hpp"

#include "mpi_test_main.hpp"

namespace dsp {
namespace {

MpiCommunicator* g_world = nullptr;

// Seeds owned by `rank` in a world of P: ids with id % P == rank, `n` of them.
std::vector<int64_t> owned_seeds(int rank, int P, int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back((i * 7919) % 50000 * P + rank);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

std::unique_ptr<Coordinator> coordinator(bool ccc = true) {
  CoordinatorOptions o;
  o.ccc = ccc;
  o.record_launches = true;
  o.comm.timeout = std::chrono::seconds(60);
  return make_coordinator("mpi", o);
}

// Every rank's launch sequence, compared element by element with rank 0's.
void expect_same_launch_order_everywhere(const Coordinator& c) {
  const int P = g_world->size();
  std::vector<OpId> log = c.launch_log();
  int64_t mine[2] = {static_cast<int64_t>(log.size()), static_cast<int64_t>(c.launch_hash())};
  std::vector<int64_t> all(2 * P);
  g_world->all_gather(mine, all.data(), 2, DType::kInt64);
  for (int p = 0; p < P; ++p) {
    ASSERT_EQ(all[2 * p], all[0]) << "rank " << p << " launched a different number of ops";
    EXPECT_EQ(all[2 * p + 1], all[1]) << "rank " << p << " launch hash differs";
  }
  std::vector<int64_t> flat;
  for (const OpId& id : log) {
    flat.insert(flat.end(), {static_cast<int64_t>(id.worker), id.epoch, id.batch, id.op});
  }
  std::vector<int64_t> gathered(flat.size() * P);
  g_world->all_gather(flat.data(), gathered.data(), static_cast<int64_t>(flat.size()),
                      DType::kInt64);
  for (int p = 1; p < P; ++p) {
    ASSERT_TRUE(std::equal(flat.begin(), flat.end(), gathered.begin() + p * flat.size()))
        << "rank " << p << " launched in another order";
  }
}

TEST(PipelineMpi, ThousandsOfBatchesWithRandomDelaysOneLaunchOrder) {
  const int P = g_world->size(), r = g_world->rank();
  auto coord = coordinator();
  test::StandInConfig cfg;
  cfg.max_delay_us = 1000;  // two draws per stage call: 0..2 ms per stage and batch
  test::StandIn si(*coord, cfg);
  EpochScheduler sched(owned_seeds(r, P, 2400 + 500 * r), 4, 11);
  Pipeline p(*coord, sched, si.stages());
  int64_t batches = 0;
  double wall = 0;
  for (int e = 0; e < 2; ++e) {
    EpochMetrics m = p.run_epoch(e);
    batches += m.steps;
    wall += m.wall_s;
    EXPECT_EQ(m.trainer.batches, m.steps);
  }
  EXPECT_GE(batches, 1200);
  EXPECT_EQ(static_cast<int64_t>(si.seen.size()), batches);
  // 9 collectives per batch (4 sampler, 3 loader, 2 trainer) + 1 step agreement per epoch.
  EXPECT_EQ(coord->launched(), static_cast<uint64_t>(batches * 9 + 2));
  expect_same_launch_order_everywhere(*coord);
  if (r == 0) {
    std::printf("[ stress   ] P=%d: %lld batches, %llu ops, %.2f s (%.0f batch/s)\n", P,
                (long long)batches, (unsigned long long)coord->launched(), wall, batches / wall);
  }
}

// Pace control on followers could withhold a sampler op that the leader's launch order needs
// before a trainer op, while the sampler waits for that trainer: a deadlock. Only the leader
// paces; followers, whose trainers are slow here (their lead grows every batch, which would
// throttle them at window 1), never do, and the run completes with one launch order.
TEST(PipelineMpi, OnlyTheLeaderPacesItsSampler) {
  const int P = g_world->size(), r = g_world->rank();
  auto coord = coordinator();
  test::StandInConfig cfg;
  cfg.max_delay_us = 200;
  test::StandIn si(*coord, cfg);
  PipelineStages stages = si.stages();
  if (r > 0) {
    auto train = stages.train;
    stages.train = [train](LoadedBatch&& b) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      train(std::move(b));
    };
  }
  EpochScheduler sched(owned_seeds(r, P, 400 + 50 * r), 4, 3);
  PipelineOptions po;
  po.mode = PipelineMode::kPipelined;
  po.pace_window = 1;
  Pipeline p(*coord, sched, stages, po);
  for (int e = 0; e < 2; ++e) {
    EpochMetrics m = p.run_epoch(e);
    EXPECT_EQ(m.trainer.batches, m.steps);
    if (r > 0) {
      EXPECT_EQ(m.pace_throttles, 0) << "rank " << r << " paced its sampler";
    }
  }
  expect_same_launch_order_everywhere(*coord);
}

TEST(PipelineMpi, PipelinedDeliversExactlyTheSequentialBatches) {
  const int P = g_world->size(), r = g_world->rank();
  std::vector<test::StandIn::Seen> runs[2];
  for (int pipelined = 0; pipelined < 2; ++pipelined) {
    auto coord = coordinator();
    test::StandInConfig cfg;
    cfg.max_delay_us = pipelined ? 500 : 0;
    test::StandIn si(*coord, cfg);
    EpochScheduler sched(owned_seeds(r, P, 600 + 100 * r), 8, 5);
    PipelineOptions po;
    po.mode = pipelined ? PipelineMode::kPipelined : PipelineMode::kSequential;
    Pipeline p(*coord, sched, si.stages(), po);
    p.run_epoch(3);
    runs[pipelined] = si.seen;
    EXPECT_GT(si.checked_rows.load(), 0);
  }
  ASSERT_EQ(runs[0].size(), runs[1].size());
  ASSERT_GT(runs[0].size(), 50u);
  for (size_t i = 0; i < runs[0].size(); ++i) {
    EXPECT_EQ(runs[1][i].batch, runs[0][i].batch);
    EXPECT_EQ(runs[1][i].digest, runs[0][i].digest) << "batch " << i;
  }
}

// --pipeline auto: every rank makes the same choice (the profile is all-reduced) and the batches
// are the sequential run's, whatever was chosen.
TEST(PipelineMpi, AutoChoosesTheSameOnEveryRankAndTrainsTheSameBatches) {
  const int P = g_world->size(), r = g_world->rank();
  std::vector<test::StandIn::Seen> runs[2];
  std::string chose;
  for (int k = 0; k < 2; ++k) {
    auto coord = coordinator();
    test::StandInConfig cfg;
    cfg.max_delay_us = k == 1 ? 400 * (r + 1) : 0;  // ranks profile different stage times
    test::StandIn si(*coord, cfg);
    EpochScheduler sched(owned_seeds(r, P, 300 + 60 * r), 8, 5);
    PipelineOptions po;
    po.mode = k == 0 ? PipelineMode::kSequential : PipelineMode::kAuto;
    po.threads = 1 + r % 2;  // every rank plans for the fewest cores of any rank
    po.auto_opts.profile_steps = 3;
    po.auto_opts.trial_steps = 2;
    Pipeline p(*coord, sched, si.stages(), po);
    p.run_epoch(0);
    p.run_epoch(1);
    runs[k] = si.seen;
    if (k == 1) {
      ASSERT_NE(p.plan(), nullptr);
      nlohmann::json j = p.auto_json();
      EXPECT_EQ(j["profile"]["cores"], 1);
      chose = j.dump();
    }
  }
  ASSERT_EQ(runs[0].size(), runs[1].size());
  for (size_t i = 0; i < runs[0].size(); ++i) {
    EXPECT_EQ(runs[1][i].batch, runs[0][i].batch);
    EXPECT_EQ(runs[1][i].digest, runs[0][i].digest) << "batch " << i;
  }
  int64_t h[2] = {static_cast<int64_t>(std::hash<std::string>()(chose)), 0};
  h[1] = -h[0];
  g_world->all_reduce(h, 2, DType::kInt64, ReduceOp::kMax);
  EXPECT_EQ(h[0], -h[1]) << "ranks chose differently: " << chose;
}

TEST(PipelineMpi, UnevenPartitionsFinishEveryEpoch) {
  const int P = g_world->size(), r = g_world->rank();
  const int64_t base = 120;
  // Rank 0 has 3x the seeds of rank 1; rank 2 has none; rank 3 has 2x.
  const int64_t mult[4] = {3, 1, 0, 2};
  auto seeds = owned_seeds(r, P, base * mult[r]);
  auto coord = coordinator();
  test::StandInConfig cfg;
  cfg.max_delay_us = 300;
  test::StandIn si(*coord, cfg);
  EpochScheduler sched(seeds, 16, 3);
  Pipeline p(*coord, sched, si.stages());
  for (int e = 0; e < 3; ++e) {
    si.trained_seeds.clear();
    EpochMetrics m = p.run_epoch(e);
    EXPECT_EQ(m.steps, (3 * base + 15) / 16);  // the largest rank's step count, everywhere
    EXPECT_EQ(m.trainer.batches, m.steps);
    std::set<int64_t> used(si.trained_seeds.begin(), si.trained_seeds.end());
    EXPECT_EQ(used, std::set<int64_t>(seeds.begin(), seeds.end())) << "epoch " << e;
  }
  expect_same_launch_order_everywhere(*coord);
}

TEST(PipelineMpi, CoordinationOverhead) {
  // The same stand-in stages without delays, sequential (one thread issues every op, so --ccc off
  // cannot deadlock and is the baseline), then coordinated sequential and pipelined.
  const int P = g_world->size(), r = g_world->rank();
  double t[3];
  int64_t steps = 0;
  for (int k = 0; k < 3; ++k) {
    auto coord = coordinator(k != 0);
    test::StandIn si(*coord, test::StandInConfig{});
    EpochScheduler sched(owned_seeds(r, P, 2000), 8, 5);
    PipelineOptions po;
    po.mode = k == 2 ? PipelineMode::kPipelined : PipelineMode::kSequential;
    Pipeline p(*coord, sched, si.stages(), po);
    EpochMetrics m = p.run_epoch(0);
    t[k] = m.wall_s;
    steps = m.steps;
  }
  if (r == 0) {
    std::printf(
        "[ overhead ] P=%d, %lld batches x 9 ops: sequential ccc off %.1f us/batch, ccc on %.1f "
        "us/batch (%.1f us/op), pipelined ccc on %.1f us/batch\n",
        P, (long long)steps, t[0] / steps * 1e6, t[1] / steps * 1e6,
        (t[1] - t[0]) / steps / 9 * 1e6, t[2] / steps * 1e6);
  }
}

TEST(PipelineMpi, BenchReportsBothModesIdenticallyOnEveryRank) {
  const int P = g_world->size(), r = g_world->rank();
  auto coord = coordinator();
  test::StandInConfig cfg;
  cfg.max_delay_us = 400;
  test::StandIn si(*coord, cfg);
  EpochScheduler sched(owned_seeds(r, P, 160 + 40 * r), 4, 5);
  PipelineBenchOptions bo;
  bo.warmup_epochs = 0;
  bo.epochs = 1;
  nlohmann::json j = bench_pipeline(*coord, sched, si.stages(), bo);
  EXPECT_EQ(j["ranks"], P);
  EXPECT_EQ(j["steps_per_epoch"], (160 + 40 * (P - 1) + 3) / 4);
  EXPECT_EQ(j["on"]["epochs"].size(), 1u);
  EXPECT_EQ(j["off"]["epochs"][0]["mode"], "off");
  EXPECT_GT(j["on"]["epochs"][0]["stages"]["loader"]["busy_s"].get<double>(), 0);
  // The speedup is reported, not asserted: timings are for `dsp bench`, never for unit tests (a
  // loaded machine makes any bound flaky).
  EXPECT_NEAR(j["speedup"].get<double>(),
              j["off"]["epoch_s"].get<double>() / j["on"]["epoch_s"].get<double>(), 1e-9);
  // Identical on every rank: compare a hash of the dump.
  std::string dump = j.dump();
  int64_t h[2] = {static_cast<int64_t>(std::hash<std::string>()(dump)), 0};
  h[1] = -h[0];
  g_world->all_reduce(h, 2, DType::kInt64, ReduceOp::kMax);
  EXPECT_EQ(h[0], -h[1]);
  if (r == 0) {
    std::printf("[ bench    ] P=%d: on %.3f s/epoch, off %.3f s/epoch, speedup %.2f\n", P,
                j["on"]["epoch_s"].get<double>(), j["off"]["epoch_s"].get<double>(),
                j["speedup"].get<double>());
  }
}

}  // namespace
}  // namespace dsp

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  dsp::CommOptions opts;
  opts.timeout = std::chrono::seconds(60);
  auto world = std::make_unique<dsp::MpiCommunicator>(opts);
  dsp::g_world = world.get();
  const int failed = dsp::test::run_tests_on_all_ranks(*world);
  dsp::g_world = nullptr;
  world.reset();
  return failed;
}
