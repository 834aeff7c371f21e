// The sampler's device seam (csp/backend.hpp): every backend of this binary (tests/backends.hpp:
// the device path executed on the host here, the CUDA backend in the CUDA build's
// test_csp_backends_cuda) gives exactly the CPU backend's blocks, for every scheme, with int32 and
// int64 neighbour ids, with the neighbour array in backend memory and read through map_host.
// Multi-rank equivalence is in mpi/test_csp_mpi.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <set>
#include <unordered_map>
#include <vector>

#include "backends.hpp"
#include "ccc/communicator.hpp"
#include "core/fs.hpp"
#include "core/host_exec.hpp"
#include "core/huge_pages.hpp"
#include "core/rng.hpp"
#include "csp/backend.hpp"
#include "csp/kernel_backend.hpp"
#include "csp/sample_kernels.hpp"
#include "csp/sampler.hpp"
#include "csp/schemes.hpp"
#include "graph/generate.hpp"

namespace dsp {
namespace {

template <class T>
std::unique_ptr<BackendBuffer> upload(SamplerBackend& be, const std::vector<T>& v) {
  auto b = be.make_buffer();
  be.to_backend(b->reserve_n<T>(static_cast<int64_t>(v.size())), v.data(), v.size() * sizeof(T));
  return b;
}
template <class T>
std::vector<T> download(SamplerBackend& be, const BackendBuffer& b, int64_t n) {
  std::vector<T> v(n);
  be.to_host(v.data(), b.data(), n * sizeof(T));
  return v;
}

// A community graph with positive and some zero weights; idx64: the same with int64 ids.
const Csr& weighted_graph(bool idx64) {
  static const Csr g32 = [] {
    CommunityOptions co;
    co.num_nodes = 3000;
    co.num_edges = 20000;
    co.num_communities = 8;
    co.feature_dim = 0;
    co.seed = 21;
    Csr x = generate_community(co).graph;
    std::vector<float> w(static_cast<size_t>(x.num_edges()));
    RngStream s(rng_key(8), 0);
    for (auto& v : w) v = (s.next_u32() % 6 == 0) ? 0.0f : 0.1f + 3 * s.uniform01();
    x.weights = Array::from_vector(std::move(w));
    return x;
  }();
  static const Csr g64 = [] {
    Csr c = g32;
    std::vector<int64_t> idx(static_cast<size_t>(c.num_edges()));
    for (int64_t e = 0; e < c.num_edges(); ++e) idx[e] = c.indices.int_at(e);
    c.indices = Array::from_vector(std::move(idx));
    return c;
  }();
  return idx64 ? g64 : g32;
}

void expect_same_blocks(const SampledBatch& a, const SampledBatch& b) {
  ASSERT_EQ(a.blocks.size(), b.blocks.size());
  for (size_t l = 0; l < a.blocks.size(); ++l) {
    SCOPED_TRACE(l);
    EXPECT_EQ(a.blocks[l].num_dst, b.blocks[l].num_dst);
    EXPECT_EQ(a.blocks[l].num_src, b.blocks[l].num_src);
    EXPECT_EQ(a.blocks[l].indptr, b.blocks[l].indptr);
    EXPECT_EQ(a.blocks[l].indices, b.blocks[l].indices);
    EXPECT_EQ(a.blocks[l].src_ids, b.blocks[l].src_ids);
    EXPECT_EQ(a.blocks[l].weights, b.blocks[l].weights);  // exact: the same float bits
  }
}

// Batches 0..batches-1 of every stride-th node from `batch` on, sampled by both: the same blocks.
// Returns the edges they hold.
int64_t expect_same_batches(CollectiveSampler& want, CollectiveSampler& got, int64_t nodes,
                            int batches, int stride) {
  int64_t edges = 0;
  for (int64_t batch = 0; batch < batches; ++batch) {
    std::vector<int64_t> seeds;
    for (int64_t v = batch; v < nodes; v += stride) seeds.push_back(v);
    SampledBatch a = want.sample(seeds, 1, batch), b = got.sample(seeds, 1, batch);
    expect_same_blocks(a, b);
    for (const Block& bl : a.blocks) edges += bl.num_edges();
  }
  return edges;
}

struct Scheme {
  const char* name;
  SamplerKind scheme;
  bool biased, replace, idx64;
};

class BackendBlocks : public ::testing::TestWithParam<std::tuple<std::string, Scheme>> {
 protected:
  void SetUp() override { DSP_SKIP_UNAVAILABLE_BACKEND(std::get<0>(GetParam())); }
};

TEST_P(BackendBlocks, EqualCpuBackend) {
  const std::string backend = std::get<0>(GetParam());
  const Scheme c = std::get<1>(GetParam());
  // Layer-wise fanouts are draws per layer, not per node: as many as node-wise's picks.
  SamplerOptions o{c.scheme == SamplerKind::kLayer ? std::vector<int>{1000, 3000, 6000}
                                                   : std::vector<int>{9, 4, 3}};
  o.scheme = scheme_of(c.scheme, c.biased, c.replace);
  o.seed = 77;
  PartitionData part = single_part(weighted_graph(c.idx64));
  auto comm = make_communicator("self");
  CollectiveSampler cpu(part, *comm, o);
  CollectiveSampler dev(part, *comm, o, test::sampler_backend(backend));
  EXPECT_EQ(cpu.backend().name(), "cpu");
  EXPECT_NE(dev.backend().name(), "cpu");
  const int64_t edges = expect_same_batches(cpu, dev, part.meta.num_nodes, 3, 23);
  EXPECT_GT(edges, 1000);  // the comparison covered real work
  // Edge arrays left in the backend's memory: the same blocks once brought back, and held blocks
  // keep theirs while later batches are sampled (the arrays are pooled).
  SamplerOptions od = o;
  od.blocks_on_device = true;
  CollectiveSampler devb(part, *comm, od, test::sampler_backend(backend));
  std::vector<SampledBatch> held;
  for (int64_t batch = 0; batch < 3; ++batch) {
    std::vector<int64_t> seeds;
    for (int64_t v = batch; v < part.meta.num_nodes; v += 23) seeds.push_back(v);
    held.push_back(devb.sample(seeds, 1, batch));
  }
  for (int64_t batch = 0; batch < 3; ++batch) {
    std::vector<int64_t> seeds;
    for (int64_t v = batch; v < part.meta.num_nodes; v += 23) seeds.push_back(v);
    SampledBatch want = cpu.sample(seeds, 1, batch);
    SampledBatch& got = held[batch];
    for (size_t l = 0; l < got.blocks.size(); ++l) {
      ASSERT_NE(got.blocks[l].on_device, nullptr);
      EXPECT_TRUE(got.blocks[l].indices.empty());
      EXPECT_EQ(got.blocks[l].num_edges(), want.blocks[l].num_edges());
      got.blocks[l].edges_to_host();
      EXPECT_EQ(got.blocks[l].on_device, nullptr);
    }
    expect_same_blocks(want, got);
  }
  // Degenerate batches: no seeds, one seed.
  expect_same_blocks(cpu.sample({}, 0, 9), dev.sample({}, 0, 9));
  expect_same_blocks(cpu.sample({17}, 0, 10), dev.sample({17}, 0, 10));
}

INSTANTIATE_TEST_SUITE_P(
    Schemes, BackendBlocks,
    ::testing::Combine(
        ::testing::ValuesIn(test::sampler_backend_names(/*with_cpu=*/false, /*with_uva=*/true)),
        ::testing::Values(Scheme{"uniform", SamplerKind::kNeighbor, false, false, false},
                          Scheme{"uniform_replace", SamplerKind::kNeighbor, false, true, false},
                          Scheme{"weighted", SamplerKind::kNeighbor, true, false, false},
                          Scheme{"weighted_replace", SamplerKind::kNeighbor, true, true, false},
                          Scheme{"uniform_idx64", SamplerKind::kNeighbor, false, false, true},
                          Scheme{"weighted_idx64", SamplerKind::kNeighbor, true, false, true},
                          Scheme{"layer", SamplerKind::kLayer, false, false, false},
                          Scheme{"layer_weighted", SamplerKind::kLayer, true, false, false})),
    [](const auto& info) {
      std::string b = std::get<0>(info.param);
      std::replace(b.begin(), b.end(), '-', '_');
      return b + "_" + std::get<1>(info.param).name;
    });

// A fanout of -1 (all neighbours, as DGL's and PyG's) on every backend: each destination's picks
// are its whole row, each entry once (the slots sized by the degree, not by 2^22 picks), plain,
// LABOR and turbo alike; and each equals the CPU backend's blocks.
class BackendAllNeighbours : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { DSP_SKIP_UNAVAILABLE_BACKEND(GetParam()); }
};

TEST_P(BackendAllNeighbours, EveryDestinationTakesItsWholeRow) {
  const Csr& g = weighted_graph(false);
  PartitionData part = single_part(g);
  auto comm = make_communicator("self");
  for (const char* variant : {"plain", "labor", "turbo"}) {
    SCOPED_TRACE(variant);
    SamplerOptions o{{-1, -1}};
    if (std::string(variant) == "labor") o.scheme = LaborSampling{};
    if (std::string(variant) == "turbo") o.kernel = SampleKernel::kTurbo;
    CollectiveSampler cpu(part, *comm, o);
    CollectiveSampler dev(part, *comm, o, test::sampler_backend(GetParam()));
    std::vector<int64_t> seeds;
    for (int64_t v = 3; v < g.num_nodes; v += 41) seeds.push_back(v);
    const SampledBatch b = dev.sample(seeds, 0, 1);
    expect_same_blocks(cpu.sample(seeds, 0, 1), b);
    int64_t edges = 0;
    for (const Block& bl : b.blocks) {
      for (int64_t d = 0; d < bl.num_dst; ++d) {
        const int64_t v = bl.src_ids[d];
        std::multiset<int64_t> want, got;
        for (int64_t e = g.rowptr()[v]; e < g.rowptr()[v + 1]; ++e) want.insert(g.indices.int_at(e));
        for (int64_t e = bl.indptr[d]; e < bl.indptr[d + 1]; ++e) got.insert(bl.src_ids[bl.indices[e]]);
        ASSERT_EQ(got, want) << "destination " << v;
      }
      edges += bl.num_edges();
    }
    EXPECT_GT(edges, 5000);  // two hops of 74 seeds over a graph of mean degree ~7
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendAllNeighbours,
                         ::testing::ValuesIn(test::sampler_backend_names(/*with_cpu=*/true,
                                                                         /*with_uva=*/true)),
                         [](const auto& info) {
                           std::string b = info.param;
                           std::replace(b.begin(), b.end(), '-', '_');
                           return b;
                         });

// The same array as a read-only file mapping (the file is removed once mapped), as a dataset's
// neighbour array is held.
Array mapped_copy(const Array& a) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            fmt::format("dsp_mapped_{}_{}.bin", ::getpid(), a.nbytes()))
                               .string();
  std::ofstream(path, std::ios::binary)
      .write(static_cast<const char*>(a.raw()), static_cast<std::streamsize>(a.nbytes()));
  auto mf = std::make_shared<MappedFile>(path);
  std::filesystem::remove(path);
  return Array(a.dtype(), a.shape(), mf->data(), mf);
}

// A neighbour array beyond the rank's memory share (the node's rank count set absurdly high; no
// huge-page copy) is sampled by many threads at once, each waiting on its page, and with chunks
// of tasks instead of the rank's threads' split: the blocks are the in-memory ones, bit for bit,
// for every node-wise scheme (uniform, weighted, with replacement, turbo, LABOR, exclusions).
TEST(CpuBackend, BeyondMemorySamplesTheSameBlocks) {
  Csr g = weighted_graph(false);
  g.indices = mapped_copy(g.indices);
  PartitionData part = single_part(g);
  ASSERT_TRUE(part.patch.indices.is_mapped());
  auto comm = make_communicator("self");
  struct Variant {
    bool biased, replace, turbo, labor;
  };
  for (Variant v : {Variant{false, false, false, false}, Variant{true, false, false, false},
                    Variant{false, true, false, false}, Variant{false, false, true, false},
                    Variant{false, false, false, true}}) {
    SCOPED_TRACE(::testing::Message() << v.biased << v.replace << v.turbo << v.labor);
    SamplerOptions o{{9, 4, 3}};
    o.scheme =
        scheme_of(v.labor ? SamplerKind::kLabor : SamplerKind::kNeighbor, v.biased, v.replace);
    o.kernel = v.turbo ? SampleKernel::kTurbo : SampleKernel::kDefault;
    o.seed = 78;
    CollectiveSampler in_memory(part, *comm, o);
    ::setenv("DSP_HUGE_PAGES", "0", 1);
    ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "1000000000", 1);
    ASSERT_TRUE(beyond_memory_share(part.patch.indices.nbytes()));
    CollectiveSampler beyond(part, *comm, o);
    ::unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    ::unsetenv("DSP_HUGE_PAGES");
    // frontiers of many waiting chunks
    EXPECT_GT(expect_same_batches(in_memory, beyond, part.meta.num_nodes, 2, 7), 9000);
  }
}

class BackendExclusion : public ::testing::TestWithParam<std::tuple<std::string, Scheme>> {
 protected:
  void SetUp() override { DSP_SKIP_UNAVAILABLE_BACKEND(std::get<0>(GetParam())); }
};

// Edge exclusion: every backend gives the CPU backend's blocks, which differ from the plain ones
// and hold no excluded edge.
TEST_P(BackendExclusion, EqualCpuBackend) {
  const std::string backend = std::get<0>(GetParam());
  const Scheme c = std::get<1>(GetParam());
  SamplerOptions o{{9, 4, 3}};
  o.scheme = NeighborSampling{false, c.replace};
  o.seed = 78;
  const Csr& g = weighted_graph(c.idx64);
  PartitionData part = single_part(g);
  auto comm = make_communicator("self");
  CollectiveSampler cpu(part, *comm, o);
  CollectiveSampler dev(part, *comm, o, test::sampler_backend(backend));
  for (int64_t batch = 0; batch < 3; ++batch) {
    std::vector<int64_t> seeds;
    for (int64_t v = batch; v < part.meta.num_nodes; v += 23) seeds.push_back(v);
    // every other in-edge of each seed and its reverse, plus pairs that hit nothing
    CollectiveSampler::ExcludedEdges ex;
    for (int64_t v : seeds) {
      for (int64_t e = g.rowptr()[v]; e < g.rowptr()[v + 1]; e += 2) {
        const int64_t u = g.indices.int_at(e);
        ex.dst.insert(ex.dst.end(), {v, u});
        ex.src.insert(ex.src.end(), {u, v});
      }
      ex.dst.push_back(v);
      ex.src.push_back((v * 7919) % part.meta.num_nodes);
    }
    SampledBatch a = cpu.sample(seeds, 1, batch, &ex), b = dev.sample(seeds, 1, batch, &ex);
    expect_same_blocks(a, b);
    EXPECT_NE(a.blocks.back().indices, cpu.sample(seeds, 1, batch).blocks.back().indices);
    std::set<std::pair<int64_t, int64_t>> gone;
    for (size_t i = 0; i < ex.dst.size(); ++i) gone.emplace(ex.dst[i], ex.src[i]);
    for (const Block& bl : b.blocks) {
      for (int64_t d = 0; d < bl.num_dst; ++d) {
        for (int64_t e = bl.indptr[d]; e < bl.indptr[d + 1]; ++e) {
          ASSERT_EQ(gone.count({bl.src_ids[d], bl.src_ids[bl.indices[e]]}), 0u);
        }
      }
    }
  }
  EXPECT_GT(dev.stats().excluded_entries, 1000);
  EXPECT_EQ(dev.stats().excluded_entries, cpu.stats().excluded_entries);
}

INSTANTIATE_TEST_SUITE_P(
    Schemes, BackendExclusion,
    ::testing::Combine(
        ::testing::ValuesIn(test::sampler_backend_names(/*with_cpu=*/true, /*with_uva=*/true)),
        ::testing::Values(Scheme{"uniform", SamplerKind::kNeighbor, false, false, false},
                          Scheme{"uniform_replace", SamplerKind::kNeighbor, false, true, false},
                          Scheme{"uniform_idx64", SamplerKind::kNeighbor, false, false, true})),
    [](const auto& info) {
      std::string b = std::get<0>(info.param);
      std::replace(b.begin(), b.end(), '-', '_');
      return b + "_" + std::get<1>(info.param).name;
    });

// SamplerOptions::cuda_graphs: a device backend captures each of a layer's sequences (group,
// sample, unpermute, relabel) once per shape and replays it from then on; the blocks are those of
// the direct sequence, batch after batch (each with its own key, seeds and LABOR variates, which a
// replay must read afresh), for every node-wise scheme, on dsp train's path too, and the replays
// cost no more host round trips.
struct Replayed {
  const char* name;
  bool biased, replace, labor, layer, exclude, resident;
};

class CapturedSampling : public ::testing::TestWithParam<std::tuple<std::string, Replayed>> {
 protected:
  void SetUp() override { DSP_SKIP_UNAVAILABLE_BACKEND(std::get<0>(GetParam())); }
};

TEST_P(CapturedSampling, ReplaysGiveTheDirectBlocks) {
  const std::string backend = std::get<0>(GetParam());
  const Replayed v = std::get<1>(GetParam());
  SamplerOptions o{v.layer ? std::vector<int>{300, 600, 900} : std::vector<int>{9, 4, 3}};
  const SamplerKind kind = v.labor   ? SamplerKind::kLabor
                           : v.layer ? SamplerKind::kLayer
                                     : SamplerKind::kNeighbor;
  o.scheme = scheme_of(kind, v.biased, v.replace);
  o.blocks_on_device = o.ids_on_device = v.resident;
  o.seed = 79;
  SamplerOptions og = o;
  og.cuda_graphs = true;
  const Csr& g = weighted_graph(false);
  PartitionData part = single_part(g);
  auto comm = make_communicator("self");
  CollectiveSampler direct(part, *comm, o, test::sampler_backend(backend));
  CollectiveSampler replayed(part, *comm, og, test::sampler_backend(backend));
  constexpr int64_t kBatches = 16;
  int64_t edges = 0;
  for (int64_t batch = 0; batch < kBatches; ++batch) {
    std::vector<int64_t> seeds;
    for (int64_t v2 = batch % 4; v2 < part.meta.num_nodes; v2 += 23) seeds.push_back(v2);
    CollectiveSampler::ExcludedEdges ex;  // each seed's first in-edge
    for (int64_t s : seeds) {
      if (g.rowptr()[s] == g.rowptr()[s + 1]) continue;
      ex.dst.push_back(s);
      ex.src.push_back(g.indices.int_at(g.rowptr()[s]));
    }
    SampledBatch a = direct.sample(seeds, 1, batch, v.exclude ? &ex : nullptr);
    SampledBatch b = replayed.sample(seeds, 1, batch, v.exclude ? &ex : nullptr);
    for (size_t l = 0; l < a.blocks.size(); ++l) {
      EXPECT_EQ(b.blocks[l].on_device != nullptr, v.resident);
      a.blocks[l].edges_to_host();
      b.blocks[l].edges_to_host();
      edges += a.blocks[l].num_edges();
    }
    expect_same_blocks(a, b);
  }
  EXPECT_GT(edges, 1000 * kBatches);
  const HostTraffic d = direct.stats().host, r = replayed.stats().host;
  EXPECT_EQ(d.graph_launches, 0);
  // The frontier's buffers swap roles every layer (so a shape's arrays differ from one batch to
  // the next) and creeping sizes grow them at first: each sequence replays in 24..39 of the 48
  // layers here. The emulated backends say which sequence replayed (a CUDA one only the total).
  EXPECT_GE(r.graph_launches, 4 * kBatches);
  using Emulated = KernelSamplerBackend<HostExec>;
  if (const auto* k = dynamic_cast<const Emulated*>(&replayed.backend())) {
    const char* seq[] = {"group", "sample", "unpermute", "relabel"};
    for (int q = 0; q < 4; ++q) {
      std::printf("%s: %s replayed in %lld of %lld layers\n", v.name, seq[q],
                  static_cast<long long>(k->replays()[q]), static_cast<long long>(3 * kBatches));
      EXPECT_GE(k->replays()[q], kBatches) << seq[q];
    }
  } else {
    std::printf("%s: %lld replays in %lld batches of 3 layers\n", v.name,
                static_cast<long long>(r.graph_launches), static_cast<long long>(kBatches));
  }
  EXPECT_EQ(r.syncs, d.syncs);
  EXPECT_EQ(r.reads, d.reads);
  EXPECT_EQ(r.read_bytes, d.read_bytes);
}

INSTANTIATE_TEST_SUITE_P(
    Schemes, CapturedSampling,
    ::testing::Combine(
        ::testing::ValuesIn(test::sampler_backend_names(/*with_cpu=*/false, /*with_uva=*/true)),
        ::testing::Values(Replayed{"uniform", false, false, false, false, false, false},
                          Replayed{"weighted_replace", true, true, false, false, false, false},
                          Replayed{"labor", false, false, true, false, false, false},
                          Replayed{"layer", false, false, false, true, false, false},
                          Replayed{"exclusions", false, false, false, false, true, false},
                          Replayed{"resident", false, false, false, false, false, true})),
    [](const auto& info) {
      std::string b = std::get<0>(info.param);
      std::replace(b.begin(), b.end(), '-', '_');
      return b + "_" + std::get<1>(info.param).name;
    });

// Where nothing would be captured, the option is refused, not ignored: the CPU sampler, and LABOR
// with importance rounds (drawn on the host).
TEST(CapturedSampling, RefusedWhereThereIsNothingToCapture) {
  PartitionData part = single_part(weighted_graph(false));
  auto comm = make_communicator("self");
  auto message = [&](const SamplerOptions& o, const SamplerBackendFactory& backend) {
    try {
      CollectiveSampler s(part, *comm, o, backend);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("not refused");
  };
  SamplerOptions o{{9, 4}};
  o.cuda_graphs = true;
  EXPECT_EQ(message(o, nullptr),
            "--cuda-graphs: the cpu sampler backend runs no kernels to capture (it needs a device "
            "backend: cuda, or the emulated device)");
  o.scheme = LaborSampling{1};
  EXPECT_EQ(message(o, nullptr),
            "--cuda-graphs: LABOR with importance rounds (--labor-importance) draws on the host; "
            "it runs no sampling kernels to capture");
}

// The local topology of a one-part, int32-indexed partition.
LocalTopology topology_of(const PartitionData& part) {
  LocalTopology topo;
  topo.num_rows = part.patch.num_nodes;
  topo.num_edges = part.patch.num_edges();
  topo.indptr = part.patch.rowptr();
  topo.indices = part.patch.indices.raw();
  topo.idx32 = true;
  return topo;
}

class BackendRelabel : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { DSP_SKIP_UNAVAILABLE_BACKEND(GetParam()); }
};

// Relabel alone on adversarial keys (many repeats, clustered and spread ids): destination nodes
// first, then local ids in order of first occurrence, exactly as a hash map gives them.
TEST_P(BackendRelabel, FirstOccurrenceOrder) {
  PartitionData part = single_part(weighted_graph(false));
  auto dev = test::sampler_backend(GetParam())(topology_of(part), SamplerOptions{{5}});
  // pad: LayerPicks::total past the picks (a device sample's bound), entries that are no picks
  for (auto [n, pad] :
       {std::pair<int64_t, int64_t>{1, 0}, {2, 0}, {1000, 0}, {200000, 0}, {0, 9}, {1000, 4000}}) {
    SCOPED_TRACE(testing::Message() << n << " picks, " << pad << " padding");
    std::vector<int64_t> dst;
    for (int64_t i = 0; i < std::min<int64_t>(n, 7); ++i) dst.push_back(1000 + 3 * i);
    std::vector<int64_t> offsets(dst.size() + 1, 0), nbrs;
    RngStream s(rng_key(5, n), 0);
    for (int64_t i = 0; i < n; ++i) {
      nbrs.push_back((s.next_u32() % 3 == 0) ? s.next_u32() % 50 : s.next_u32() % 4000000000u);
    }
    offsets.back() = n;  // every pick belongs to the last destination
    std::unordered_map<int64_t, int64_t> first;
    std::vector<int64_t> want_src, want_idx(n);
    for (int64_t v : dst)
      first.emplace(v, static_cast<int64_t>(want_src.size())), want_src.push_back(v);
    for (int64_t i = 0; i < n; ++i) {
      auto it = first.emplace(nbrs[i], static_cast<int64_t>(want_src.size()));
      if (it.second) want_src.push_back(nbrs[i]);
      want_idx[i] = it.first->second;
    }
    std::vector<int64_t> padded = nbrs;
    for (int64_t i = 0; i < pad; ++i) padded.push_back(int64_t{5000000000} + i);
    auto d_dst = upload(*dev, dst), d_off = upload(*dev, offsets), d_nbrs = upload(*dev, padded);
    LayerPicks picks;
    picks.offsets = d_off->as<int64_t>();
    picks.nbrs = d_nbrs->as<int64_t>();
    picks.total = n + pad;
    Block b;
    auto src = dev->make_buffer();
    // The sources per owner under 4 ranges (one empty, the padding's ids in none), counted with
    // the sizes; the padding (no picks) counts for no owner.
    const std::vector<int64_t> ranges{0, 1000, 1000, 2000000000, 4000000000};
    OwnerCounts owners;
    owners.offsets = &ranges;
    std::vector<int64_t> want_owners(4, 0);
    for (int64_t v : want_src) ++want_owners[csp::owner_of(ranges.data(), 4, v)];
    dev->relabel(d_dst->as<int64_t>(), static_cast<int64_t>(dst.size()), picks, 0, b, src.get(),
                 &owners);
    EXPECT_EQ(b.num_dst, static_cast<int64_t>(dst.size()));
    EXPECT_EQ(b.num_src, static_cast<int64_t>(want_src.size()));
    EXPECT_EQ(b.src_ids, want_src);
    EXPECT_EQ(b.indices, want_idx);
    EXPECT_EQ(b.indptr, offsets);
    EXPECT_EQ(owners.counts, want_owners);
    EXPECT_EQ(download<int64_t>(*dev, *src, b.num_src), want_src);
  }
}

// The grouping by owner SamplerBackend::group must give: node i a task of fanout[i] (or
// `uniform` when fanout is empty) unless that is 0, owner chunks in rank order, frontier order
// within one.
struct Grouping {
  std::vector<int64_t> tasks, perm, count;
};
Grouping reference_grouping(const std::vector<int64_t>& frontier,
                            const std::vector<int32_t>& fanout, int uniform,
                            const std::vector<int64_t>& offsets) {
  const int P = static_cast<int>(offsets.size()) - 1;
  Grouping g;
  g.count.assign(P, 0);
  for (int p = 0; p < P; ++p) {
    for (size_t i = 0; i < frontier.size(); ++i) {
      const int k = fanout.empty() ? uniform : fanout[i];
      if (k == 0 || frontier[i] < offsets[p] || frontier[i] >= offsets[p + 1]) continue;
      g.tasks.push_back(csp::pack_task(frontier[i], k));
      g.perm.push_back(static_cast<int64_t>(i));
      ++g.count[p];
    }
  }
  return g;
}

// A uniform fanout with the owners' counts known (as relabel's OwnerCounts give them): the
// grouping every node gets as a task, and a device backend reads nothing back for it.
TEST_P(BackendRelabel, GroupWithKnownOwnerCountsReadsNothing) {
  PartitionData part = single_part(weighted_graph(false));
  auto dev = test::sampler_backend(GetParam())(topology_of(part), SamplerOptions{{5}});
  const std::vector<int64_t> offsets{0, 300, 300, 700, 1000};  // part 1 is empty
  RngStream s(rng_key(9, 2), 0);
  std::vector<int64_t> frontier(5000);
  for (int64_t& v : frontier) v = s.next_u32() % 1000;
  const int64_t nf = static_cast<int64_t>(frontier.size());
  const Grouping want = reference_grouping(frontier, {}, 2, offsets);
  auto d_front = upload(*dev, frontier);
  auto tasks = dev->make_buffer(), perm = dev->make_buffer();
  std::vector<int64_t> count;
  const HostTraffic before = dev->traffic();
  dev->group(d_front->as<int64_t>(), nf, nullptr, 2, offsets, tasks->reserve_n<int64_t>(nf),
             perm->reserve_n<int64_t>(nf), count, want.count.data());
  EXPECT_EQ((dev->traffic() - before).reads, 0);
  EXPECT_EQ(count, want.count);
  EXPECT_EQ(download<int64_t>(*dev, *tasks, nf), want.tasks);
  EXPECT_EQ(download<int64_t>(*dev, *perm, nf), want.perm);
}

// The protocol's other local steps against a plain reference: grouping by owner (stable, nodes
// of fanout 0 skipped, an empty part), per-rank sums of counts, and un-permuting picks.
TEST_P(BackendRelabel, GroupSumAndUnpermute) {
  PartitionData part = single_part(weighted_graph(false));
  auto dev = test::sampler_backend(GetParam())(topology_of(part), SamplerOptions{{5}});
  const std::vector<int64_t> offsets{0, 300, 300, 700, 1000};  // part 1 is empty
  RngStream s(rng_key(9, 1), 0);
  const int64_t nf = 5000;
  std::vector<int64_t> frontier(nf);
  std::vector<int32_t> fanout(nf);
  for (int64_t i = 0; i < nf; ++i) {
    frontier[i] = s.next_u32() % 1000;
    fanout[i] = static_cast<int32_t>(s.next_u32() % 4);  // a quarter get no task
  }
  const Grouping want = reference_grouping(frontier, fanout, 0, offsets);
  const int64_t ng = static_cast<int64_t>(want.tasks.size());
  auto d_front = upload(*dev, frontier), d_fan = upload(*dev, fanout);
  auto tasks = dev->make_buffer(), perm = dev->make_buffer();
  std::vector<int64_t> count;
  dev->group(d_front->as<int64_t>(), nf, d_fan->as<int32_t>(), 0, offsets,
             tasks->reserve_n<int64_t>(nf), perm->reserve_n<int64_t>(nf), count, nullptr);
  EXPECT_EQ(count, want.count);
  EXPECT_EQ(download<int64_t>(*dev, *tasks, ng), want.tasks);
  EXPECT_EQ(download<int64_t>(*dev, *perm, ng), want.perm);

  // counts per grouped position, picks = (position, j)
  std::vector<int32_t> cnt(ng);
  std::vector<int64_t> nbrs;
  for (int64_t pos = 0; pos < ng; ++pos) {
    cnt[pos] = static_cast<int32_t>(s.next_u32() % 5);
    for (int j = 0; j < cnt[pos]; ++j) nbrs.push_back(pos * 10 + j);
  }
  std::vector<int64_t> goff{0};
  for (int p = 0; p < 4; ++p) goff.push_back(goff.back() + want.count[p]);
  std::vector<int64_t> want_sums(4, 0);
  for (int p = 0; p < 4; ++p) {
    for (int64_t pos = goff[p]; pos < goff[p + 1]; ++pos) want_sums[p] += cnt[pos];
  }
  auto d_cnt = upload(*dev, cnt), d_nbrs = upload(*dev, nbrs);
  EXPECT_EQ(dev->segment_sums(d_cnt->as<int32_t>(), goff), want_sums);

  std::vector<int64_t> want_off(nf + 1, 0), want_nbrs;
  std::vector<std::vector<int64_t>> per_node(nf);
  for (int64_t pos = 0, at = 0; pos < ng; at += cnt[pos], ++pos) {
    per_node[want.perm[pos]].assign(nbrs.begin() + at, nbrs.begin() + at + cnt[pos]);
  }
  for (int64_t i = 0; i < nf; ++i) {
    want_off[i + 1] = want_off[i] + static_cast<int64_t>(per_node[i].size());
    want_nbrs.insert(want_nbrs.end(), per_node[i].begin(), per_node[i].end());
  }
  auto off = dev->make_buffer(), out = dev->make_buffer();
  const int64_t picks = static_cast<int64_t>(nbrs.size());
  dev->unpermute(perm->as<int64_t>(), ng, nf, d_cnt->as<int32_t>(), d_nbrs->as<int64_t>(), nullptr,
                 picks, *off, *out, nullptr);
  EXPECT_EQ(download<int64_t>(*dev, *off, nf + 1), want_off);
  EXPECT_EQ(download<int64_t>(*dev, *out, want_off[nf]), want_nbrs);
  // identity order: offsets only, the picks stay where they are
  dev->unpermute(nullptr, ng, ng, d_cnt->as<int32_t>(), d_nbrs->as<int64_t>(), nullptr, picks, *off,
                 *out, nullptr);
  std::vector<int64_t> want_id(ng + 1, 0);
  for (int64_t pos = 0; pos < ng; ++pos) want_id[pos + 1] = want_id[pos] + cnt[pos];
  EXPECT_EQ(download<int64_t>(*dev, *off, ng + 1), want_id);
}

// Layer-wise tasks: fanouts up to the layer's draws F each, F in all (max_picks). The picks are
// those without the bound (the CPU backend's), and a device backend sizes its slots by the bound
// it is given, F, not by every task taking F: it returns F (n x F without a bound).
TEST_P(BackendRelabel, SlotsSizedByTheCallersPickBound) {
  PartitionData part = single_part(weighted_graph(false));
  auto dev = test::sampler_backend(GetParam())(topology_of(part), SamplerOptions{{5}});
  auto cpu = test::sampler_backend("cpu")(topology_of(part), SamplerOptions{{5}});
  constexpr int F = 3000;
  RngStream s(rng_key(9, 3), 0);
  std::vector<int64_t> tasks;
  int64_t draws = 0;
  for (int64_t v = 0; v < 1000 && draws < F; v += 1 + s.next_u32() % 3) {
    const int k = static_cast<int>(std::min<int64_t>(1 + s.next_u32() % 9, F - draws));
    tasks.push_back(csp::pack_task(v, k));
    draws += k;
  }
  const int64_t n = static_cast<int64_t>(tasks.size());
  ASSERT_GT(n * F, 100 * int64_t{F});  // a bound far below n x F
  auto run = [&](SamplerBackend& b, int64_t max_picks, std::vector<int32_t>& cnt,
                 std::vector<int64_t>& nbrs) {
    auto d_tasks = upload(b, tasks), d_cnt = b.make_buffer(), d_nbrs = b.make_buffer();
    const int64_t room = b.sample(d_tasks->as<int64_t>(), n, F, max_picks, 77,
                                  d_cnt->reserve_n<int32_t>(n), *d_nbrs, nullptr, nullptr);
    cnt = download<int32_t>(b, *d_cnt, n);
    const int64_t picks = std::accumulate(cnt.begin(), cnt.end(), int64_t{0});
    nbrs = download<int64_t>(b, *d_nbrs, picks);
    return room;
  };
  std::vector<int32_t> want_cnt, cnt;
  std::vector<int64_t> want_nbrs, nbrs;
  const int64_t picks = run(*cpu, -1, want_cnt, want_nbrs);  // exact on the host
  const bool host = dev->memory() == MemorySpace::kHost;
  EXPECT_EQ(run(*dev, F, cnt, nbrs), host ? picks : int64_t{F});
  EXPECT_EQ(cnt, want_cnt);
  EXPECT_EQ(nbrs, want_nbrs);
  EXPECT_EQ(run(*dev, -1, cnt, nbrs), host ? picks : n * F);
  EXPECT_EQ(nbrs, want_nbrs);
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendRelabel,
                         ::testing::ValuesIn(test::sampler_backend_names(/*with_cpu=*/true)),
                         [](const auto& info) {
                           std::string b = info.param;
                           std::replace(b.begin(), b.end(), '-', '_');
                           return b;
                         });

}  // namespace
}  // namespace dsp
