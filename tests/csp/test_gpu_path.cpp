// CPU-side check of the GPU sampling path (runs in every build): the CUDA pipeline's per-node
// logic and data layout, executed on the host with the very DSP_HOST_DEVICE functions the kernels
// call (csp/sample_kernels.hpp), reproduces CollectiveSampler's blocks exactly for every scheme the
// kernels cover. Emulated stage by stage as src/csp/cuda runs it: tasks packed with their fanout
// and output slots at the fanout prefix (sample_kernel), picks compacted by the count prefix
// (compact_kernel), then the four-phase relabel (each key's slot keeps its minimum position, first
// occurrences flagged, exclusive scan, lookup), with the insertions in a scrambled order since
// the GPU's atomics give no order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "ccc/communicator.hpp"
#include "core/rng.hpp"
#include "csp/sample_kernels.hpp"
#include "csp/sampler.hpp"
#include "graph/generate.hpp"

namespace dsp {
namespace {

struct GpuPathEmulator {
  const Csr& g;
  SamplerOptions o;
  std::vector<double> cum;  // per-row inclusive prefix sums of the weights, as uploaded

  GpuPathEmulator(const Csr& graph, SamplerOptions opts) : g(graph), o(std::move(opts)) {
    if (o.biased) {
      cum.resize(g.num_edges());
      const int64_t* ip = g.rowptr();
      const float* w = g.weights.data<float>();
      for (int64_t v = 0; v < g.num_nodes; ++v) {
        double acc = 0;
        for (int64_t e = ip[v]; e < ip[v + 1]; ++e) cum[e] = acc += static_cast<double>(w[e]);
      }
    }
  }

  std::vector<int32_t> layer_counts(const std::vector<int64_t>& f, int n, uint64_t key) const {
    std::vector<int32_t> c(f.size(), 0);
    if (f.empty()) return c;
    std::vector<double> cw(f.size());
    double acc = 0;
    for (size_t i = 0; i < f.size(); ++i) {
      const int64_t* ip = g.rowptr();
      acc += o.biased ? (g.degree(f[i]) ? cum[ip[f[i] + 1] - 1] : 0.0)
                      : static_cast<double>(g.degree(f[i]));
      cw[i] = acc;
    }
    RngStream s(key, static_cast<uint64_t>(f[0]), csp::kPurposeLayerWise);
    for (int j = 0; j < n; ++j) {
      int64_t i = csp::weighted_one(cw.data(), static_cast<int64_t>(f.size()), s);
      if (i < 0) break;
      ++c[i];
    }
    return c;
  }

  Block layer(const std::vector<int64_t>& frontier, int fanout, uint64_t key) const {
    const int64_t nd = static_cast<int64_t>(frontier.size());
    std::vector<int32_t> fan = o.scheme == SampleScheme::kLayerWise
                                   ? layer_counts(frontier, fanout, key)
                                   : std::vector<int32_t>(nd, fanout);
    // sample_kernel: one task per destination, picks at out[slot[i], slot[i] + cnt[i]).
    std::vector<int64_t> tasks(nd), slot(nd);
    int64_t total = 0;
    for (int64_t i = 0; i < nd; ++i) {
      tasks[i] = csp::pack_task(frontier[i], fan[i]);
      slot[i] = total;
      total += fan[i];
    }
    std::vector<int32_t> cnt(nd);
    std::vector<int64_t> out(total);
    std::vector<float> outw(total);
    const int64_t* ip = g.rowptr();
    for (int64_t i = nd - 1; i >= 0; --i) {  // any task order
      const int64_t v = csp::task_id(tasks[i]);
      const int64_t p0 = ip[v], deg = ip[v + 1] - p0;
      RngStream s(key, static_cast<uint64_t>(v), csp::kPurposeNodeWise);
      int64_t* op = out.data() + slot[i];
      int c = csp::sample_positions(deg, csp::task_fanout(tasks[i]), o.biased, o.replace,
                                    o.biased ? cum.data() + p0 : nullptr, s, op);
      for (int j = 0; j < c; ++j) {
        if (o.biased) outw[slot[i] + j] = g.weights.data<float>()[p0 + op[j]];
        op[j] = g.indices.int_at(p0 + op[j]);
      }
      cnt[i] = c;
    }
    // compact_kernel: offsets = inclusive scan of the counts behind a 0.
    Block b;
    b.num_dst = nd;
    b.indptr.assign(nd + 1, 0);
    for (int64_t i = 0; i < nd; ++i) b.indptr[i + 1] = b.indptr[i] + cnt[i];
    const int64_t ne = b.indptr[nd];
    std::vector<int64_t> keys(frontier);
    keys.resize(nd + ne);
    if (o.biased) b.weights.resize(ne);
    for (int64_t i = 0; i < nd; ++i) {
      for (int j = 0; j < cnt[i]; ++j) {
        keys[nd + b.indptr[i] + j] = out[slot[i] + j];
        if (o.biased) b.weights[b.indptr[i] + j] = outw[slot[i] + j];
      }
    }
    // relabel: insert (keeping the minimum position per key), flag, scan, assign.
    const int64_t n = nd + ne;
    int bits = 0;
    while ((int64_t{1} << bits) < std::max<int64_t>(2 * n, 1)) ++bits;
    const uint64_t cap = uint64_t{1} << bits, mask = cap - 1;
    const int shift = 64 - bits;
    std::vector<uint64_t> table(cap, 0);
    std::vector<int64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::reverse(order.begin(), order.end());
    for (int64_t k = 0; k + 1 < n; k += 2) std::swap(order[k], order[k + 1]);  // scrambled
    for (int64_t i : order) {
      const uint64_t mine = csp::relabel_slot(keys[i], static_cast<uint64_t>(i));
      uint64_t h = csp::relabel_hash(keys[i], shift);
      while (true) {
        if (table[h] == 0) { table[h] = mine; break; }
        if ((table[h] >> 32) == static_cast<uint64_t>(keys[i] + 1)) {
          table[h] = std::min(table[h], mine);
          break;
        }
        h = (h + 1) & mask;
      }
    }
    std::vector<int64_t> flag(n), scan(n);
    for (int64_t i = 0; i < n; ++i) {
      flag[i] = csp::relabel_find(table.data(), mask, shift, keys[i]) == static_cast<uint32_t>(i);
    }
    if (n) std::exclusive_scan(flag.begin(), flag.end(), scan.begin(), int64_t{0});
    const int64_t num_src = n ? scan[n - 1] + flag[n - 1] : 0;
    b.src_ids.assign(num_src, -1);
    std::vector<int64_t> local(n);
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t first = csp::relabel_find(table.data(), mask, shift, keys[i]);
      local[i] = scan[first];
      if (flag[i]) b.src_ids[scan[i]] = keys[i];
    }
    b.num_src = num_src;
    b.indices.assign(local.begin() + nd, local.end());
    return b;
  }

  SampledBatch sample(const std::vector<int64_t>& seeds, int64_t epoch, int64_t batch) const {
    SampledBatch out;
    std::vector<int64_t> frontier = seeds;
    for (size_t l = 0; l < o.fanouts.size(); ++l) {
      out.blocks.push_back(layer(frontier, o.fanouts[l], rng_key(o.seed, epoch, batch, l)));
      frontier = out.blocks.back().src_ids;
    }
    std::reverse(out.blocks.begin(), out.blocks.end());
    return out;
  }
};

struct Case {
  const char* name;
  SampleScheme scheme;
  bool biased, replace;
};

class GpuPathOnHost : public ::testing::TestWithParam<Case> {};

TEST_P(GpuPathOnHost, ReproducesTheSamplerExactly) {
  const Case c = GetParam();
  static const Csr g = [] {
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
  SamplerOptions o{{9, 4, 3}};
  o.scheme = c.scheme;
  o.biased = c.biased;
  o.replace = c.replace;
  o.seed = 77;
  PartitionData part = single_part(g);
  auto comm = make_communicator("self");
  CollectiveSampler cpu(part, *comm, o);
  GpuPathEmulator emu(g, o);
  for (int64_t batch = 0; batch < 3; ++batch) {
    std::vector<int64_t> seeds;
    for (int64_t v = batch; v < g.num_nodes; v += 23) seeds.push_back(v);
    SampledBatch a = cpu.sample(seeds, 1, batch), b = emu.sample(seeds, 1, batch);
    ASSERT_EQ(a.blocks.size(), b.blocks.size());
    for (size_t l = 0; l < a.blocks.size(); ++l) {
      SCOPED_TRACE(l);
      EXPECT_EQ(a.blocks[l].num_dst, b.blocks[l].num_dst);
      EXPECT_EQ(a.blocks[l].num_src, b.blocks[l].num_src);
      EXPECT_EQ(a.blocks[l].indptr, b.blocks[l].indptr);
      EXPECT_EQ(a.blocks[l].indices, b.blocks[l].indices);
      EXPECT_EQ(a.blocks[l].src_ids, b.blocks[l].src_ids);
      ASSERT_EQ(a.blocks[l].weights.size(), b.blocks[l].weights.size());
      if (!a.blocks[l].weights.empty()) {  // memcmp of empty vectors would pass null pointers
        EXPECT_EQ(0, std::memcmp(a.blocks[l].weights.data(), b.blocks[l].weights.data(),
                                 a.blocks[l].weights.size() * sizeof(float)));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Schemes, GpuPathOnHost,
    ::testing::Values(Case{"uniform", SampleScheme::kNodeWise, false, false},
                      Case{"uniform_replace", SampleScheme::kNodeWise, false, true},
                      Case{"weighted", SampleScheme::kNodeWise, true, false},
                      Case{"weighted_replace", SampleScheme::kNodeWise, true, true},
                      Case{"layer", SampleScheme::kLayerWise, false, false},
                      Case{"layer_weighted", SampleScheme::kLayerWise, true, false}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace dsp
