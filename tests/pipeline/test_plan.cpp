// `--pipeline auto`: the plan (BGL's min-max core shares) and the choice are pure functions of the
// profile; TurboGNN's pace control bounds the sampler's lead; the auto pipeline trains exactly the
// batches of the sequential one and says what it chose.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "ccc/coordinator.hpp"
#include "core/error.hpp"
#include "pipeline/pace.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/plan.hpp"
#include "pipeline/scheduler.hpp"
#include "pipeline/standin.hpp"

namespace dsp {
namespace {

PipelineProfile profile(int cores, StageCost s, StageCost l, StageCost t) {
  PipelineProfile p;
  p.cores = cores;
  p.stage = {s, l, t};
  p.seq_batch_s = s.wall_s + l.wall_s + t.wall_s;
  return p;
}

std::vector<int> cpus(int n, int first = 0) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = first + i;
  return v;
}

TEST(PipelinePlan, StageTimeScalesOnlyTheComputingPart) {
  const StageCost serial{1.0, 0.2, 0.8};    // one busy thread out of 4
  const StageCost parallel{1.0, 0.2, 3.2};  // four busy threads
  EXPECT_DOUBLE_EQ(stage_time(serial, 4, 4), 1.0);
  EXPECT_DOUBLE_EQ(stage_time(serial, 4, 1), 1.0);  // a serial stage loses nothing on one core
  EXPECT_DOUBLE_EQ(stage_time(parallel, 4, 4), 1.0);
  EXPECT_DOUBLE_EQ(stage_time(parallel, 4, 2), 0.2 + 1.6);
  EXPECT_DOUBLE_EQ(stage_time(parallel, 4, 1), 0.2 + 3.2);
  EXPECT_THROW(stage_time(serial, 4, 0), InvalidArgument);
  // Measured on a 2-rank R-MAT job (one core per rank): the trainer's process burnt 0.332 CPU-s
  // in 0.339 s of which 0.073 s waiting in its all-reduce. On its one core it takes its wall
  // time, not 0.073 + 0.332.
  const StageCost waits{0.339, 0.073, 0.332};
  EXPECT_NEAR(stage_time(waits, 1, 1), 0.339, 1e-12);
  EXPECT_DOUBLE_EQ(stage_time(waits, 2, 1), 0.073 + 0.332);  // half its CPU came from a 2nd core
}

TEST(PipelinePlan, OneComputeBoundCoreStaysSequential) {
  // One core, every stage computing (no waiting): overlap cannot help, so no trial.
  auto p = profile(1, {0.05, 0, 0.05}, {0.05, 0, 0.05}, {1.0, 0, 1.0});
  StagePlan plan = plan_stages(p, cpus(1));
  EXPECT_EQ(plan.shares.layout, "shared");
  EXPECT_DOUBLE_EQ(plan.predicted_off_s, 1.1);
  EXPECT_DOUBLE_EQ(plan.predicted_on_s, 1.1);  // the CPU bound: all work on one core
  EXPECT_FALSE(plan.trial);
  EXPECT_EQ(decide(p, plan).mode, PipelineMode::kSequential);
  EXPECT_NE(plan.why.find("below the 5% margin"), std::string::npos) << plan.why;
}

TEST(PipelinePlan, WaitingInCollectivesIsWorthATrialAndTheTrialDecides) {
  // One core, but the trainer waits 0.4 s per batch for its peers: the sampler can run then.
  auto p = profile(1, {0.3, 0.1, 0.2}, {0.05, 0.0, 0.05}, {1.0, 0.4, 0.6});
  StagePlan plan = plan_stages(p, cpus(1, 5));
  EXPECT_TRUE(plan.trial);
  EXPECT_DOUBLE_EQ(plan.predicted_on_s, 1.0);  // the trainer's own time
  EXPECT_EQ(plan.mode, PipelineMode::kSequential);  // until the trial is measured
  p.on_batch_s = 1.1;                               // 18.5% faster than 1.35
  StagePlan on = decide(p, plan);
  EXPECT_EQ(on.mode, PipelineMode::kPipelined);
  EXPECT_EQ(on.shares.threads, (std::array<int, 3>{1, 1, 1}));
  p.on_batch_s = 1.30;  // 3.7%: within the margin, so the pipeline is not worth it
  EXPECT_EQ(decide(p, plan).mode, PipelineMode::kSequential);
  p.on_batch_s = -1;  // no trial measured: never on
  EXPECT_EQ(decide(p, plan).mode, PipelineMode::kSequential);
}

TEST(PipelinePlan, BalancedStagesGetIsolatedCoresByMinMax) {
  // Four cores; a serial sampler (1 s), a light loader, a trainer that scales to 4 threads
  // (4 CPU-seconds, 1 s on 4 cores). Shared: the CPU bound (5.2 / 4 = 1.3 s); isolated
  // 1 + 1 + 2: max(1, 0.2, 2) = 2; split (sampler+loader on 1, trainer on 3): max(1.2, 1.33).
  auto p = profile(4, {1.0, 0, 1.0}, {0.2, 0, 0.2}, {1.0, 0, 4.0});
  StagePlan plan = plan_stages(p, cpus(4, 8));
  EXPECT_EQ(plan.shares.layout, "shared");
  EXPECT_DOUBLE_EQ(plan.predicted_on_s, 1.3);
  EXPECT_TRUE(plan.trial);
  EXPECT_TRUE(plan.shares.cpus[0].empty());  // shared: unbound
  // A trainer that stops scaling at 2 threads: isolated cores do as well as sharing all of
  // them, and on a tie the stages keep separate cores.
  p = profile(4, {1.0, 0, 1.0}, {1.0, 0, 1.0}, {1.0, 0, 2.0});
  plan = plan_stages(p, cpus(4, 8));
  EXPECT_EQ(plan.shares.layout, "isolated");
  EXPECT_DOUBLE_EQ(plan.predicted_on_s, 1.0);
  EXPECT_EQ(plan.shares.threads, (std::array<int, 3>{1, 1, 2}));
  EXPECT_EQ(plan.shares.cpus[0], std::vector<int>({8}));
  EXPECT_EQ(plan.shares.cpus[1], std::vector<int>({9}));
  EXPECT_EQ(plan.shares.cpus[2], std::vector<int>({10, 11}));
  // Two cores and a trainer that uses both: sharing them predicts max(0.5, 1.6 / 2) = 0.8, the
  // trainer alone on one core 1.0.
  p = profile(2, {0.5, 0, 0.5}, {0.1, 0, 0.1}, {0.5, 0, 1.0});
  plan = plan_stages(p, cpus(2));
  EXPECT_EQ(plan.shares.layout, "shared");
  EXPECT_DOUBLE_EQ(plan.predicted_on_s, 0.8);
  // A trainer that barely scales: sampler and loader share one core, the trainer gets the other.
  p = profile(2, {0.5, 0, 0.5}, {0.1, 0, 0.1}, {0.5, 0, 0.6});
  plan = plan_stages(p, cpus(2));
  EXPECT_EQ(plan.shares.layout, "split");
  EXPECT_DOUBLE_EQ(plan.predicted_on_s, 0.6);
  EXPECT_EQ(plan.shares.cpus[0], std::vector<int>({0}));
  EXPECT_EQ(plan.shares.cpus[2], std::vector<int>({1}));
}

TEST(PipelinePlan, SameProfileSameChoice) {
  auto p = profile(3, {0.31, 0.02, 0.3}, {0.12, 0.05, 0.07}, {0.9, 0.1, 1.7});
  p.on_batch_s = 0.93;
  const StagePlan a = decide(p, plan_stages(p, cpus(3)));
  const StagePlan b = decide(p, plan_stages(p, cpus(3)));
  EXPECT_EQ(a.to_json(), b.to_json());
  EXPECT_EQ(a.why, b.why);
  EXPECT_THROW(plan_stages(p, cpus(2)), InvalidArgument);  // the cpus must match the profile
}

TEST(PaceControl, BoundsTheLeadAndLoosensWhenTheConsumerStarves) {
  PaceController pace(34, 5);
  // A producer that never waits for a slow consumer: the lead grows 1..5, then the limit falls.
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(pace.wait_turn());
    pace.produced();
  }
  EXPECT_EQ(pace.throttles(), 1);
  EXPECT_EQ(pace.max_ahead(), 5u);
  std::thread consumer([&] {
    for (int i = 0; i < 5; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      pace.consumed(false);
    }
  });
  ASSERT_TRUE(pace.wait_turn());  // blocks until the lead is below 5 / 2 = 2
  consumer.join();
  EXPECT_GT(pace.wait_seconds(), 0.0);
  pace.consumed(true);  // starved: the limit rises again
  PaceController off(34, 5, false);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(off.wait_turn());
    off.produced();
  }
  EXPECT_EQ(off.max_ahead(), 20u);
  EXPECT_EQ(off.throttles(), 0);
  off.abort();
  EXPECT_FALSE(off.wait_turn());
}

// A sampler only a little faster than the trainer: two batches per trainer step, so its lead
// creeps up by one with a trainer step in between and never grows five batches in a row. Pace
// control still stops it at `window` above its lowest lead and holds it near half of that.
TEST(PaceControl, CatchesASamplerThatCreepsAheadBetweenTrainerSteps) {
  PaceController pace(34, 5);
  size_t ahead = 0, late_max = 0;
  for (int step = 0; step < 200; ++step) {
    for (int k = 0; k < 2 && ahead < pace.limit(); ++k) {
      ASSERT_TRUE(pace.wait_turn());  // does not block: the lead is below the limit
      pace.produced();
      ++ahead;
    }
    if (step >= 10) late_max = std::max(late_max, ahead);
    pace.consumed(false);
    --ahead;
  }
  EXPECT_EQ(pace.max_ahead(), 5u);
  EXPECT_EQ(pace.throttles(), 1);
  EXPECT_EQ(late_max, 2u);
}

// A sampler much faster than the trainer, with deep queues: pace control keeps its lead near the
// window instead of the queues' 34 batches; the batches are the same either way.
TEST(PaceControl, SamplerLeadStaysBoundedWithDeepQueues) {
  for (bool pace : {true, false}) {
    auto coord = make_coordinator("self");
    std::vector<int64_t> ids(60 * 4);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i);
    EpochScheduler sched(ids, 4, 3);
    std::vector<int64_t> trained;
    PipelineStages st;
    st.sample = [](int64_t, int64_t, const std::vector<int64_t>& seeds) {
      SampledBatch sb;
      sb.seeds = seeds;
      return sb;
    };
    st.load = [](SampledBatch&& sb) {
      LoadedBatch lb;
      lb.sample = std::move(sb);
      return lb;
    };
    st.train = [&](LoadedBatch&& lb) {
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      trained.push_back(lb.sample.batch);
    };
    PipelineOptions po;
    po.queue_capacity = 16;
    po.pace = pace;
    Pipeline p(*coord, sched, st, po);
    EpochMetrics m = p.run_epoch(0);
    ASSERT_EQ(trained.size(), 60u);
    for (int64_t t = 0; t < 60; ++t) EXPECT_EQ(trained[t], t);
    if (pace) {
      EXPECT_LE(m.ahead_max, 6) << "pace control did not bound the lead";
      EXPECT_GE(m.pace_throttles, 1);
      EXPECT_GT(m.sampler.idle_s, 0);
    } else {
      EXPECT_GE(m.ahead_max, 20) << "without pace control the sampler should run ahead";
      EXPECT_EQ(m.pace_throttles, 0);
    }
    EXPECT_EQ(m.to_json()["queues"]["ahead_max"], m.ahead_max);
  }
}

std::vector<int64_t> iota3(int64_t n) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = 3 * i;
  return v;
}

TEST(PipelineAuto, TrainsTheSequentialBatchesAndSaysWhatItChose) {
  std::vector<test::StandIn::Seen> seen[2];
  for (int k = 0; k < 2; ++k) {
    auto coord = make_coordinator("self");
    test::StandInConfig cfg;
    cfg.max_delay_us = k == 1 ? 300 : 0;
    test::StandIn si(*coord, cfg);
    EpochScheduler sched(iota3(400), 16, 9);  // 25 steps per epoch
    PipelineOptions po;
    po.mode = k == 0 ? PipelineMode::kSequential : PipelineMode::kAuto;
    po.threads = 2;
    po.auto_opts.profile_steps = 3;
    po.auto_opts.trial_steps = 3;
    Pipeline p(*coord, sched, si.stages(), po);
    EpochMetrics e0 = p.run_epoch(0);
    EpochMetrics e1 = p.run_epoch(1);
    EXPECT_EQ(e0.trainer.batches, 25);
    EXPECT_EQ(e1.trainer.batches, 25);
    if (k == 1) {
      EXPECT_EQ(e0.ran, "profile");
      ASSERT_NE(p.plan(), nullptr);
      EXPECT_EQ(e1.ran, name_of(p.plan()->mode));
      nlohmann::json j = p.auto_json();
      EXPECT_EQ(j["decided_at"]["epoch"], 0);
      // Warm-up batch, 3 profiled, 3 trial batches (if the plan asked for a trial).
      EXPECT_EQ(j["decided_at"]["step"], j["trial"].get<bool>() ? 7 : 4);
      EXPECT_EQ(j["profile"]["cores"], 2);
      EXPECT_FALSE(j["why"].get<std::string>().empty());
      EXPECT_EQ(e0.to_json()["mode"], "auto");
    }
    seen[k] = si.seen;
  }
  ASSERT_EQ(seen[0].size(), seen[1].size());
  for (size_t i = 0; i < seen[0].size(); ++i) {
    EXPECT_EQ(seen[0][i].batch, seen[1][i].batch);
    EXPECT_EQ(seen[0][i].digest, seen[1][i].digest) << "batch " << i;
  }
  EXPECT_EQ(parse_choice<PipelineMode>("auto"), PipelineMode::kAuto);
}

}  // namespace
}  // namespace dsp
