// `dsp bench project`'s model (bench/projection.hpp): its arithmetic on hand-computed cases,
// its monotonicity (more bytes or slower links never make an epoch shorter, overlap never makes
// it longer, P ranks never beat P times one without communication) and what it refuses.
#include <gtest/gtest.h>

#include "bench/projection.hpp"
#include "error_of.hpp"

namespace dsp {
namespace {

// Links with round figures: 1 GB/s and 1 ms between GPUs, 0.5 GB/s from the host, 0.25 GB/s
// and 4 ms between nodes of 2 GPUs.
ProjectionLinks round_links() {
  ProjectionLinks l;
  l.peer = {1, 1000};
  l.host = {0.5, 0};
  l.net = {0.25, 4000};
  l.gpus_per_node = 2;
  return l;
}

ProjectionRun run_of(int ranks, int64_t steps) {
  ProjectionRun r;
  r.ranks = ranks;
  r.steps = steps;
  r.sample = {5e8, 0, 4};
  r.load = {2e8, 1e8, 3};
  r.allreduce_bytes = 1e9;
  r.allreduce_messages = 1;
  return r;
}

const StageTimes kCompute{0.1, 0.05, 0.2};

TEST(Projection, TwoRanksInOneNodeByHand) {
  const Projection p = project(run_of(2, 10), kCompute, round_links());
  // sample: 5e8 B / 1 GB/s + 4 x 1 ms
  EXPECT_DOUBLE_EQ(p.sample.comm_s, 0.504);
  EXPECT_DOUBLE_EQ(p.sample.total_s(), 0.604);
  // load: 2e8 / 1e9 + 1e8 / 0.5e9 + 3 x 1 ms
  EXPECT_DOUBLE_EQ(p.load.comm_s, 0.403);
  EXPECT_DOUBLE_EQ(p.load.total_s(), 0.453);
  // ring all-reduce of 1e9 B at P = 2: 2 (1/2) 1e9 B / 1 GB/s + 2 x 1 ms
  EXPECT_DOUBLE_EQ(p.train.comm_s, 1.002);
  EXPECT_DOUBLE_EQ(p.train.total_s(), 1.202);
  EXPECT_DOUBLE_EQ(p.batch_sequential_s, 2.259);
  EXPECT_DOUBLE_EQ(p.batch_pipelined_s, 1.202);
  EXPECT_DOUBLE_EQ(p.epoch_sequential_s, 22.59);
  EXPECT_DOUBLE_EQ(p.epoch_pipelined_s, 9 * 1.202 + 2.259);
}

TEST(Projection, FourRanksOverTwoNodesByHand) {
  ProjectionRun r = run_of(4, 5);
  r.sample = {6e8, 0, 4};
  const Projection p = project(r, kCompute, round_links());
  // 2 of a rank's 3 peers are off-node: 2e8 B at 1 GB/s, 4e8 B at 0.25 GB/s, 4 x 4 ms
  EXPECT_DOUBLE_EQ(p.sample.comm_s, 0.2 + 1.6 + 0.016);
  // ring of 4 with an off-node hop: 2 (3/4) 1e9 B / 0.25 GB/s + 2 x 3 x 4 ms
  EXPECT_DOUBLE_EQ(p.train.comm_s, 6.0 + 0.024);
  EXPECT_DOUBLE_EQ(peer_seconds(6e8, 4, 4, round_links()), p.sample.comm_s);
  EXPECT_DOUBLE_EQ(allreduce_seconds(1e9, 1, 4, round_links()), p.train.comm_s);
}

TEST(Projection, OneRankPaysOnlyTheHostLink) {
  const Projection p = project(run_of(1, 20), kCompute, round_links());
  EXPECT_EQ(p.sample.comm_s, 0.0);
  EXPECT_DOUBLE_EQ(p.load.comm_s, 0.2);  // the cold rows still come over PCIe
  EXPECT_EQ(p.train.comm_s, 0.0);
  EXPECT_EQ(peer_seconds(1e9, 10, 1, round_links()), 0.0);
  EXPECT_EQ(allreduce_seconds(1e9, 10, 1, round_links()), 0.0);
}

TEST(Projection, SpeedupsAgainstOneRank) {
  ProjectionRun one{1, 20, {}, {}, 0, 0};
  ProjectionRun two{2, 10, {}, {}, 0, 0};
  // given out of order: the result is in increasing P
  const std::vector<Projection> all = project_all({two, one}, kCompute, round_links());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].ranks, 1);
  EXPECT_DOUBLE_EQ(all[0].epoch_sequential_s, 7.0);
  EXPECT_DOUBLE_EQ(all[0].epoch_pipelined_s, 19 * 0.2 + 0.35);
  EXPECT_DOUBLE_EQ(all[1].epoch_sequential_s, 3.5);
  EXPECT_DOUBLE_EQ(all[1].epoch_pipelined_s, 9 * 0.2 + 0.35);
  EXPECT_DOUBLE_EQ(all[0].speedup_sequential, 1.0);
  EXPECT_DOUBLE_EQ(all[1].speedup_sequential, 2.0);
  EXPECT_DOUBLE_EQ(all[1].speedup_pipelined, (19 * 0.2 + 0.35) / (9 * 0.2 + 0.35));
}

TEST(Projection, StepsPerRank) {
  EXPECT_EQ(steps_per_rank(196615, 1, 1024), 193);
  EXPECT_EQ(steps_per_rank(196615, 8, 1024), 25);
  EXPECT_EQ(steps_per_rank(2048, 2, 1024), 1);
  EXPECT_EQ(steps_per_rank(2049, 2, 1024), 2);
}

// Every volume, grown one at a time, lengthens both epochs or leaves them as they were; the
// faster each link, the shorter.
TEST(Projection, MoreBytesOrSlowerLinksNeverShortenAnEpoch) {
  for (int ranks : {1, 2, 3, 4, 8}) {
    const ProjectionRun base = run_of(ranks, 7);
    const Projection b = project(base, kCompute, round_links());
    for (int field = 0; field < 8; ++field) {
      ProjectionRun r = base;
      double* f[8] = {&r.sample.peer_bytes, &r.sample.host_bytes, &r.sample.messages,
                      &r.load.peer_bytes,   &r.load.host_bytes,   &r.load.messages,
                      &r.allreduce_bytes,   &r.allreduce_messages};
      *f[field] = 2 * *f[field] + 1;
      const Projection p = project(r, kCompute, round_links());
      EXPECT_GE(p.epoch_sequential_s, b.epoch_sequential_s) << ranks << " " << field;
      EXPECT_GE(p.epoch_pipelined_s, b.epoch_pipelined_s) << ranks << " " << field;
      if (ranks > 1 || field == 1 || field == 4) {
        EXPECT_GT(p.epoch_sequential_s, b.epoch_sequential_s) << ranks << " " << field;
      }
    }
    ProjectionLinks fast = round_links();
    fast.peer.gbps *= 2;
    fast.net.gbps *= 2;
    fast.host.gbps *= 2;
    const Projection f = project(base, kCompute, fast);
    EXPECT_LT(f.epoch_sequential_s, b.epoch_sequential_s) << ranks;
    EXPECT_LE(f.epoch_pipelined_s, b.epoch_pipelined_s) << ranks;
  }
}

// Overlap never costs: the pipelined epoch is at most the sequential one, equal with one batch.
// Without communication, P ranks are at most P times as fast as one and more ranks never slower.
TEST(Projection, OverlapAndRanksBoundTheSpeedup) {
  const StageTimes c[3] = {{0.1, 0.05, 0.2}, {0.3, 0.01, 0.01}, {0.0, 0.0, 0.4}};
  for (const StageTimes& ct : c) {
    std::vector<ProjectionRun> runs;
    for (int ranks : {1, 2, 3, 4, 5, 6, 7, 8}) {
      runs.push_back({ranks, steps_per_rank(196615, ranks, 1024), {}, {}, 0, 0});
    }
    const std::vector<Projection> all = project_all(runs, ct, round_links());
    for (size_t i = 0; i < all.size(); ++i) {
      const Projection& p = all[i];
      EXPECT_LE(p.epoch_pipelined_s, p.epoch_sequential_s * (1 + 1e-12));  // equal: one stage
      EXPECT_LE(p.speedup_sequential, p.ranks * (1 + 1e-12));
      EXPECT_LE(p.speedup_pipelined, p.ranks * (1 + 1e-12));
      if (i > 0) EXPECT_LE(p.epoch_pipelined_s, all[i - 1].epoch_pipelined_s);
      if (i > 0) EXPECT_LE(p.epoch_sequential_s, all[i - 1].epoch_sequential_s);
    }
  }
  const Projection one = project(run_of(2, 1), kCompute, round_links());
  EXPECT_DOUBLE_EQ(one.epoch_pipelined_s, one.epoch_sequential_s);
}

TEST(Projection, RefusesWhatIsNotAModel) {
  using test::error_of;
  ProjectionLinks l = round_links();
  l.peer.gbps = 0;
  EXPECT_EQ(error_of<InvalidArgument>([&] { project(run_of(2, 1), kCompute, l); }),
            "projection: the peer link's bandwidth must be positive, got 0 GB/s");
  ProjectionRun r = run_of(2, 0);
  EXPECT_EQ(error_of<InvalidArgument>([&] { project(r, kCompute, round_links()); }),
            "projection: 2 rank(s): batches per rank must be >= 1, got 0");
  r = run_of(2, 1);
  r.load.peer_bytes = -1;
  EXPECT_EQ(error_of<InvalidArgument>([&] { project(r, kCompute, round_links()); }),
            "projection: peer bytes must be finite and >= 0, got -1");
  EXPECT_EQ(
      error_of<InvalidArgument>([&] { project_all({run_of(2, 1)}, kCompute, round_links()); }),
      "projection: the speedups need a run of 1 rank");
  EXPECT_EQ(error_of<InvalidArgument>([&] {
              project_all({run_of(1, 1), run_of(1, 2)}, kCompute, round_links());
            }),
            "projection: two runs of 1 rank(s)");
}

TEST(Projection, ReadsTheBenchFiles) {
  const nlohmann::json v = {
      {"bench", "volumes"},
      {"ranks", 4},
      {"steps_per_epoch", 12},
      {"per_batch",
       {{"sample",
         {{"peer_bytes", 10.0}, {"host_bytes", 0.0}, {"messages", 12}, {"compute_s", 0.5}}},
        {"load", {{"peer_bytes", 20.0}, {"host_bytes", 3.0}, {"messages", 3}, {"compute_s", 0.25}}},
        {"train", {{"allreduce_bytes", 40.0}, {"messages", 2}, {"compute_s", 1.0}}}}}};
  const ProjectionRun r = projection_run_from_json(v, "v.json");
  EXPECT_EQ(r.ranks, 4);
  EXPECT_EQ(r.steps, 12);
  EXPECT_EQ(r.sample.peer_bytes, 10.0);
  EXPECT_EQ(r.sample.messages, 12.0);
  EXPECT_EQ(r.load.host_bytes, 3.0);
  EXPECT_EQ(r.allreduce_bytes, 40.0);
  EXPECT_EQ(r.allreduce_messages, 2.0);
  const StageTimes t = stage_times_from_json(v, "v.json");
  EXPECT_EQ(t.sample_s, 0.5);
  EXPECT_EQ(t.load_s, 0.25);
  EXPECT_EQ(t.train_s, 1.0);
  // dsp bench pipeline: busy seconds per step of mode off over its measured epochs
  auto epoch = [](double steps, double s, double l, double t) {
    return nlohmann::json{{"steps", steps},
                          {"stages",
                           {{"sampler", {{"busy_s", s}}},
                            {"loader", {{"busy_s", l}}},
                            {"trainer", {{"busy_s", t}}}}}};
  };
  const nlohmann::json p = {{"bench", "pipeline"},
                            {"modes", {"on", "off"}},
                            {"on", {{"epochs", {epoch(1, 9, 9, 9)}}}},
                            {"off", {{"epochs", {epoch(2, 1, 2, 4), epoch(2, 3, 2, 0)}}}}};
  const StageTimes pt = stage_times_from_json(p, "p.json");
  EXPECT_EQ(pt.sample_s, 1.0);
  EXPECT_EQ(pt.load_s, 1.0);
  EXPECT_EQ(pt.train_s, 1.0);
  nlohmann::json bad = v;
  bad["per_batch"]["load"].erase("host_bytes");
  EXPECT_EQ(test::error_of<FormatError>([&] { projection_run_from_json(bad, "v.json"); }),
            "v.json load: no \"host_bytes\"");
  EXPECT_EQ(test::error_of<FormatError>([&] { projection_run_from_json(p, "p.json"); }),
            "p.json: not a `dsp bench volumes --json` file");
}

}  // namespace
}  // namespace dsp
