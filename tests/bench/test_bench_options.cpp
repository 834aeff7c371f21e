// `dsp bench`'s options, each declared once with the module it measures: every flag of the four
// benches (a user's command line keeps working), the naming rule of their keys, the defaults, and
// the messages of their one validate().
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bench/bench_memory.hpp"
#include "bench/cache_bench.hpp"
#include "bench/gather_bench.hpp"
#include "bench/pipeline_bench.hpp"
#include "bench/sample_bench.hpp"
#include "core/error.hpp"
#include "error_of.hpp"

namespace dsp {
namespace {

template <class C>
std::vector<std::string> flags_of(const OptionTable<C>& table) {
  std::vector<std::string> v;
  for (const Option<C>& o : table) v.push_back(o.flag);
  return v;
}

// Every option has a flag "--a-b", the key "a_b" and a help line; no flag twice.
template <class C>
void expect_named_by_rule(const OptionTable<C>& table) {
  std::vector<std::string> seen;
  for (const Option<C>& o : table) {
    SCOPED_TRACE(o.flag);
    ASSERT_EQ(o.flag.rfind("--", 0), 0u);
    std::string key = o.flag.substr(2);
    std::replace(key.begin(), key.end(), '-', '_');
    EXPECT_EQ(o.key, key);
    EXPECT_FALSE(o.help.empty());
    EXPECT_TRUE(o.parse && o.read && o.write);
    EXPECT_EQ(std::count(seen.begin(), seen.end(), o.flag), 0);
    seen.push_back(o.flag);
  }
}

// Parses `flag text` into a default C through the table, as the CLI does.
template <class C>
C parsed(const OptionTable<C>& table, const std::string& flag, const std::string& text) {
  C c;
  for (const Option<C>& o : table)
    if (o.flag == flag) o.parse(c, text);
  return c;
}

// Each bench's own flags; --device (and --topology-memory for the benches that sample) come from
// the rank room's table (pipeline/rank/options.hpp), embedded by the CLI (tools/bench_common.hpp).
TEST(BenchOptions, EveryFlagOfEveryBench) {
  using V = std::vector<std::string>;
  EXPECT_EQ(flags_of(gather_bench_options()),
            (V{"--batch", "--iters", "--threads", "--seed", "--resident", "--json"}));
  EXPECT_EQ(flags_of(sample_bench_options()),
            (V{"--batch-size", "--batches", "--mode", "--biased", "--replace", "--per-layer-bytes",
               "--threads", "--seed", "--json", "--fanouts", "--sample-kernel", "--cuda-graphs",
               "--sampler", "--labor-importance", "--labor-layer-dependency",
               "--labor-batch-dependency", "--layer-draws", "--temporal"}));
  EXPECT_EQ(
      flags_of(cache_bench_options()),
      (V{"--ratios", "--policies", "--batches", "--fanouts", "--batch-size", "--presample-epochs",
         "--orders", "--bfs-sequences", "--threads", "--seed", "--json"}));
  EXPECT_EQ(flags_of(pipeline_bench_options()),
            (V{"--model", "--hidden", "--fanouts", "--batch-size", "--modes", "--roles-switch",
               "--samplers", "--repeats", "--epochs", "--warmup", "--max-steps", "--threads",
               "--backend", "--seed", "--json"}));
}

TEST(BenchOptions, KeysFollowTheFlags) {
  expect_named_by_rule(gather_bench_options());
  expect_named_by_rule(sample_bench_options());
  expect_named_by_rule(cache_bench_options());
  expect_named_by_rule(pipeline_bench_options());
}

TEST(BenchOptions, Defaults) {
  const GatherBenchOptions g;
  EXPECT_EQ(g.batch, 100000);
  EXPECT_EQ(g.iters, 20);
  EXPECT_EQ(g.threads, 1);
  const SampleBenchOptions s;
  EXPECT_EQ(s.base.fanouts, (std::vector<int>{15, 10, 5}));
  EXPECT_EQ(s.batch_size, 1024);
  EXPECT_EQ(s.batches, 20);
  EXPECT_EQ(s.mode, SampleBenchOptions::Modes::kCsp);
  EXPECT_EQ(s.base.kind, SamplerKind::kNeighbor);
  EXPECT_EQ(s.base.kernel, SampleKernel::kDefault);
  EXPECT_FALSE(s.base.biased || s.base.replace || s.per_layer_bytes);
  const SamplerOptions so = s.sampler(SampleMode::kPull, 2);
  EXPECT_EQ(so.fanouts, (std::vector<int>{15, 10}));
  EXPECT_EQ(so.mode, SampleMode::kPull);
  EXPECT_TRUE(so.blocks_on_device);
  const CacheBenchOptions c;
  EXPECT_EQ(c.ratios, "0.05,0.1,0.2");
  EXPECT_EQ(c.policies, "in-degree,out-degree,presample,random");
  EXPECT_EQ(c.batches, 50);
  EXPECT_EQ(c.presample_epochs, "1");
  EXPECT_EQ(c.orders, "random");
  EXPECT_EQ(c.bfs_sequences, 4);
  const PipelineBenchCommand p;
  EXPECT_EQ(p.model, "sage");
  EXPECT_EQ(p.hidden, 256);
  EXPECT_EQ(p.modes, "on,off");
  EXPECT_EQ(p.roles_switch, RoleSwitch::kQueueFull);
  EXPECT_EQ(p.epochs, 2);
  EXPECT_EQ(p.warmup, 1);
  EXPECT_EQ(p.threads, 0);
  EXPECT_EQ(p.backend, "auto");
  const PipelineBenchOptions bo = p.bench();
  EXPECT_EQ(bo.modes, (std::vector<std::string>{"on", "off"}));
  EXPECT_EQ(bo.epochs, 2);
  EXPECT_EQ(bo.warmup_epochs, 1);
}

TEST(BenchOptions, FlagsParseThroughTheTable) {
  EXPECT_EQ(parsed(gather_bench_options(), "--batch", "77").batch, 77);
  EXPECT_EQ(parsed(sample_bench_options(), "--seed", "9").seed, 9u);
  EXPECT_TRUE(parsed(sample_bench_options(), "--per-layer-bytes", "").per_layer_bytes);
  EXPECT_EQ(parsed(pipeline_bench_options(), "--max-steps", "3").max_steps, 3);
  EXPECT_EQ(parsed(cache_bench_options(), "--presample-epochs", "1,2").presample_epochs, "1,2");
  for (const std::string bench : {"gather", "sample", "cache", "pipeline"}) {
    SCOPED_TRACE(bench);
    const std::string msg = "--seed: must be a non-negative integer, got '-1'";
    auto seed = [&] {
      if (bench == "gather") parsed(gather_bench_options(), "--seed", "-1");
      if (bench == "sample") parsed(sample_bench_options(), "--seed", "-1");
      if (bench == "cache") parsed(cache_bench_options(), "--seed", "-1");
      if (bench == "pipeline") parsed(pipeline_bench_options(), "--seed", "-1");
    };
    EXPECT_EQ(test::error_of<InvalidArgument>(seed), msg);
  }
}

TEST(BenchOptions, ValidateGivesTheCliMessages) {
  using test::error_of;
  GatherBenchOptions g;
  EXPECT_EQ(error_of([&] { g.validate(); }), "no error");
  g.iters = 0;
  EXPECT_EQ(error_of<InvalidArgument>([&] { g.validate(); }),
            "--batch, --iters and --threads must be positive");

  SampleBenchOptions s;
  EXPECT_EQ(error_of([&] { s.validate(); }), "no error");
  s.batches = 0;
  EXPECT_EQ(error_of<InvalidArgument>([&] { s.validate(); }),
            "--batch-size, --batches and --threads must be positive");
  s = {};
  EXPECT_EQ(error_of<InvalidArgument>([] { parse_choice<SampleBenchOptions::Modes>("x"); }),
            "unknown mode 'x' (csp, pull, both)");
  s = {};
  s.base.labor_importance = 1;  // the sampler's own check, through the embedded table's options
  EXPECT_EQ(error_of<InvalidArgument>([&] { s.validate(); }),
            "--labor-importance, --labor-layer-dependency and --labor-batch-dependency need "
            "--sampler labor");

  CacheBenchOptions c;
  EXPECT_EQ(error_of([&] { c.validate(); }), "no error");
  c.threads = 0;
  EXPECT_EQ(error_of<InvalidArgument>([&] { c.validate(); }),
            "--batch-size, --batches and --threads must be positive");

  PipelineBenchCommand p;
  EXPECT_EQ(error_of([&] { p.validate(); }), "no error");
  for (auto bad : std::vector<void (*)(PipelineBenchCommand&)>{
           [](PipelineBenchCommand& x) { x.hidden = 0; },
           [](PipelineBenchCommand& x) { x.warmup = -1; },
           [](PipelineBenchCommand& x) { x.samplers = -1; },
           [](PipelineBenchCommand& x) { x.repeats = 0; }}) {
    p = {};
    bad(p);
    EXPECT_EQ(error_of<InvalidArgument>([&] { p.validate(); }),
              "--batch-size, --hidden, --epochs, --repeats must be positive; --warmup, "
              "--max-steps, --threads, --samplers >= 0");
  }
  p = {};
  p.roles_switch = RoleSwitch::kOff;
  EXPECT_EQ(error_of<InvalidArgument>([&] { p.validate(); }),
            "--roles-switch off: mode roles-switch switches (on, always or never)");
}

TEST(BenchOptions, StepSeedsAreARandomSubsetOfMaxStepsBatches) {
  PipelineBenchCommand p;
  std::vector<int64_t> seeds(100);
  for (int64_t i = 0; i < 100; ++i) seeds[i] = i;
  EXPECT_EQ(p.step_seeds(seeds), seeds);  // max_steps 0: all
  p.max_steps = 3;
  p.batch_size = 10;
  const std::vector<int64_t> s = p.step_seeds(seeds);
  EXPECT_EQ(s.size(), 30u);
  EXPECT_NE(s, std::vector<int64_t>(seeds.begin(), seeds.begin() + 30));
}

// The benches' batch estimates: node-wise, every frontier node takes the fanout (and the frontier
// saturates at the graph); layer-wise, the fanout is the layer's draws in all, so a layer adds at
// most that many edges and nodes (dsp bench sample --sampler layer --fanouts 500,1000,2000 fits).
TEST(BenchMemory, LayerWiseFanoutsAreEachLayersDrawsInAll) {
  const std::vector<int> f{500, 1000, 2000};
  EXPECT_EQ(batch_nodes_bound(256, f, 200000, false), 200000);
  EXPECT_EQ(batch_nodes_bound(256, f, 200000, true), 256 + 500 + 1000 + 2000);
  EXPECT_EQ(batch_nodes_bound(256, f, 1000, true), 1000);
  // 3500 edges of 64 bytes; frontiers 256, 756, 1756 and the inputs, 3756, 48 bytes a node
  EXPECT_EQ(sampled_batch_bytes(256, f, 200000, 1000000, true),
            uint64_t{3500} * 64 + uint64_t{256 + 756 + 1756 + 3756} * 48);
  // node-wise: 256 x 500 edges, then 128256 nodes x 1000, then the whole graph x 2000
  EXPECT_EQ(sampled_batch_bytes(256, f, 200000, 1000000, false),
            (uint64_t{256} * 500 + uint64_t{128256} * 1000 + uint64_t{200000} * 2000) * 64 +
                uint64_t{256 + 128256 + 200000 + 200000} * 48);
}

// A fanout of -1 takes the frontier's whole rows: the next frontier may be the whole graph, and
// a layer picks at most every edge once (its frontier's nodes are distinct).
TEST(BenchMemory, AllNeighboursAreBoundedByTheGraph) {
  const std::vector<int> f{-1, 10};
  EXPECT_EQ(batch_nodes_bound(256, f, 200000, false), 200000);
  EXPECT_EQ(sampled_batch_bytes(256, {-1}, 200000, 1000000, false),
            uint64_t{1000000} * 64 + uint64_t{256 + 200000} * 48);
  EXPECT_EQ(sampled_batch_bytes(2, {-1}, 200000, 1000000, false),
            uint64_t{400000} * 64 + uint64_t{2 + 200000} * 48);
  EXPECT_EQ(
      sampled_batch_bytes(256, f, 200000, 1000000, false),
      (uint64_t{1000000} + uint64_t{200000} * 10) * 64 + uint64_t{256 + 200000 + 200000} * 48);
}

}  // namespace
}  // namespace dsp
