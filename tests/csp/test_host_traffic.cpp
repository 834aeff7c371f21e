// Host round trips of the device sampler path (issue: a GPU batch that never waits on the host):
// the executor counts every blocking sync and device-to-host read (core/host_traffic.hpp), and the
// emulated device backend issues exactly what the CUDA one does, so the counts are pinned here.
// Bounds are per sampled layer and must not depend on the batch size. The multi-rank bound is in
// mpi/test_csp_mpi.cpp (check_scheme, P = 1..4).
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "backends.hpp"
#include "ccc/communicator.hpp"
#include "csp/backend.hpp"
#include "csp/sampler.hpp"
#include "graph/generate.hpp"

namespace dsp {
namespace {

const Csr& graph() {
  static const Csr g = [] {
    CommunityOptions co;
    co.num_nodes = 5000;
    co.num_edges = 40000;
    co.num_communities = 8;
    co.feature_dim = 0;
    co.seed = 5;
    return generate_community(co).graph;
  }();
  return g;
}

// Each case's syncs and reads per batch of 3 layers as the path stands, exactly: lower them here
// when a change removes round trips. Node-wise: 2 reads per layer, relabel's (the pick and source
// counts in one, then the block), and one sync more per batch (the seeds' upload). It was 7 reads
// per layer before the slots were sized by the fanout bound, the block packed into one read and
// the pick count left on the device for relabel to read with the source count. dsp train's path
// (the block and its source ids left on the device) reads once a layer: relabel's sizes.
struct Case {
  const char* name;
  SamplerOptions opts;
  int64_t syncs, reads;
  int64_t read_bytes = -1;  // exact, where no read depends on the batch; -1: the block is read
  bool exclude = false;     // link prediction: every seed leaves out every other in-edge
};

constexpr int64_t kLayers = 3;
constexpr int64_t kNodeWiseReads = 2 * kLayers, kNodeWiseSyncs = 2 * kLayers + 1;

std::vector<Case> cases() {
  std::vector<Case> c;
  c.push_back({"uniform", SamplerOptions{{10, 5, 3}}, kNodeWiseSyncs, kNodeWiseReads});
  SamplerOptions turbo{{10, 5, 3}};
  turbo.kernel = SampleKernel::kTurbo;
  c.push_back({"turbo", turbo, kNodeWiseSyncs, kNodeWiseReads});  // degree sort on the device
  SamplerOptions labor{{10, 5, 3}};
  labor.scheme = LaborSampling{};
  c.push_back({"labor", labor, kNodeWiseSyncs, kNodeWiseReads});
  SamplerOptions layer{{500, 1000, 2000}};
  layer.scheme = LayerSampling{};
  // + per layer: the per-node counts, drawn on the host and uploaded (a sync); the nodes they
  // give a task are counted on the host too (group reads nothing)
  c.push_back({"layer", layer, kNodeWiseSyncs + kLayers, kNodeWiseReads});
  SamplerOptions dev{{10, 5, 3}};
  dev.blocks_on_device = true;
  // edges stay in device memory: the second read is the source ids
  c.push_back({"blocks_on_device", dev, kNodeWiseSyncs, kNodeWiseReads});
  // dsp train's: the source ids stay too, copied with the block before relabel's one read
  dev.ids_on_device = true;
  // (relabel's two sizes, 16 bytes a layer, whatever the batch)
  c.push_back({"ids_on_device", dev, kLayers + 1, kLayers, 16 * kLayers});
  // edge exclusion: the pairs are uploaded once a batch and each layer's task offsets per
  // requester, the tasks' excluded entries found on the device; nothing more is read
  c.push_back(
      {"uniform, excluding", SamplerOptions{{10, 5, 3}}, kNodeWiseSyncs, kNodeWiseReads, -1, true});
  c.push_back({"ids_on_device, excluding", dev, kLayers + 1, kLayers, 16 * kLayers, true});
  return c;
}

// The traffic of one batch of `n` seeds (every 3rd node from `first`), after a warm-up batch;
// with `exclude`, each seed leaves out every other entry of its row.
HostTraffic batch_traffic(CollectiveSampler& s, int64_t n, int64_t batch, bool exclude = false) {
  std::vector<int64_t> seeds;
  for (int64_t v = batch % 3; static_cast<int64_t>(seeds.size()) < n; v += 3) seeds.push_back(v);
  CollectiveSampler::ExcludedEdges ex;
  const int64_t* ip = graph().rowptr();
  const Csr& g = graph();
  for (int64_t v : exclude ? seeds : std::vector<int64_t>{}) {
    for (int64_t e = ip[v]; e < ip[v + 1]; e += 2) {
      ex.dst.push_back(v);
      ex.src.push_back(g.indices.int_at(e));
    }
  }
  s.reset_stats();
  s.sample(seeds, 0, batch, &ex);
  const HostTraffic t = s.stats().host;
  if (exclude) {
    EXPECT_GT(s.stats().excluded_entries, 0);
  }
  return t;
}

TEST(HostTraffic, BoundedPerLayerWhateverTheBatchSize) {
  auto comm = make_communicator("self");
  const PartitionData part = single_part(graph());
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    CollectiveSampler s(part, *comm, c.opts, test::sampler_backend("emulated"));
    ASSERT_EQ(static_cast<int64_t>(c.opts.fanouts.size()), kLayers);
    const HostTraffic small = batch_traffic(s, 64, 0, c.exclude),
                      large = batch_traffic(s, 1024, 1, c.exclude);
    std::printf("%s: %lld syncs, %lld reads (%lld bytes) per batch of 1024 seeds\n", c.name,
                static_cast<long long>(large.syncs), static_cast<long long>(large.reads),
                static_cast<long long>(large.read_bytes));
    EXPECT_EQ(small.syncs, large.syncs);
    EXPECT_EQ(small.reads, large.reads);
    if (c.read_bytes < 0) {
      EXPECT_GT(large.read_bytes, small.read_bytes);  // the counts, not the bytes, are fixed
    } else {
      EXPECT_EQ(small.read_bytes, c.read_bytes);
      EXPECT_EQ(large.read_bytes, c.read_bytes);
    }
    EXPECT_EQ(large.syncs, c.syncs);
    EXPECT_EQ(large.reads, c.reads);
    EXPECT_GT(large.reads, 0);  // counted at all
  }
}

// Block arrays lent to a consumer on another stream (the trainer's kernels) come back at its
// release point: the arrays of blocks whose consumer recorded their fences are reused after a
// device-side wait each (no host wait: the syncs are those of any batch), those of blocks whose
// consumer recorded nothing without one.
TEST(HostTraffic, LentBlocksComeBackThroughTheirReleaseFence) {
  auto comm = make_communicator("self");
  const PartitionData part = single_part(graph());
  SamplerOptions o{{10, 5, 3}};
  o.blocks_on_device = true;
  o.ids_on_device = true;
  CollectiveSampler s(part, *comm, o, test::sampler_backend("emulated"));
  std::vector<int64_t> seeds;
  for (int64_t v = 0; v < 600; v += 3) seeds.push_back(v);
  {
    SampledBatch b = s.sample(seeds, 0, 0);
    for (Block& k : b.blocks) {
      ASSERT_TRUE(k.on_device && k.on_device->fence);
      k.on_device->fence->record(nullptr);
    }
  }  // let go: the arrays are back in the pool, fenced
  s.reset_stats();
  s.sample(seeds, 0, 1);  // dropped without recording
  EXPECT_EQ(s.stats().host.stream_waits, kLayers);
  EXPECT_EQ(s.stats().host.syncs, kLayers + 1);
  s.reset_stats();
  s.sample(seeds, 0, 2);
  EXPECT_EQ(s.stats().host.stream_waits, 0);
}

// Per-batch buffers are the executor's, grown geometrically and reused (stream-ordered on a GPU):
// once sizes settle, a batch like an earlier one allocates nothing, for every scheme. They settle
// in two batches: the frontier's two buffers swap roles every layer, so with an odd number of
// layers each holds the other's sizes in the second batch (3 growths there, then none).
TEST(HostTraffic, ABatchLikeAnEarlierOneAllocatesNothing) {
  auto comm = make_communicator("self");
  const PartitionData part = single_part(graph());
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    CollectiveSampler s(part, *comm, c.opts, test::sampler_backend("emulated"));
    EXPECT_GT(batch_traffic(s, 1024, 1, c.exclude).allocations, 0);  // counted at all
    EXPECT_LE(batch_traffic(s, 1024, 1, c.exclude).allocations, 3);
    EXPECT_EQ(batch_traffic(s, 1024, 1, c.exclude).allocations, 0);
    // a smaller batch fits the same buffers
    EXPECT_EQ(batch_traffic(s, 512, 2, c.exclude).allocations, 0);
  }
}

TEST(HostTraffic, TheCpuBackendHasNone) {
  auto comm = make_communicator("self");
  const PartitionData part = single_part(graph());
  CollectiveSampler s(part, *comm, SamplerOptions{{10, 5}});
  const HostTraffic t = batch_traffic(s, 256, 0);
  EXPECT_EQ(t.syncs, 0);
  EXPECT_EQ(t.reads, 0);
  EXPECT_EQ(t.allocations, 0);
}

}  // namespace
}  // namespace dsp
