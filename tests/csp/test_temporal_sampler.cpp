// The collective sampler's temporal sampling at one rank on every backend (the MPI suite checks
// 1..4 ranks): blocks over (id, time) pairs equal to the whole-graph reference, blocks left on the
// device, the combined keys' limit, the option and every refusal's message.
#include <gtest/gtest.h>

#include <algorithm>

#include "backends.hpp"
#include "ccc/communicator.hpp"
#include "csp/sampler.hpp"
#include "csp/temporal_reference.hpp"
#include "error_of.hpp"
#include "graph/generate.hpp"

namespace dsp {
namespace {
using test::error_of;
using testref::TemporalNode;

const Dataset& timed() {
  static Dataset ds = [] {
    CommunityOptions o;
    o.num_nodes = 800;
    o.num_edges = 8000;
    o.num_communities = 8;
    o.num_classes = 4;
    o.feature_dim = 2;
    o.temporal = true;
    o.seed = 11;
    return generate_community(o);
  }();
  return ds;
}

// Seeds 0, 7, 14, ... at their node times, every fourth also at half its time.
void seeds_of(int64_t batch, std::vector<int64_t>& ids, std::vector<int64_t>& times) {
  const int64_t* nt = timed().node_time.data<int64_t>();
  ids.clear();
  times.clear();
  for (int64_t v = batch; v < timed().meta.num_nodes && ids.size() < 90; v += 7) {
    ids.push_back(v);
    times.push_back(nt[v]);
    if (v % 4 == 0) {
      ids.push_back(v);
      times.push_back(nt[v] / 2);
    }
  }
}

void expect_reference(const SampledBatch& got, const std::vector<int64_t>& ids,
                      const std::vector<int64_t>& times, const SamplerOptions& o, int64_t epoch,
                      int64_t batch, const std::string& what) {
  std::vector<TemporalNode> seeds;
  for (size_t i = 0; i < ids.size(); ++i) seeds.push_back({ids[i], times[i]});
  const auto want = testref::temporal_reference_sample(
      timed().graph, seeds,
      {o.fanouts, o.temporal()->strategy, o.temporal()->replace, o.seed, epoch, batch});
  ASSERT_EQ(got.blocks.size(), want.size()) << what;
  EXPECT_EQ(got.seed_times, times) << what;
  for (size_t l = 0; l < want.size(); ++l) {
    Block b = got.blocks[l];
    b.edges_to_host();
    std::vector<int64_t> src, st;
    for (const TemporalNode& n : want[l].src) {
      src.push_back(n.id);
      st.push_back(n.time);
    }
    ASSERT_EQ(b.num_dst, want[l].num_dst) << what << " layer " << l;
    EXPECT_EQ(b.num_src, static_cast<int64_t>(src.size())) << what << " layer " << l;
    EXPECT_EQ(b.src_ids, src) << what << " layer " << l;
    EXPECT_EQ(b.src_times, st) << what << " layer " << l;
    EXPECT_EQ(b.indptr, want[l].indptr) << what << " layer " << l;
    EXPECT_EQ(b.indices, want[l].indices) << what << " layer " << l;
  }
}

class TemporalBackends : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { DSP_SKIP_UNAVAILABLE_BACKEND(GetParam()); }
};

TEST_P(TemporalBackends, BlocksEqualTheReference) {
  const PartitionData part = single_part(timed().graph);
  auto self = make_communicator("self");
  for (const auto strategy : {csp::TemporalStrategy::kUniform, csp::TemporalStrategy::kRecent}) {
    for (const bool replace : {false, true}) {
      for (const bool on_device : {false, true}) {
        SamplerOptions o{{8, 5}};
        o.scheme = TemporalSampling{strategy, replace};
        o.blocks_on_device = on_device;
        o.seed = 3;
        CollectiveSampler s(part, *self, o, test::sampler_backend(GetParam()));
        std::vector<int64_t> ids, times;
        for (int64_t batch = 0; batch < 2; ++batch) {
          seeds_of(batch, ids, times);
          const std::string what =
              fmt::format("[{}] {} replace {} device {} batch {}", GetParam(),
                          static_cast<int>(strategy), replace, on_device, batch);
          expect_reference(s.sample_temporal(ids, times, 1, batch), ids, times, o, 1, batch, what);
        }
        EXPECT_GT(s.stats().sampled_edges, 0);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, TemporalBackends,
                         ::testing::ValuesIn(test::sampler_backend_names()), [](const auto& info) {
                           std::string b = info.param;
                           std::replace(b.begin(), b.end(), '-', '_');
                           return b;
                         });

// Every node a block holds is a pair whose time is a seed's, an edge's source time is its
// destination's, and every picked entry is older than it: the strict-before rule end to end.
// sample() of a temporal sampler samples every seed at its node time: the reference's blocks for
// (v, node_time[v]).
TEST(TemporalSampler, SampleTakesTheNodeTimes) {
  PartitionData part = single_part(timed().graph);
  part.node_time = timed().node_time;
  auto self = make_communicator("self");
  SamplerOptions o{{6, 4}};
  o.scheme = TemporalSampling{};
  o.seed = 5;
  CollectiveSampler s(part, *self, o);
  const int64_t* nt = timed().node_time.data<int64_t>();
  std::vector<int64_t> ids, times;
  for (int64_t v = 3; v < timed().meta.num_nodes; v += 11) {
    ids.push_back(v);
    times.push_back(nt[v]);
  }
  expect_reference(s.sample(ids, 2, 1), ids, times, o, 2, 1, "sample");
}

TEST(TemporalSampler, PicksAreStrictlyBeforeTheirDestinationsTime) {
  const PartitionData part = single_part(timed().graph);
  auto self = make_communicator("self");
  SamplerOptions o{{10, 10}};
  o.scheme = TemporalSampling{};
  CollectiveSampler s(part, *self, o);
  std::vector<int64_t> ids, times;
  seeds_of(0, ids, times);
  const SampledBatch sb = s.sample_temporal(ids, times, 0, 0);
  const Csr& g = timed().graph;
  int64_t edges = 0;
  for (const Block& b : sb.blocks) {
    for (int64_t d = 0; d < b.num_dst; ++d) {
      const int64_t v = b.src_ids[d], T = b.src_times[d];
      for (int64_t e = b.indptr[d]; e < b.indptr[d + 1]; ++e) {
        const int64_t u = b.src_ids[b.indices[e]];
        EXPECT_EQ(b.src_times[b.indices[e]], T);
        int64_t t = -1;
        for (int64_t j = g.rowptr()[v]; j < g.rowptr()[v + 1]; ++j) {
          if (g.indices.int_at(j) == u) t = g.times.data<int64_t>()[j];
        }
        ASSERT_GE(t, 0) << u << " is no in-neighbour of " << v;
        EXPECT_LT(t, T);
        ++edges;
      }
    }
  }
  EXPECT_GT(edges, 100);
}

// The combined keys id * K + k fit the relabel table while N * K < 2^32 (keys < 2^32 - 1); past
// that the host relabel takes over.
TEST(TemporalSampler, CombinedKeysFitAtTheLimit) {
  EXPECT_TRUE(temporal_keys_fit((int64_t{1} << 32) - 1, 1));
  EXPECT_FALSE(temporal_keys_fit(int64_t{1} << 32, 1));
  EXPECT_TRUE(temporal_keys_fit(65535, 65537));  // 2^32 - 1 keys: the largest is 2^32 - 2
  EXPECT_FALSE(temporal_keys_fit(65536, 65536));
  EXPECT_FALSE(temporal_keys_fit(10, 0));
}

TEST(TemporalSampler, OptionAndRefusals) {
  SamplerConfig p;
  const auto& t = sampler_options_table();
  options::find(t, "temporal").parse(p, "recent");
  ASSERT_NE(p.options().temporal(), nullptr);
  EXPECT_EQ(p.options().temporal()->strategy, csp::TemporalStrategy::kRecent);
  EXPECT_EQ(options::find(t, "temporal").write(p), "recent");
  options::find(t, "temporal").parse(p, "off");
  EXPECT_EQ(p.options().temporal(), nullptr);
  EXPECT_EQ(error_of([&] { options::find(t, "temporal").parse(p, "latest"); }),
            "unknown temporal sampling 'latest' (off, uniform, recent)");

  const std::string combination =
      "--temporal samples node-wise among the edges before each seed's time, uniformly or the "
      "most recent (biased, layer-wise and LABOR sampling are not supported with it)";
  for (int c = 0; c < 3; ++c) {
    SamplerConfig o;
    o.temporal = TemporalKind::kUniform;
    o.biased = c == 0;
    o.kind = c == 1 ? SamplerKind::kLabor : c == 2 ? SamplerKind::kLayer : SamplerKind::kNeighbor;
    EXPECT_EQ(error_of([&] { o.options(); }), combination);
  }
  SamplerOptions pull{{5}};
  pull.scheme = TemporalSampling{};
  pull.mode = SampleMode::kPull;
  EXPECT_EQ(error_of([&] { pull.validate(); }), "--temporal: the pull mode is not supported");

  auto self = make_communicator("self");
  Csr untimed = timed().graph;
  untimed.times = Array();
  const PartitionData plain = single_part(untimed);
  SamplerOptions o{{5}};
  o.scheme = TemporalSampling{};
  EXPECT_EQ(error_of([&] { CollectiveSampler(plain, *self, o); }),
            "sampler: --temporal needs edge times (edge_time.npy), and the partition has none");

  const PartitionData part = single_part(timed().graph);
  CollectiveSampler s(part, *self, o);
  EXPECT_EQ(error_of([&] {
              s.sample({1, 2}, 0, 0);
            }),
            "sampler: --temporal samples each seed at its node's time, and the partition has no "
            "node times (node_time.npy)");
  CollectiveSampler::ExcludedEdges ex{{1}, {2}};
  EXPECT_EQ(error_of([&] { s.sample_temporal({1}, {5}, 0, 0, &ex); }),
            "sampler: --temporal: excluded edges (link prediction) are not supported");
  EXPECT_EQ(error_of([&] {
              s.sample_temporal({1, 2}, {5}, 0, 0);
            }),
            "sampler: 1 seed times for 2 seeds (one time per seed)");
  EXPECT_EQ(error_of([&] {
              s.sample_temporal({1, 2, 1}, {5, 6, 5}, 0, 0);
            }),
            "sampler: seed 1 at time 5 appears more than once in the batch");
  EXPECT_EQ(error_of([&] {
              s.sample_temporal({1, 800}, {5, 6}, 0, 0);
            }),
            "sampler: seed 800 is not a node id (graph has 800 nodes)");
  EXPECT_NO_THROW(s.sample_temporal({1, 1}, {5, 6}, 0, 0));  // one id at two times

  CollectiveSampler plain_sampler(part, *self, SamplerOptions{{5}});
  EXPECT_EQ(error_of([&] { plain_sampler.sample_temporal({1}, {5}, 0, 0); }),
            "sampler: seed times given, but the sampler is not temporal (--temporal off)");
}

}  // namespace
}  // namespace dsp
