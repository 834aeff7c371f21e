// P-invariance under mpiexec -n 1..4, for every backend (tests/backends.hpp): every scheme sampled
// collectively on a P-part partition gives exactly the blocks that a one-part reference sampler
// (CPU backend, self communicator, built on every rank from the same renumbered graph) gives for
// the same seeds; the pull mode equals CSP; seeds another rank owns are rejected on every rank.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "ccc/communicator.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "csp/hetero_reference.hpp"
#include "csp/sampler.hpp"
#include "csp/temporal_reference.hpp"
#include "csp/walks.hpp"
#include "graph/generate.hpp"
#include "layout/partition/partition.hpp"

#include "backends.hpp"
#include "mpi_test_main.hpp"
#include "staged_channel.hpp"

namespace dsp {
namespace {

namespace fs = std::filesystem;
Communicator* g_comm = nullptr;
// The device-space channel a device backend's sampler gets (MPI staged through host memory: pinned
// on a GPU, plain with the emulated backends), or null where none is made (no GPU).
Communicator* g_staged = nullptr;

Communicator& channel_for(const std::string& backend) {
  return backend.rfind("cpu", 0) == 0 ? *g_comm : *g_staged;
}

struct World {
  std::string dir;
  PartitionData part;
  Csr full;  // the whole renumbered graph (concatenated patches)
  PartitionData ref_part;
  std::unique_ptr<Communicator> self = make_communicator("self");
};

// Edge times as a function of the edge's endpoints (so they survive renumbering), in [0, 1000).
std::vector<int64_t> edge_times(const Csr& g) {
  std::vector<int64_t> t(g.num_edges());
  for (int64_t v = 0; v < g.num_nodes; ++v) {
    for (int64_t e = g.rowptr()[v]; e < g.rowptr()[v + 1]; ++e) {
      t[e] = (v * 131 + g.indices.int_at(e) * 71) % 1000;
    }
  }
  return t;
}

World& world() {
  static World* w = [] {
    Communicator& c = *g_comm;
    auto* w = new World;
    int64_t pid = ::getpid();
    c.broadcast(&pid, 1, DType::kInt64, 0);
    w->dir = (fs::temp_directory_path() / fmt::format("dsp_csp_{}_{}", pid, c.size())).string();
    if (c.rank() == 0) {
      CommunityOptions co;
      co.num_nodes = 3000;
      co.num_edges = 24000;
      co.num_communities = 6;
      co.feature_dim = 4;
      co.seed = 21;
      Dataset ds = generate_community(co);
      // edge weights as a function of the edge's endpoints, so they survive renumbering
      std::vector<float> wts(ds.graph.num_edges());
      for (int64_t v = 0; v < ds.graph.num_nodes; ++v) {
        for (int64_t e = ds.graph.rowptr()[v]; e < ds.graph.rowptr()[v + 1]; ++e) {
          wts[e] = 0.25f + static_cast<float>((v * 31 + ds.graph.indices.int_at(e) * 17) % 13);
        }
      }
      ds.graph.weights = Array::from_vector(std::move(wts));
      ds.graph.times = Array::from_vector(edge_times(ds.graph));
      ds.sync_meta();
      PartitionOptions o;
      o.parts = c.size();
      o.verbose = false;
      o.overwrite = true;
      partition_dataset(ds, o, w->dir);
    }
    c.barrier();
    w->part = load_partition(w->dir, c.rank(), c.size());
    // every rank rebuilds the full renumbered graph from all patches
    std::vector<int64_t> ip{0}, idx, tm;
    std::vector<float> wt;
    for (int p = 0; p < c.size(); ++p) {
      PartitionData d = load_partition(w->dir, p, c.size());
      for (int64_t v = 0; v < d.patch.num_nodes; ++v) {
        for (int64_t e = d.patch.rowptr()[v]; e < d.patch.rowptr()[v + 1]; ++e) {
          idx.push_back(d.patch.indices.int_at(e));
          wt.push_back(d.patch.weights.data<float>()[e]);
          tm.push_back(d.patch.times.data<int64_t>()[e]);
        }
        ip.push_back(static_cast<int64_t>(idx.size()));
      }
    }
    w->full.num_nodes = static_cast<int64_t>(ip.size()) - 1;
    w->full.indptr = Array::from_vector(std::move(ip));
    w->full.indices = Array::from_vector(std::move(idx));
    w->full.weights = Array::from_vector(std::move(wt));
    w->full.times = Array::from_vector(std::move(tm));
    w->ref_part = single_part(w->full);
    return w;
  }();
  return *w;
}

// Seeds of this rank for a batch: owned nodes, a different subset per batch.
std::vector<int64_t> my_seeds(int64_t batch, int64_t n) {
  World& w = world();
  int64_t b = w.part.meta.offsets[g_comm->rank()], e = w.part.meta.offsets[g_comm->rank() + 1];
  std::vector<int64_t> s;
  for (int64_t v = b + batch; v < e && static_cast<int64_t>(s.size()) < n; v += 5) s.push_back(v);
  return s;
}

void expect_same(const SampledBatch& a, const SampledBatch& b, const std::string& what) {
  ASSERT_EQ(a.blocks.size(), b.blocks.size()) << what;
  for (size_t l = 0; l < a.blocks.size(); ++l) {
    EXPECT_EQ(a.blocks[l].num_dst, b.blocks[l].num_dst) << what << " layer " << l;
    EXPECT_EQ(a.blocks[l].src_ids, b.blocks[l].src_ids) << what << " layer " << l;
    EXPECT_EQ(a.blocks[l].indptr, b.blocks[l].indptr) << what << " layer " << l;
    EXPECT_EQ(a.blocks[l].indices, b.blocks[l].indices) << what << " layer " << l;
    EXPECT_EQ(a.blocks[l].weights, b.blocks[l].weights) << what << " layer " << l;
  }
}

// A device backend's host round trips over the batches check_scheme samples
// (core/host_traffic.hpp): bounded per sampled layer at any rank count, as the path stands (the
// single-rank figures per scheme are pinned in test_host_traffic.cpp).
void expect_host_traffic(const CollectiveSampler& s, const SamplerOptions& o, int64_t batches,
                         const std::string& what) {
  const HostTraffic h = s.stats().host;
  if (s.backend().memory() == MemorySpace::kHost) {
    EXPECT_EQ(h.syncs + h.reads, 0) << what;
    return;
  }
  // Per layer, as measured: at one rank a node-wise or layer-wise layer reads twice (relabel's
  // sizes, then the block; the nodes layer-wise counts give a task are counted on the host); at
  // 2..4 ranks a node-wise or layer-wise layer reads twice under CSP (the served pick sums, then
  // relabel's sizes with the block: the received picks' count is exact, LayerPicks::exact; the
  // owner counts come with relabel's sizes, the seeds' are counted on the host), LABOR with
  // importance once (its picks are made on the host: relabel's sizes with the block), and waits
  // at most 5.5 times (LABOR with importance, which fetches rows and uploads its picks); pull 19.5
  // and 12 (its served rows are read on the host).
  // With the source ids left on the device (ids_on_device, node-wise), relabel reads only its
  // sizes: one read less per layer at one rank.
  const bool pull = o.mode == SampleMode::kPull;
  const bool labor_i = o.labor() && o.labor()->importance;
  const bool node_wise = !o.layer() && !labor_i;
  const bool alone = g_comm->size() == 1;
  const int64_t layer_batches = batches * static_cast<int64_t>(o.fanouts.size());
  const int64_t resident = o.blocks_on_device && o.ids_on_device && node_wise ? 1 : 0;
  EXPECT_LE(2 * h.syncs, (pull ? 39 : 11) * layer_batches) << what;
  const int64_t reads = pull ? 12 : labor_i ? 1 : alone ? 2 - resident : 2;
  EXPECT_LE(h.reads, reads * layer_batches) << what;
  EXPECT_GT(h.reads, 0) << what;
}

void check_scheme(SamplerOptions o, const std::string& what, const std::string& backend) {
  World& w = world();
  SamplerOptions ro = o;
  ro.mode = SampleMode::kCsp;
  ro.cuda_graphs = false;  // the reference is the CPU sampler's
  CollectiveSampler ref(w.ref_part, *w.self, ro);
  for (SampleMode mode : {SampleMode::kCsp, SampleMode::kPull}) {
    if (o.labor() && mode == SampleMode::kPull) continue;  // LABOR refuses the pull mode
    o.mode = mode;
    CollectiveSampler s(w.part, channel_for(backend), o, test::sampler_backend(backend));
    // captures: a shape is captured when seen the second time, once its buffers have settled
    const int64_t batches = o.cuda_graphs ? 10 : 3;
    for (int64_t batch = 0; batch < batches; ++batch) {
      // rank 1 samples nothing in batch 1: collectives still line up
      std::vector<int64_t> seeds =
          (batch == 1 && g_comm->rank() == 1) ? std::vector<int64_t>{} : my_seeds(batch, 60);
      SampledBatch got = s.sample(seeds, 4, batch);
      SampledBatch want = ref.sample(seeds, 4, batch);
      // ids_on_device: a device backend leaves every block's source ids in its memory
      const bool device = s.backend().memory() == MemorySpace::kDevice;
      for (Block& b : got.blocks) {
        EXPECT_EQ(b.ids_on_device(), device && o.blocks_on_device && o.ids_on_device) << what;
        b.edges_to_host();
      }
      expect_same(got, want, what + (mode == SampleMode::kPull ? " pull" : " csp"));
    }
    expect_host_traffic(s, o, batches, what + (mode == SampleMode::kPull ? " pull" : " csp"));
    if (o.cuda_graphs) {
      EXPECT_GT(s.stats().host.graph_launches, 0) << what;
    }
    if (g_comm->size() > 1 && mode == SampleMode::kCsp) {
      EXPECT_GT(s.stats().tasks_remote, 0) << what;
    }
  }
}

class PInvariance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    DSP_SKIP_UNAVAILABLE_BACKEND(GetParam());
    if (GetParam().rfind("cpu", 0) != 0 && g_staged == nullptr) {
      GTEST_SKIP() << "no device-space channel for a device backend in this build";
    }
  }
  void check_scheme(SamplerOptions o, const std::string& what) {
    dsp::check_scheme(std::move(o), what + " [" + GetParam() + "]", GetParam());
  }
};

TEST_P(PInvariance, UniformWithout) { check_scheme(SamplerOptions{{7, 5, 3}}, "uniform"); }

// dsp train's sampler: blocks and their source ids left in a device backend's memory, the same
// blocks once brought back, and at most 2 reads per node-wise layer at 2..4 ranks (the served
// pick sums and relabel's sizes; 1 at one rank), for every node-wise kernel.
TEST_P(PInvariance, IdsLeftOnTheDevice) {
  SamplerOptions o{{7, 5, 3}};
  o.blocks_on_device = true;
  o.ids_on_device = true;
  check_scheme(o, "uniform, ids on device");
  o.kernel = SampleKernel::kTurbo;
  check_scheme(o, "turbo, ids on device");
  o.kernel = SampleKernel::kDefault;
  o.scheme = LaborSampling{};
  check_scheme(o, "labor-0, ids on device");
  SamplerOptions w{{5, 4}};
  w.scheme = NeighborSampling{true, false};
  w.blocks_on_device = true;
  w.ids_on_device = true;
  check_scheme(w, "weighted, ids on device");
}

// SamplerOptions::cuda_graphs at 1..4 ranks: group (its owner counts read, or known), sample,
// unpermute and relabel (with the next frontier's owner counts) replay their captures, and the
// blocks are the reference's, under CSP and pull, within the same round-trip bounds.
TEST_P(PInvariance, CapturedSequences) {
  if (GetParam().rfind("cpu", 0) == 0) GTEST_SKIP() << "the cpu backend runs no kernels to capture";
  SamplerOptions o{{7, 5, 3}};
  o.cuda_graphs = true;
  check_scheme(o, "uniform, captured");
  o.blocks_on_device = o.ids_on_device = true;
  check_scheme(o, "uniform, ids on device, captured");
  o.kernel = SampleKernel::kTurbo;
  check_scheme(o, "turbo, ids on device, captured");
  SamplerOptions w{{5, 4}};
  w.scheme = NeighborSampling{true, false};
  w.cuda_graphs = true;
  check_scheme(w, "weighted, captured");
  SamplerOptions l{{40, 80}};
  l.scheme = LayerSampling{};
  l.cuda_graphs = true;
  check_scheme(l, "layerwise, captured");
}

TEST_P(PInvariance, UniformWith) {
  SamplerOptions o{{6, 4}};
  o.scheme = NeighborSampling{false, true};
  o.seed = 3;
  check_scheme(o, "uniform+replace");
}

TEST_P(PInvariance, WeightedWithout) {
  SamplerOptions o{{5, 4}};
  o.scheme = NeighborSampling{true, false};
  check_scheme(o, "weighted");
}

TEST_P(PInvariance, WeightedWith) {
  SamplerOptions o{{5, 4}};
  o.scheme = NeighborSampling{true, true};
  check_scheme(o, "weighted+replace");
}

TEST_P(PInvariance, LayerWise) {
  for (bool biased : {false, true}) {
    SamplerOptions o{{40, 80}};
    o.scheme = LayerSampling{biased, true};
    check_scheme(o, biased ? "layerwise biased" : "layerwise");
  }
}

// LABOR-0 (the backends' per-task op), LABOR-1 with batch dependency and LABOR-* with layer
// dependency (the requester's computation over rows fetched from their owners).
TEST_P(PInvariance, Labor) {
  for (int importance : {0, 1, -1}) {
    SamplerOptions o{{6, 4}};
    o.scheme = LaborSampling{importance, importance == -1, importance == 1 ? 2 : 1};
    o.seed = 5;
    check_scheme(o, "labor-" + std::to_string(importance));
  }
}

TEST_P(PInvariance, LayerWiseWithout) {
  SamplerOptions o{{40, 80}};
  o.scheme = LayerSampling{false, false, LayerDraws::kWithout};
  check_scheme(o, "layerwise without");
}

// This rank's pairs for a batch (tests/csp: the caller's own): every other in-edge of each seed
// and its reverse (read from the full graph), a duplicate, and pairs whose dst any rank owns,
// most of them no edge.
CollectiveSampler::ExcludedEdges my_exclusions(const std::vector<int64_t>& seeds, int64_t batch) {
  const Csr& g = world().full;
  CollectiveSampler::ExcludedEdges ex;
  for (int64_t v : seeds) {
    for (int64_t e = g.rowptr()[v]; e < g.rowptr()[v + 1]; e += 2) {
      const int64_t u = g.indices.int_at(e);
      ex.dst.insert(ex.dst.end(), {v, u, v});
      ex.src.insert(ex.src.end(), {u, v, u});
    }
  }
  RngStream s(rng_key(40, batch, g_comm->rank()), 0);
  for (int i = 0; i < 50; ++i) {
    ex.dst.push_back(s.next_u32() % g.num_nodes);
    ex.src.push_back(s.next_u32() % g.num_nodes);
  }
  return ex;
}

// Edge exclusion: at every rank count the blocks equal the one-part reference's for the same
// seeds and pairs (so every owner left out exactly its requesters' entries), in CSP and pull
// mode, and with captured sequences. In batch 1 rank 1 passes no seeds and no pairs; in batch 2
// only rank 0 passes pairs (the others none at all). A device backend finds the excluded entries
// on the device: its round trips keep the bounds of sampling without pairs.
TEST_P(PInvariance, ExcludedEdges) {
  World& w = world();
  const bool cpu = GetParam().rfind("cpu", 0) == 0;
  for (int variant = 0; variant < 4; ++variant) {
    if (variant == 3 && cpu) continue;  // the cpu backend runs no kernels to capture
    SamplerOptions o{{7, 5, 3}};
    o.scheme = NeighborSampling{false, variant == 1};
    o.mode = variant == 2 ? SampleMode::kPull : SampleMode::kCsp;
    o.cuda_graphs = variant == 3;
    o.seed = 5;
    const char* names[] = {"exclusion", "exclusion+replace", "exclusion pull",
                           "exclusion captured"};
    const std::string what = std::string(names[variant]) + " [" + GetParam() + "]";
    SamplerOptions ro = o;
    ro.mode = SampleMode::kCsp;
    ro.cuda_graphs = false;
    CollectiveSampler ref(w.ref_part, *w.self, ro);
    CollectiveSampler s(w.part, channel_for(GetParam()), o, test::sampler_backend(GetParam()));
    const int64_t batches = o.cuda_graphs ? 10 : 4;
    for (int64_t batch = 0; batch < batches; ++batch) {
      const bool idle = batch == 1 && g_comm->rank() == 1;
      std::vector<int64_t> seeds = idle ? std::vector<int64_t>{} : my_seeds(batch, 60);
      CollectiveSampler::ExcludedEdges ex;
      if (!idle && (batch != 2 || g_comm->rank() == 0)) ex = my_exclusions(seeds, batch);
      SampledBatch got = s.sample(seeds, 4, batch, &ex);
      SampledBatch want = ref.sample(seeds, 4, batch, &ex);
      expect_same(got, want, what + " batch " + std::to_string(batch));
      if (batch == 3) {
        EXPECT_GT(got.blocks.back().num_edges(), 0) << what;
        expect_same(s.sample(seeds, 4, batch, nullptr), ref.sample(seeds, 4, batch), what);
      }
    }
    expect_host_traffic(s, o, batches + 1, what);
    if (o.cuda_graphs) {
      EXPECT_GT(s.stats().host.graph_launches, 0) << what;
    }
    int64_t excluded = s.stats().excluded_entries;
    OpOptions oo;
    oo.host_buffers = true;
    g_comm->all_reduce(&excluded, 1, DType::kInt64, ReduceOp::kSum, oo);
    EXPECT_GT(excluded, 0) << what;
  }
}

TEST_P(PInvariance, RandomWalkAndPinSage) {
  World& w = world();
  SamplerOptions o{{1}};
  o.seed = 12;
  WalkSampler s(w.part, channel_for(GetParam()), o.seed);
  WalkSampler ref(w.ref_part, *w.self, o.seed);
  std::vector<int64_t> starts = my_seeds(0, 40);
  if (!starts.empty()) starts.push_back(starts[0]);  // a repeated start: its own draws
  WalkResult a = s.random_walks(starts, 6, 0.2, 1, 2);
  WalkResult b = ref.random_walks(starts, 6, 0.2, 1, 2);
  EXPECT_EQ(a.paths, b.paths);
  PinSageResult pa = s.pinsage_neighbors(my_seeds(1, 20), 8, 4, 0.3, 5);
  PinSageResult pb = ref.pinsage_neighbors(my_seeds(1, 20), 8, 4, 0.3, 5);
  EXPECT_EQ(pa.indptr, pb.indptr);
  EXPECT_EQ(pa.ids, pb.ids);
  EXPECT_EQ(pa.counts, pb.counts);
}

// Temporal sampling: the blocks over (id, time) pairs equal the whole-graph reference
// (tests/csp/temporal_reference.hpp) exactly, for uniform without and with replacement and
// recent, through the backend's combined-key relabel and the host one. Each rank's seeds include
// some ids at two times; rank 1 has none in batch 1. A device backend reads at most 2 times a
// layer.
TEST_P(PInvariance, Temporal) {
  World& w = world();
  using testref::TemporalNode;
  struct Case {
    csp::TemporalStrategy strategy;
    bool replace, host_relabel;
  };
  for (const Case c : {Case{csp::TemporalStrategy::kUniform, false, false},
                       Case{csp::TemporalStrategy::kUniform, true, false},
                       Case{csp::TemporalStrategy::kRecent, false, false},
                       Case{csp::TemporalStrategy::kUniform, false, true}}) {
    SamplerOptions o{{6, 4, 3}};
    o.scheme = TemporalSampling{c.strategy, c.replace, c.host_relabel};
    o.seed = 9;
    CollectiveSampler s(w.part, channel_for(GetParam()), o, test::sampler_backend(GetParam()));
    for (int64_t batch = 0; batch < 3; ++batch) {
      std::vector<int64_t> seeds, times;
      if (!(batch == 1 && g_comm->rank() == 1)) {
        for (int64_t v : my_seeds(batch, 40)) {
          seeds.push_back(v);
          times.push_back(100 + (v * 37 + batch) % 900);
          if (v % 3 == 0) {  // the same id at a second time
            seeds.push_back(v);
            times.push_back(50 + (v * 53) % 950);
          }
        }
      }
      SampledBatch got = s.sample_temporal(seeds, times, 2, batch);
      std::vector<TemporalNode> ts;
      for (size_t i = 0; i < seeds.size(); ++i) {
        if (std::find(ts.begin(), ts.end(), TemporalNode{seeds[i], times[i]}) == ts.end()) {
          ts.push_back({seeds[i], times[i]});
        }
      }
      ASSERT_EQ(ts.size(), seeds.size()) << "the test's seeds repeat a pair";
      const auto want = testref::temporal_reference_sample(
          w.full, ts, {o.fanouts, c.strategy, c.replace, o.seed, 2, batch});
      const std::string what =
          fmt::format("[{}] strategy {} replace {} host {} batch {}", GetParam(),
                      static_cast<int>(c.strategy), c.replace, c.host_relabel, batch);
      ASSERT_EQ(got.blocks.size(), want.size()) << what;
      for (size_t l = 0; l < want.size(); ++l) {
        Block b = got.blocks[l];
        b.edges_to_host();
        std::vector<int64_t> ids, tms;
        for (const TemporalNode& n : want[l].src) {
          ids.push_back(n.id);
          tms.push_back(n.time);
        }
        EXPECT_EQ(b.num_dst, want[l].num_dst) << what << " layer " << l;
        EXPECT_EQ(b.src_ids, ids) << what << " layer " << l;
        EXPECT_EQ(b.src_times, tms) << what << " layer " << l;
        EXPECT_EQ(b.indptr, want[l].indptr) << what << " layer " << l;
        EXPECT_EQ(b.indices, want[l].indices) << what << " layer " << l;
      }
    }
    if (g_comm->size() > 1) {
      EXPECT_GT(s.stats().tasks_remote, 0);
    }
    // The tasks' times and the picks' pair keys made where they are (SamplerBackend::gather,
    // pair_keys): a temporal layer reads what a node-wise one does, at most 2 times (relabel's
    // sizes and block at one rank; the served pick sums and relabel's one read at 2..4 ranks).
    if (!c.host_relabel && s.backend().memory() == MemorySpace::kDevice) {
      EXPECT_LE(s.stats().host.reads, 2 * 3 * static_cast<int64_t>(o.fanouts.size()));
      EXPECT_GT(s.stats().host.reads, 0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, PInvariance, ::testing::ValuesIn(test::sampler_backend_names()),
                         [](const auto& info) {
                           std::string b = info.param;
                           std::replace(b.begin(), b.end(), '-', '_');
                           return b;
                         });

// Heterogeneous graphs: a P-part partition of the typed fixture (tests/graph/hetero_fixture.hpp)
// samples per relation exactly the blocks the whole-graph reference gives for the same seeds, with
// every relation's tasks of a layer in one CSP round.
struct HeteroWorld {
  std::string dir;
  PartitionData part;
  testref::HeteroWhole whole;
};
HeteroWorld& hetero_world() {
  static HeteroWorld* w = [] {
    Communicator& c = *g_comm;
    auto* w = new HeteroWorld;
    w->dir = world().dir + "_hetero";
    if (c.rank() == 0) {
      PartitionOptions o;
      o.parts = c.size();
      o.verbose = false;
      o.overwrite = true;
      partition_dataset(hetero_union(testref::hetero_fixture()), o, w->dir);
    }
    c.barrier();
    w->part = load_partition(w->dir, c.rank(), c.size());
    w->whole = testref::hetero_whole(w->dir, c.size());
    return w;
  }();
  return *w;
}

TEST_P(PInvariance, Heterogeneous) {
  HeteroWorld& w = hetero_world();
  SamplerOptions o;
  parse_fanouts_option("cites:3,writes:2,*:1;cites:2,rev_writes:3,*:2", o.fanouts,
                       o.relation_fanouts);
  o.seed = 9;
  CollectiveSampler s(w.part, channel_for(GetParam()), o, test::sampler_backend(GetParam()));
  for (int64_t batch = 0; batch < 3; ++batch) {
    std::vector<int64_t> seeds;
    const int64_t* t = w.part.seeds.data<int64_t>();
    for (int64_t i = batch; i < w.part.seeds.dim(0); i += 3) seeds.push_back(t[i]);
    if (batch == 1 && g_comm->rank() == 1) seeds.clear();  // collectives still line up
    SampledBatch got = s.sample(seeds, 3, batch);
    const auto want = testref::hetero_reference(w.whole, *w.part.meta.hetero, seeds,
                                                s.relation_fanouts(), 9, 3, batch);
    ASSERT_EQ(got.blocks.size(), want.size());
    for (size_t l = 0; l < want.size(); ++l) {
      EXPECT_EQ(got.blocks[l].src_ids, want[l].src_ids) << l;
      EXPECT_EQ(got.blocks[l].indptr, want[l].indptr) << l;
      EXPECT_EQ(got.blocks[l].indices, want[l].indices) << l;
      EXPECT_EQ(got.blocks[l].edge_types, want[l].edge_types) << l;
      EXPECT_EQ(got.blocks[l].src_types, want[l].src_types) << l;
    }
  }
  // one shuffle per layer for all relations: tasks of other ranks' nodes went to their owners
  if (g_comm->size() > 1) {
    EXPECT_GT(s.stats().tasks_remote, 0);
  }
}

TEST(BadInput, SeedOwnedByAnotherRankFailsEverywhere) {
  World& w = world();
  CollectiveSampler s(w.part, *g_comm, SamplerOptions{{3}});
  if (g_comm->size() == 1) {
    EXPECT_THROW(s.sample({w.part.meta.num_nodes}, 0, 0), InvalidArgument);
    return;
  }
  // only rank 0 passes a bad seed (one rank 1 owns); every rank must throw, none may hang
  std::vector<int64_t> seeds = my_seeds(0, 5);
  if (g_comm->rank() == 0) seeds.push_back(w.part.meta.offsets[1]);
  EXPECT_THROW(s.sample(seeds, 0, 0), InvalidArgument);
  // and the sampler is still usable afterwards
  SampledBatch ok = s.sample(my_seeds(0, 5), 0, 0);
  EXPECT_EQ(ok.blocks.size(), 1u);
}

// A refused combination (biased sampling with pairs) on one rank makes every rank throw, that
// rank with the reason; the sampler is usable afterwards.
TEST(BadInput, ExclusionRefusedOnEveryRank) {
  World& w = world();
  SamplerOptions o{{3}};
  o.scheme = NeighborSampling{true, false};
  CollectiveSampler s(w.part, *g_comm, o);
  CollectiveSampler::ExcludedEdges ex;
  const std::vector<int64_t> seeds = my_seeds(0, 5);
  if (g_comm->rank() == 0 && !seeds.empty()) {
    ex.dst.push_back(seeds[0]);
    ex.src.push_back(0);
  }
  try {
    s.sample(seeds, 0, 0, &ex);
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), g_comm->rank() == 0
                               ? "sampler: edge exclusion supports node-wise uniform sampling; "
                                 "biased and layer-wise sampling are not supported"
                               : "sampler: another rank passed invalid input");
  }
  EXPECT_EQ(s.sample(seeds, 0, 0).blocks.size(), 1u);
}

#ifndef DSP_TEST_CUDA
// A device backend's tasks and picks cannot go through a host-memory communicator: one clear error
// when the sampler is built (a single rank never exchanges them, so it may).
TEST(BadInput, DeviceBackendNeedsADeviceSpaceChannel) {
  World& w = world();
  auto make = [&] {
    CollectiveSampler s(w.part, *g_comm, SamplerOptions{{3}}, test::sampler_backend("emulated"));
  };
  if (g_comm->size() == 1) {
    EXPECT_NO_THROW(make());
    return;
  }
  try {
    make();
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(
        e.what(),
        "sampler: the emulated-device backend keeps its tasks and picks in device memory, and "
        "the 'mpi' communicator moves host memory only (give the sampler a device-space "
        "channel: nccl, or one staged through host memory)");
  }
}
#endif

}  // namespace
}  // namespace dsp

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  dsp::CommOptions opts;
  opts.timeout = std::chrono::seconds(60);
  auto comm = dsp::make_communicator("mpi", opts);
  if (dsp::test::no_cuda_device(comm->rank())) return dsp::test::kSkipExitCode;
  dsp::g_comm = comm.get();
  std::unique_ptr<dsp::Communicator> staged = dsp::test::make_staged_channel(opts, comm->rank());
  dsp::g_staged = staged.get();
  const int failed = dsp::test::run_tests_on_all_ranks(*comm);
  dsp::g_staged = nullptr;
  staged.reset();
  if (comm->rank() == 0) {
    std::error_code ec;
    std::filesystem::remove_all(dsp::world().dir, ec);
    std::filesystem::remove_all(dsp::world().dir + "_hetero", ec);
  }
  dsp::g_comm = nullptr;
  comm.reset();
  return failed;
}
