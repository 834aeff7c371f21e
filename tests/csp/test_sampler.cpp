// Single-process sampler tests (self communicator, one-part partition): statistics of every scheme
// with fixed seeds and chi-square bounds, block invariants, shared per-node logic, presample,
// bad input.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "ccc/communicator.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "csp/floyd_reference.hpp"
#include "csp/presample.hpp"
#include "csp/sample_kernels.hpp"
#include "csp/sampler.hpp"
#include "csp/walks.hpp"
#include "error_of.hpp"
#include "graph/generate.hpp"

namespace dsp {
namespace {

// Chi-square statistic of observed counts against expected counts.
double chi2(const std::vector<double>& obs, const std::vector<double>& exp) {
  double c = 0;
  for (size_t i = 0; i < obs.size(); ++i) c += (obs[i] - exp[i]) * (obs[i] - exp[i]) / exp[i];
  return c;
}
// A generous upper bound of the chi-square quantile at p = 1e-4 (Wilson-Hilferty), so fixed-seed
// tests are far from flaky while real bias (which grows with the sample size) fails them.
double chi2_bound(int dof) {
  double z = 3.72;
  double a = 2.0 / (9.0 * dof);
  return dof * std::pow(1 - a + z * std::sqrt(a), 3);
}

// Graph builder: in-neighbour lists per node (row v lists u for edges u -> v).
Csr make_graph(const std::vector<std::vector<int64_t>>& rows,
               const std::vector<std::vector<float>>* weights = nullptr) {
  std::vector<int64_t> src, dst;
  std::vector<float> w;
  for (size_t v = 0; v < rows.size(); ++v) {
    for (size_t j = 0; j < rows[v].size(); ++j) {
      src.push_back(rows[v][j]);
      dst.push_back(static_cast<int64_t>(v));
      if (weights) w.push_back((*weights)[v][j]);
    }
  }
  CsrBuildOptions o;
  o.force_int64 = false;
  return build_in_csr<int64_t>(static_cast<int64_t>(rows.size()), src.data(), dst.data(),
                               static_cast<int64_t>(src.size()), weights ? w.data() : nullptr, o);
}

std::vector<int64_t> row_of(const Csr& g, int64_t v) {
  std::vector<int64_t> r;
  for (int64_t e = g.rowptr()[v]; e < g.rowptr()[v + 1]; ++e) r.push_back(g.indices.int_at(e));
  return r;
}

struct Rig {
  PartitionData part;
  std::unique_ptr<Communicator> comm = make_communicator("self");
  std::unique_ptr<CollectiveSampler> s;
  Rig(const Csr& g, SamplerOptions o) : part(single_part(g)) {
    s = std::make_unique<CollectiveSampler>(part, *comm, o);
  }
};

// Star graph: node 0 has in-neighbours 1..deg, nodes 1.. have no in-neighbours.
Csr star(int deg, bool weighted) {
  std::vector<std::vector<int64_t>> rows(deg + 1);
  std::vector<std::vector<float>> w(deg + 1);
  for (int i = 1; i <= deg; ++i) {
    rows[0].push_back(i);
    w[0].push_back(static_cast<float>(i));  // weight of neighbour i is i
  }
  return make_graph(rows, weighted ? &w : nullptr);
}

TEST(Uniform, WithoutReplacementChiSquareNoRepeats) {
  const int deg = 20, k = 5, T = 4000;
  Rig st(star(deg, false), SamplerOptions{{k}});
  std::vector<double> obs(deg, 0);
  for (int t = 0; t < T; ++t) {
    SampledBatch b = st.s->sample({0}, t, 0);
    const Block& bl = b.blocks[0];
    ASSERT_EQ(bl.num_edges(), k);
    std::set<int64_t> seen;
    for (int64_t e = 0; e < bl.num_edges(); ++e) {
      int64_t u = bl.src_ids[bl.indices[e]];
      ASSERT_TRUE(seen.insert(u).second) << "repeated neighbour " << u;
      obs[u - 1] += 1;
    }
  }
  std::vector<double> exp(deg, double(T) * k / deg);
  EXPECT_LT(chi2(obs, exp), chi2_bound(deg - 1));
}

TEST(Uniform, WithReplacementChiSquare) {
  const int deg = 12, k = 7, T = 3000;
  SamplerOptions o{{k}};
  o.scheme = NeighborSampling{false, true};
  Rig st(star(deg, false), o);
  std::vector<double> obs(deg, 0);
  for (int t = 0; t < T; ++t) {
    SampledBatch sb = st.s->sample({0}, 0, t);
    const Block& bl = sb.blocks[0];
    ASSERT_EQ(bl.num_edges(), k);
    for (int64_t e = 0; e < bl.num_edges(); ++e) obs[bl.src_ids[bl.indices[e]] - 1] += 1;
  }
  std::vector<double> exp(deg, double(T) * k / deg);
  EXPECT_LT(chi2(obs, exp), chi2_bound(deg - 1));
}

TEST(Uniform, SmallDegreeTakesAllAndZeroDegreeEmpty) {
  // node 0: 3 in-neighbours; node 4: none
  Csr g = make_graph({{1, 2, 3}, {}, {}, {}, {}});
  for (bool replace : {false, true}) {
    SamplerOptions o{{5}};
    o.scheme = NeighborSampling{false, replace};
    Rig st(g, o);
    SampledBatch b = st.s->sample({0, 4}, 1, 2);
    const Block& bl = b.blocks[0];
    ASSERT_EQ(bl.num_dst, 2);
    EXPECT_EQ(bl.indptr[2] - bl.indptr[1], 0);  // zero-degree: empty row
    if (!replace) {
      std::vector<int64_t> got;
      for (int64_t e = bl.indptr[0]; e < bl.indptr[1]; ++e)
        got.push_back(bl.src_ids[bl.indices[e]]);
      EXPECT_EQ(got, (std::vector<int64_t>{1, 2, 3}));
    } else {
      EXPECT_EQ(bl.indptr[1], 5);
    }
  }
}

TEST(Weighted, WithReplacementMatchesWeights) {
  const int deg = 10, k = 6, T = 3000;
  SamplerOptions o{{k}};
  o.scheme = NeighborSampling{true, true};
  Rig st(star(deg, true), o);
  std::vector<double> obs(deg, 0);
  for (int t = 0; t < T; ++t) {
    SampledBatch sb = st.s->sample({0}, t, 3);
    const Block& bl = sb.blocks[0];
    ASSERT_EQ(bl.num_edges(), k);
    ASSERT_EQ(bl.weights.size(), size_t(k));
    for (int64_t e = 0; e < bl.num_edges(); ++e) {
      int64_t u = bl.src_ids[bl.indices[e]];
      EXPECT_EQ(bl.weights[e], float(u));
      obs[u - 1] += 1;
    }
  }
  std::vector<double> exp(deg);
  for (int i = 0; i < deg; ++i) exp[i] = double(T) * k * (i + 1) / (deg * (deg + 1) / 2.0);
  EXPECT_LT(chi2(obs, exp), chi2_bound(deg - 1));
}

TEST(Weighted, WithoutReplacementFirstPickMatchesAndNoRepeats) {
  // fanout 1: a successive-sampling pick is exactly w / sum(w)
  const int deg = 8, T = 6000;
  SamplerOptions o{{1}};
  o.scheme = NeighborSampling{true, false};
  Rig st(star(deg, true), o);
  std::vector<double> obs(deg, 0);
  for (int t = 0; t < T; ++t) {
    SampledBatch sb = st.s->sample({0}, t, 0);
    const Block& bl = sb.blocks[0];
    obs[bl.src_ids[bl.indices[0]] - 1] += 1;
  }
  std::vector<double> exp(deg);
  for (int i = 0; i < deg; ++i) exp[i] = double(T) * (i + 1) / (deg * (deg + 1) / 2.0);
  EXPECT_LT(chi2(obs, exp), chi2_bound(deg - 1));

  // fanout 5 of 8: never repeats; inclusion probability is higher for heavier neighbours
  SamplerOptions o5{{5}};
  o5.scheme = NeighborSampling{true, false};
  Rig st5(star(deg, true), o5);
  std::vector<double> inc(deg, 0);
  for (int t = 0; t < 2000; ++t) {
    SampledBatch sb = st5.s->sample({0}, t, 0);
    const Block& bl = sb.blocks[0];
    ASSERT_EQ(bl.num_edges(), 5);
    std::set<int64_t> seen;
    for (int64_t e = 0; e < 5; ++e) {
      ASSERT_TRUE(seen.insert(bl.src_ids[bl.indices[e]]).second);
      inc[bl.src_ids[bl.indices[e]] - 1] += 1;
    }
  }
  EXPECT_LT(inc[0], inc[deg - 1]);
}

TEST(Weighted, ZeroWeightsNeverPickedAndHeavyWeightTerminates) {
  // weights 0, 0, 1e9, 1, 0: only two positive entries, fanout 3 without replacement takes both
  std::vector<std::vector<float>> w = {{0.f, 0.f, 1e9f, 1.f, 0.f}, {}, {}, {}, {}, {}};
  Csr g = make_graph({{1, 2, 3, 4, 5}, {}, {}, {}, {}, {}}, &w);
  SamplerOptions o{{3}};
  o.scheme = NeighborSampling{true, false};
  Rig st(g, o);
  for (int t = 0; t < 50; ++t) {
    SampledBatch sb = st.s->sample({0}, t, 0);
    const Block& bl = sb.blocks[0];
    std::vector<int64_t> got;
    for (int64_t e = 0; e < bl.num_edges(); ++e) got.push_back(bl.src_ids[bl.indices[e]]);
    EXPECT_EQ(got, (std::vector<int64_t>{3, 4}));
  }
  o.scheme = NeighborSampling{true, true};
  Rig sr(g, o);
  for (int t = 0; t < 50; ++t) {
    SampledBatch sb = sr.s->sample({0}, t, 0);
    const Block& bl = sb.blocks[0];
    for (int64_t e = 0; e < bl.num_edges(); ++e) {
      int64_t u = bl.src_ids[bl.indices[e]];
      EXPECT_TRUE(u == 3 || u == 4);
    }
  }
}

TEST(LayerWise, CountsFollowMultinomial) {
  // Frontier: seeds 0..3 with in-degrees 1, 2, 3, 4 (neighbours among 4..13); n = 10 draws.
  std::vector<std::vector<int64_t>> rows(14);
  int64_t next = 4;
  for (int v = 0; v < 4; ++v) {
    for (int j = 0; j <= v; ++j) rows[v].push_back(next++);
  }
  SamplerOptions o{{10}};
  o.scheme = LayerSampling{false, true};
  Rig st(make_graph(rows), o);
  const int T = 3000;
  std::vector<double> obs(4, 0);
  for (int t = 0; t < T; ++t) {
    SampledBatch sb = st.s->sample({0, 1, 2, 3}, t, 0);
    const Block& bl = sb.blocks[0];
    int64_t total = 0;
    for (int v = 0; v < 4; ++v) {
      obs[v] += bl.indptr[v + 1] - bl.indptr[v];
      total += bl.indptr[v + 1] - bl.indptr[v];
    }
    ASSERT_EQ(total, 10);
  }
  std::vector<double> exp(4);
  for (int v = 0; v < 4; ++v) exp[v] = T * 10.0 * (v + 1) / 10.0;
  // Counts of a multinomial are negatively correlated, which only lowers this statistic.
  EXPECT_LT(chi2(obs, exp), chi2_bound(3));
}

TEST(RandomWalk, FollowsEdgesAndRestartsAtRate) {
  // Ring: the only in-neighbour of v is v + 1, so a walk returns to its start only by restart.
  const int n = 500;
  std::vector<std::vector<int64_t>> rows(n);
  for (int v = 0; v < n; ++v) rows[v] = {(v + 1) % n};
  rows[250] = {};  // a dead end stops walks
  Csr g = make_graph(rows);
  Rig st(g, SamplerOptions{{1}});
  WalkSampler walks(st.part, *st.comm, 0);
  std::vector<int64_t> starts;
  for (int i = 0; i < 200; ++i) starts.push_back((i * 7) % n);
  const int L = 20;
  const double p = 0.3;
  WalkResult w = walks.random_walks(starts, L, p, 0, 0);
  int64_t steps = 0, restarts = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t* path = w.paths.data() + i * (L + 1);
    EXPECT_EQ(path[0], starts[i]);
    for (int t = 0; t < L; ++t) {
      if (path[t] < 0) {
        EXPECT_EQ(path[t + 1], -1);
        continue;
      }
      ++steps;
      if (path[t + 1] == starts[i]) {
        ++restarts;
      } else if (path[t + 1] == -1) {
        EXPECT_EQ(path[t], 250);
      } else {
        EXPECT_EQ(path[t + 1], (path[t] + 1) % n) << "not an edge";
      }
    }
  }
  double rate = double(restarts) / steps;
  double sd = std::sqrt(p * (1 - p) / steps);
  EXPECT_NEAR(rate, p, 4 * sd);
}

TEST(PinSage, TopKByVisitsTiesToLowerId) {
  // node 0's in-neighbours 1, 2; 1 <- 3; 2 <- 3; 3 <- 0
  Csr g = make_graph({{1, 2}, {3}, {3}, {0}});
  Rig st(g, SamplerOptions{{1}});
  WalkSampler walks(st.part, *st.comm, 0);
  PinSageResult r = walks.pinsage_neighbors({0}, 50, 3, 0.0, 2);
  ASSERT_EQ(r.indptr, (std::vector<int64_t>{0, 2}));
  // without restarts every walk visits 3 once (step 2) and 1 or 2 once (step 1)
  EXPECT_EQ(r.ids[0], 3);
  EXPECT_EQ(r.counts[0], 50.f);
  // brute-force recount from the walks themselves
  std::vector<int64_t> starts(50, 0);
  WalkResult w = walks.random_walks(starts, 3, 0.0, 0, 0);
  std::map<int64_t, int> c;
  for (int64_t i = 0; i < 50; ++i) {
    for (int t = 1; t <= 3; ++t) {
      int64_t v = w.paths[i * 4 + t];
      if (v > 0) ++c[v];
    }
  }
  int64_t second = c[1] >= c[2] ? 1 : 2;
  EXPECT_EQ(r.ids[1], second);
  EXPECT_EQ(r.counts[1], float(c[second]));
}

const Dataset& community() {
  static Dataset ds = [] {
    CommunityOptions co;
    co.num_nodes = 3000;
    co.num_edges = 20000;
    co.num_communities = 8;
    co.feature_dim = 0;
    co.seed = 5;
    return generate_community(co);
  }();
  return ds;
}

TEST(Blocks, Invariants) {
  const Csr& g = community().graph;
  for (bool replace : {false, true}) {
    SamplerOptions o{{6, 4, 3}};
    o.scheme = NeighborSampling{false, replace};
    Rig st(g, o);
    std::vector<int64_t> seeds;
    for (int64_t v = 0; v < 200; ++v) seeds.push_back(v * 13 % g.num_nodes);
    SampledBatch b = st.s->sample(seeds, 2, 7);
    ASSERT_EQ(b.blocks.size(), 3u);
    EXPECT_EQ(std::vector<int64_t>(b.blocks.back().src_ids.begin(),
                                   b.blocks.back().src_ids.begin() + b.blocks.back().num_dst),
              seeds);
    for (size_t l = 0; l < b.blocks.size(); ++l) {
      const Block& bl = b.blocks[l];
      ASSERT_EQ(bl.indptr.size(), size_t(bl.num_dst + 1));
      ASSERT_EQ(bl.num_src, int64_t(bl.src_ids.size()));
      EXPECT_LE(bl.num_dst, bl.num_src);
      std::set<int64_t> distinct(bl.src_ids.begin(), bl.src_ids.end());
      EXPECT_EQ(distinct.size(), bl.src_ids.size());
      // consistent across layers: this block's destinations are the outer block's sources
      if (l + 1 < b.blocks.size()) {
        const Block& outer = b.blocks[l + 1];
        EXPECT_EQ(std::vector<int64_t>(bl.src_ids.begin(), bl.src_ids.begin() + bl.num_dst),
                  outer.src_ids);
      }
      for (int64_t d = 0; d < bl.num_dst; ++d) {
        std::vector<int64_t> row = row_of(g, bl.src_ids[d]);
        for (int64_t e = bl.indptr[d]; e < bl.indptr[d + 1]; ++e) {
          ASSERT_GE(bl.indices[e], 0);
          ASSERT_LT(bl.indices[e], bl.num_src);
          EXPECT_TRUE(std::binary_search(row.begin(), row.end(), bl.src_ids[bl.indices[e]]))
              << "edge not in graph";
        }
        int64_t fan = b.blocks.size() - 1 - l == 0 ? 6 : (b.blocks.size() - 1 - l == 1 ? 4 : 3);
        EXPECT_EQ(bl.indptr[d + 1] - bl.indptr[d],
                  replace ? (row.empty() ? 0 : fan) : std::min<int64_t>(fan, row.size()));
      }
      // first-seen order: every new source appears first at an edge after all earlier ones
      int64_t expect_next = bl.num_dst;
      for (int64_t e = 0; e < bl.num_edges(); ++e) {
        if (bl.indices[e] >= bl.num_dst) {
          EXPECT_LE(bl.indices[e], expect_next);
          if (bl.indices[e] == expect_next) ++expect_next;
        }
      }
      EXPECT_EQ(expect_next, bl.num_src);
    }
  }
}

TEST(Blocks, DeterministicAndThreadInvariant) {
  const Csr& g = community().graph;
  SamplerOptions o{{5, 5}};
  Rig a(g, o), b(g, o);
  std::vector<int64_t> seeds;
  for (int64_t v = 0; v < 1500; ++v) seeds.push_back(v * 2);
  SampledBatch x = a.s->sample(seeds, 0, 1);
  int old = omp_get_max_threads();
  omp_set_num_threads(old == 1 ? 2 : 1);
  SampledBatch y = b.s->sample(seeds, 0, 1);
  omp_set_num_threads(old);
  for (size_t l = 0; l < 2; ++l) {
    EXPECT_EQ(x.blocks[l].src_ids, y.blocks[l].src_ids);
    EXPECT_EQ(x.blocks[l].indices, y.blocks[l].indices);
  }
  SampledBatch z = a.s->sample(seeds, 0, 2);  // another batch: other draws
  EXPECT_NE(x.blocks[1].indices, z.blocks[1].indices);
}

// Large enough layers for the parallel relabel (kParallelRelabelMinEdges picks and more): the
// blocks of 1 and 2 (or 3) OpenMP threads must be identical (first-seen order of new source ids
// included). The batch sequence also makes the parallel relabel outgrow its table: after a batch
// of every node (no new source ids, so the next table is sized for the destination nodes only)
// comes a batch whose picks are mostly new.
TEST(Blocks, IdenticalWithOneAndSeveralThreadsOnTheParallelPath) {
  static Dataset ds = [] {
    CommunityOptions co;
    co.num_nodes = 40000;
    co.num_edges = 300000;
    co.num_communities = 16;
    co.feature_dim = 0;
    co.seed = 11;
    return generate_community(co);
  }();
  const Csr& g = ds.graph;
  std::vector<std::vector<int64_t>> batches(4);
  for (int64_t v = 0; v < g.num_nodes; ++v) batches[0].push_back((v * 7919) % g.num_nodes);
  for (int64_t v = 0; v < 8000; ++v) batches[1].push_back((v * 104729 + 3) % g.num_nodes);
  for (int64_t v = 0; v < 2500; ++v) batches[2].push_back(v * 16);
  for (int64_t v = 0; v < 9000; ++v) batches[3].push_back(g.num_nodes - 1 - v * 4);
  const int old = omp_get_max_threads();
  for (int threads : {3, 4}) {  // the parallel path starts at 3 threads; 3: uneven chunks
    for (bool replace : {false, true}) {
      SCOPED_TRACE(testing::Message() << threads << " threads, replace " << replace);
      SamplerOptions o{{10, 8, 6}};
      o.scheme = NeighborSampling{false, replace};
      o.seed = 3;
      Rig one(g, o), two(g, o);
      int64_t largest = 0;
      for (size_t i = 0; i < batches.size(); ++i) {
        omp_set_num_threads(1);
        SampledBatch x = one.s->sample(batches[i], 1, static_cast<int64_t>(i));
        omp_set_num_threads(threads);
        SampledBatch y = two.s->sample(batches[i], 1, static_cast<int64_t>(i));
        omp_set_num_threads(old);
        ASSERT_EQ(x.blocks.size(), y.blocks.size());
        for (size_t l = 0; l < x.blocks.size(); ++l) {
          const Block &a = x.blocks[l], &b = y.blocks[l];
          largest = std::max(largest, a.num_edges());
          EXPECT_EQ(a.num_dst, b.num_dst) << "batch " << i << " block " << l;
          EXPECT_EQ(a.num_src, b.num_src) << "batch " << i << " block " << l;
          EXPECT_EQ(a.indptr, b.indptr) << "batch " << i << " block " << l;
          EXPECT_EQ(a.src_ids, b.src_ids) << "batch " << i << " block " << l;
          EXPECT_EQ(a.indices, b.indices) << "batch " << i << " block " << l;
          // first-seen order of the new source ids
          int64_t next = b.num_dst;
          for (int64_t e = 0; e < b.num_edges(); ++e) {
            ASSERT_LE(b.indices[e], std::max(next, b.num_dst - 1));
            if (b.indices[e] == next) ++next;
          }
          EXPECT_EQ(next, b.num_src);
        }
      }
      EXPECT_GE(largest, 8 * kParallelRelabelMinEdges);
    }
  }
}

// TaskDraws computes up to four Philox blocks at a time: draw for draw it is the stream's own
// sequence, from any position, for any expected count, past it (rejections) and in 64-bit draws.
TEST(SharedKernels, TaskDrawsEqualTheStreamDrawForDraw) {
  const uint64_t key = rng_key(5, 1, 2, 3);
  for (uint32_t start = 0; start < 9; ++start) {
    for (uint32_t expected : {0u, 1u, 3u, 4u, 5u, 15u, 16u, 17u, 40u}) {
      RngStream s(key, 1234567 + start, csp::kPurposeNodeWise);
      for (uint32_t i = 0; i < start; ++i) s.next_u32();
      RngStream ref = s;
      csp::TaskDraws d(s, expected);
      for (int i = 0; i < 70; ++i) {
        if (i % 7 == 3) {
          ASSERT_EQ(d.next_u64(), ref.next_u64()) << start << " " << expected << " " << i;
        } else {
          ASSERT_EQ(d.next_u32(), ref.next_u32()) << start << " " << expected << " " << i;
        }
      }
      EXPECT_EQ(s.position(), start);  // the stream itself does not advance
    }
  }
}

TEST(SharedKernels, UniformPicksAreFloydsOverTheStream) {
  const uint64_t key = rng_key(11, 0, 7, 1);
  int64_t pos[64];
  for (int64_t v = 0; v < 3000; ++v) {
    const int k = 1 + static_cast<int>(v % 40);
    // Degrees around k, large, and beyond 2^32 (the 64-bit draws).
    const int64_t deg = v % 3 == 0 ? k - 1 + v % 5 : v % 3 == 1 ? 1000 + v : (int64_t{1} << 33) + v;
    RngStream s(key, static_cast<uint64_t>(v), csp::kPurposeNodeWise);
    const int n = csp::sample_positions(deg, k, false, false, nullptr, s, pos);
    ASSERT_EQ(std::vector<int64_t>(pos, pos + n), floyd_reference(deg, k, s)) << v;
    if (deg == 0) continue;
    RngStream one_by_one = s;  // s has not advanced
    std::vector<int64_t> with(k);
    for (int i = 0; i < k; ++i) with[i] = csp::draw_index(one_by_one, deg);
    std::sort(with.begin(), with.end());
    const int m = csp::sample_positions(deg, k, false, true, nullptr, s, pos);
    ASSERT_EQ(std::vector<int64_t>(pos, pos + m), with) << v;
  }
}

// The CUDA kernels run sample_positions / relabel_insert from sample_kernels.hpp: recompute every
// row of a CPU-sampled block with them directly.
TEST(SharedKernels, PerNodeFunctionsReproduceTheSampler) {
  const Csr& g = community().graph;
  for (bool replace : {false, true}) {
    SamplerOptions o{{7}};
    o.scheme = NeighborSampling{false, replace};
    o.seed = 99;
    Rig st(g, o);
    std::vector<int64_t> seeds;
    for (int64_t v = 0; v < 300; ++v) seeds.push_back(v * 5);
    SampledBatch sb = st.s->sample(seeds, 3, 4);
    const Block& bl = sb.blocks[0];
    uint64_t key = rng_key(99, 3, 4, 0);
    for (int64_t d = 0; d < bl.num_dst; ++d) {
      int64_t v = bl.src_ids[d];
      RngStream s(key, v, csp::kPurposeNodeWise);
      int64_t pos[7];
      int c = csp::sample_positions(g.degree(v), 7, false, replace, nullptr, s, pos);
      ASSERT_EQ(c, bl.indptr[d + 1] - bl.indptr[d]);
      for (int j = 0; j < c; ++j) {
        EXPECT_EQ(g.indices.int_at(g.rowptr()[v] + pos[j]),
                  bl.src_ids[bl.indices[bl.indptr[d] + j]]);
      }
    }
  }
}

// ---- edge exclusion (sample with ExcludedEdges) ----

using Excluded = CollectiveSampler::ExcludedEdges;

// A graph of 60 nodes whose rows have 0..11 in-neighbours (shorter and longer than the fanouts).
Csr exclusion_graph() {
  std::vector<std::vector<int64_t>> rows(60);
  RngStream s(rng_key(31), 0);
  for (int64_t v = 0; v < 60; ++v) {
    std::set<int64_t> r;
    while (static_cast<int64_t>(r.size()) < v % 12) r.insert(s.next_u32() % 60);
    rows[v].assign(r.begin(), r.end());
  }
  return make_graph(rows);
}

// Pairs for `seeds`: every other in-edge of each seed, the reverse of each, a duplicate, pairs
// of edges that do not exist and random pairs (most hitting nothing, some deeper layers' rows).
Excluded exclusions_for(const Csr& g, const std::vector<int64_t>& seeds) {
  Excluded ex;
  auto add = [&](int64_t d, int64_t u) {
    ex.dst.push_back(d);
    ex.src.push_back(u);
  };
  for (int64_t v : seeds) {
    const std::vector<int64_t> r = row_of(g, v);
    for (size_t j = 0; j < r.size(); j += 2) {
      add(v, r[j]);
      add(r[j], v);
    }
    if (!r.empty()) add(v, r[0]);  // a duplicate
    add(v, g.num_nodes - 1 - v);   // usually no such edge
  }
  RngStream s(rng_key(32), 0);
  for (int i = 0; i < 40; ++i) add(s.next_u32() % g.num_nodes, s.next_u32() % g.num_nodes);
  return ex;
}

// The blocks of `seeds` built directly: each frontier node v samples its row without the entries
// `ex` names for it, by Floyd's algorithm (or k independent draws) one draw at a time over the
// remaining entries, on the stream the sampler keys; blocks relabelled in first-seen order.
// *excluded counts the row entries left out, every layer.
std::vector<Block> reference_blocks(const Csr& g, const std::vector<int64_t>& seeds,
                                    const SamplerOptions& o, int64_t epoch, int64_t batch,
                                    const Excluded& ex, int64_t* excluded) {
  std::set<std::pair<int64_t, int64_t>> gone;
  for (size_t i = 0; i < ex.dst.size(); ++i) gone.emplace(ex.dst[i], ex.src[i]);
  std::vector<Block> blocks;
  std::vector<int64_t> frontier = seeds;
  for (size_t l = 0; l < o.fanouts.size(); ++l) {
    const uint64_t key = rng_key(o.seed, epoch, batch, static_cast<int64_t>(l));
    const int k = o.fanouts[l];
    Block b;
    b.num_dst = static_cast<int64_t>(frontier.size());
    b.src_ids = frontier;
    std::map<int64_t, int64_t> local;
    for (size_t i = 0; i < frontier.size(); ++i) local[frontier[i]] = static_cast<int64_t>(i);
    b.indptr = {0};
    for (int64_t v : frontier) {
      std::vector<int64_t> left;
      for (int64_t u : row_of(g, v)) {
        if (gone.count({v, u})) {
          ++*excluded;
        } else {
          left.push_back(u);
        }
      }
      const int64_t m = static_cast<int64_t>(left.size());
      RngStream s(key, static_cast<uint64_t>(v), csp::kPurposeNodeWise);
      std::vector<int64_t> pos;
      if (!o.replace()) {
        pos = floyd_reference(m, k, s);
      } else if (m > 0) {
        for (int j = 0; j < k; ++j) pos.push_back(csp::draw_index(s, m));
        std::sort(pos.begin(), pos.end());
      }
      for (int64_t p : pos) {
        auto it = local.emplace(left[p], static_cast<int64_t>(b.src_ids.size())).first;
        if (it->second == static_cast<int64_t>(b.src_ids.size())) b.src_ids.push_back(left[p]);
        b.indices.push_back(it->second);
      }
      b.indptr.push_back(static_cast<int64_t>(b.indices.size()));
    }
    b.num_src = static_cast<int64_t>(b.src_ids.size());
    frontier = b.src_ids;
    blocks.push_back(std::move(b));
  }
  std::reverse(blocks.begin(), blocks.end());
  return blocks;
}

void expect_blocks(const std::vector<Block>& a, const std::vector<Block>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t l = 0; l < a.size(); ++l) {
    SCOPED_TRACE(l);
    EXPECT_EQ(a[l].num_dst, b[l].num_dst);
    EXPECT_EQ(a[l].num_src, b[l].num_src);
    EXPECT_EQ(a[l].src_ids, b[l].src_ids);
    EXPECT_EQ(a[l].indptr, b[l].indptr);
    EXPECT_EQ(a[l].indices, b[l].indices);
  }
}

TEST(EdgeExclusion, BlocksEqualAReferenceOverTheRemainingEntries) {
  const Csr g = exclusion_graph();
  for (bool replace : {false, true}) {
    SCOPED_TRACE(replace);
    SamplerOptions o{{4, 3, 2}};
    o.scheme = NeighborSampling{false, replace};
    o.seed = 17;
    Rig st(g, o);
    for (int64_t batch = 0; batch < 4; ++batch) {
      std::vector<int64_t> seeds;
      for (int64_t v = batch; v < g.num_nodes; v += 7) seeds.push_back(v);
      const Excluded ex = exclusions_for(g, seeds);
      int64_t excluded = 0;
      const std::vector<Block> want = reference_blocks(g, seeds, o, 2, batch, ex, &excluded);
      const int64_t before = st.s->stats().excluded_entries;
      SampledBatch got = st.s->sample(seeds, 2, batch, &ex);
      expect_blocks(got.blocks, want);
      EXPECT_EQ(st.s->stats().excluded_entries - before, excluded);
      EXPECT_GT(excluded, 0);
      // no block holds an excluded edge
      std::set<std::pair<int64_t, int64_t>> gone;
      for (size_t i = 0; i < ex.dst.size(); ++i) gone.emplace(ex.dst[i], ex.src[i]);
      for (const Block& b : got.blocks) {
        for (int64_t d = 0; d < b.num_dst; ++d) {
          for (int64_t e = b.indptr[d]; e < b.indptr[d + 1]; ++e) {
            EXPECT_EQ(gone.count({b.src_ids[d], b.src_ids[b.indices[e]]}), 0u);
          }
        }
      }
    }
  }
}

// The per-task step both backends run (csp::excluding_task), on rows with repeated ids (a
// multigraph): every entry equal to an excluded src is left out, the draws are those of a row of
// the remaining entries, the count of left-out entries is added up, and each task takes its own
// requester's pairs (requester 1 has no tasks).
TEST(EdgeExclusion, TaskStepLeavesOutEveryEqualEntryOfItsRequestersPairs) {
  RngStream r(rng_key(7), 1);
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<int64_t> row(r.next_u32() % 30);
    for (int64_t& x : row) x = r.next_u32() % 12;
    std::sort(row.begin(), row.end());
    const int64_t v = 5;
    // pairs of three requesters; the tasks: 0-1 requester 0, 2-4 requester 2
    std::vector<std::vector<std::pair<int64_t, int64_t>>> by(3);
    for (int q : {0, 2}) {
      for (int64_t u = 0; u < 14; ++u) {
        if (r.next_u32() % 3 == 0) by[q].emplace_back(v, u);
        if (r.next_u32() % 4 == 0) by[q].emplace_back(u == v ? v + 1 : u, u);  // other dst
      }
      std::sort(by[q].begin(), by[q].end());
    }
    std::vector<int64_t> pairs = {0, static_cast<int64_t>(by[0].size()),
                                  static_cast<int64_t>(by[0].size()),
                                  static_cast<int64_t>(by[0].size() + by[2].size())};
    for (auto* f : {+[](const std::pair<int64_t, int64_t>& p) { return p.first; },
                    +[](const std::pair<int64_t, int64_t>& p) { return p.second; }}) {
      for (int q : {0, 2}) {
        for (const auto& pr : by[q]) pairs.push_back(f(pr));
      }
    }
    const int64_t tasks[4] = {0, 2, 2, 5};
    uint64_t excluded = 0;
    const csp::TaskExclusions ex{tasks, pairs.data(), 3, &excluded};
    const int k = 1 + static_cast<int>(r.next_u32() % 12);
    const bool replace = trial % 2;
    uint64_t want_excluded = 0;
    for (int64_t i = 0; i < 5; ++i) {
      std::set<int64_t> gone;
      for (const auto& [d, u] : by[i < 2 ? 0 : 2]) {
        if (d == v) gone.insert(u);
      }
      std::vector<int64_t> left;
      for (int64_t x : row) {
        if (!gone.count(x)) left.push_back(x);
      }
      want_excluded += row.size() - left.size();
      const RngStream s(rng_key(trial), static_cast<uint64_t>(i), csp::kPurposeNodeWise);
      std::vector<int64_t> want(k), got(k);
      const int64_t m = static_cast<int64_t>(left.size());
      RngStream s2 = s;
      want.resize(csp::sample_positions(m, k, false, replace, nullptr, s2, want.data()));
      for (int64_t& p : want) p = left[p];
      got.resize(csp::excluding_task(ex, i, v, row.data(), static_cast<int64_t>(row.size()), k,
                                     replace, s, got.data()));
      for (int64_t& p : got) p = row[p];
      EXPECT_EQ(got, want) << "trial " << trial << " task " << i;
    }
    EXPECT_EQ(excluded, want_excluded) << "trial " << trial;
  }
}

// Rows whose remaining entries are more than, exactly and fewer than the fanout: a node keeps its
// fanout while its row allows, else takes every remaining entry.
TEST(EdgeExclusion, NodeKeepsItsFanoutWhileTheRowAllows) {
  // node 0: in-neighbours 1..10
  Csr g = star(10, false);
  Rig st(g, SamplerOptions{{4}});
  for (int x : {0, 3, 6, 7, 9, 10}) {
    Excluded ex;
    for (int u = 1; u <= x; ++u) {
      ex.dst.push_back(0);
      ex.src.push_back(2 * u <= 10 ? 2 * u : 2 * u - 11);  // evens first, then odds
    }
    SampledBatch b = st.s->sample({0}, 0, x, &ex);
    const Block& bl = b.blocks[0];
    EXPECT_EQ(bl.num_edges(), std::min(4, 10 - x)) << x;
    std::set<int64_t> picked;
    for (int64_t e = 0; e < bl.num_edges(); ++e) picked.insert(bl.src_ids[bl.indices[e]]);
    EXPECT_EQ(static_cast<int64_t>(picked.size()), bl.num_edges()) << x;
    for (size_t i = 0; i < ex.src.size(); ++i) EXPECT_EQ(picked.count(ex.src[i]), 0u) << x;
  }
}

// No pairs, or pairs that hit no row entry: exactly the plain blocks, every scheme.
TEST(EdgeExclusion, NoneOrMissingPairsGiveThePlainBlocks) {
  Csr g = community().graph;
  std::vector<float> w(static_cast<size_t>(g.num_edges()), 1.5f);
  g.weights = Array::from_vector(std::move(w));
  std::vector<int64_t> seeds;
  for (int64_t v = 0; v < 300; ++v) seeds.push_back(v * 7);
  Excluded missing;  // edges no row holds: self loops of nodes without one
  for (int64_t v = 0; v < 50; ++v) {
    const std::vector<int64_t> r = row_of(g, v);
    if (std::find(r.begin(), r.end(), v) != r.end()) continue;
    missing.dst.push_back(v);
    missing.src.push_back(v);
  }
  ASSERT_FALSE(missing.dst.empty());
  for (int variant = 0; variant < 4; ++variant) {
    SamplerOptions o{{6, 3}};
    o.scheme = NeighborSampling{variant == 2, variant == 1};
    if (variant == 3) {
      o.scheme = LayerSampling{};
      o.fanouts = {400, 900};
    }
    Rig st(g, o);
    const SampledBatch plain = st.s->sample(seeds, 1, 3);
    const Excluded empty;
    expect_blocks(st.s->sample(seeds, 1, 3, nullptr).blocks, plain.blocks);
    expect_blocks(st.s->sample(seeds, 1, 3, &empty).blocks, plain.blocks);
    if (variant <= 1) {
      expect_blocks(st.s->sample(seeds, 1, 3, &missing).blocks, plain.blocks);
      EXPECT_EQ(st.s->stats().excluded_entries, 0);
    }
  }
}

// Biased and layer-wise sampling with pairs are refused (without pairs they sample as ever:
// NoneOrMissingPairsGiveThePlainBlocks), as are pairs that are not node ids.
TEST(EdgeExclusion, RefusedCombinationsAndBadPairs) {
  Csr g = community().graph;
  std::vector<float> w(static_cast<size_t>(g.num_edges()), 1.0f);
  g.weights = Array::from_vector(std::move(w));
  Excluded ex{{5}, {row_of(g, 5).at(0)}};
  const std::string refused =
      "sampler: edge exclusion supports node-wise uniform sampling; biased and layer-wise "
      "sampling are not supported";
  auto message = [&](const SamplerOptions& o, const Excluded& e) {
    Rig st(g, o);
    try {
      st.s->sample({5}, 0, 0, &e);
    } catch (const InvalidArgument& err) {
      return std::string(err.what());
    }
    return std::string("no error");
  };
  SamplerOptions biased{{3}};
  biased.scheme = NeighborSampling{true, false};
  SamplerOptions layer{{30}};
  layer.scheme = LayerSampling{};
  EXPECT_EQ(message(biased, ex), refused);
  EXPECT_EQ(message(layer, ex), refused);
  EXPECT_EQ(message(SamplerOptions{{3}}, Excluded{{5, 6}, {1}}),
            "sampler: excluded edges: 2 dst ids and 1 src ids (one of each per edge)");
  EXPECT_EQ(message(SamplerOptions{{3}}, Excluded{{5}, {g.num_nodes}}),
            "sampler: excluded edge 3000 -> 5 is not between node ids (graph has 3000 nodes)");
  EXPECT_EQ(message(SamplerOptions{{3}}, Excluded{{-1}, {5}}),
            "sampler: excluded edge 5 -> -1 is not between node ids (graph has 3000 nodes)");
}

TEST(Presample, CountsMatchBruteForce) {
  const Dataset& ds = community();
  std::vector<int64_t> train;
  for (int64_t i = 0; i < ds.train_idx.dim(0); ++i) train.push_back(ds.train_idx.int_at(i));
  PresampleOptions po;
  po.epochs = 2;
  po.batch_size = 64;
  po.sampler.fanouts = {4, 3};
  po.sampler.seed = 8;
  std::vector<int64_t> counts = make_presample_fn(po)(ds.graph, train);
  // recount: the same batches sampled by hand
  PartitionData part = single_part(ds.graph);
  auto comm = make_communicator("self");
  CollectiveSampler s(part, *comm, po.sampler);
  std::vector<int64_t> ref(ds.graph.num_nodes, 0);
  for (int e = 0; e < 2; ++e) {
    std::vector<int64_t> order = shuffle_ids(train, 8, e);
    std::set<int64_t> all(order.begin(), order.end());
    EXPECT_EQ(all.size(), train.size());
    for (int64_t b = 0; b * 64 < int64_t(order.size()); ++b) {
      std::vector<int64_t> seeds = presample_batch(order, 64, b);
      SampledBatch sb = s.sample(seeds, e, b);
      for (int64_t v : sb.blocks[0].src_ids) ++ref[v];
    }
  }
  EXPECT_EQ(counts, ref);
  EXPECT_GT(std::accumulate(counts.begin(), counts.end(), int64_t{0}), 0);
  // wired into hotness_scores
  std::vector<int64_t> h = hotness_scores("presample", ds.graph, train, 0, make_presample_fn(po));
  EXPECT_EQ(h, ref);
}

TEST(BadInput, Rejected) {
  const Csr& g = community().graph;
  PartitionData part = single_part(g);
  auto comm = make_communicator("self");
  EXPECT_THROW(CollectiveSampler(part, *comm, SamplerOptions{{5, 0}}), InvalidArgument);
  EXPECT_THROW(CollectiveSampler(part, *comm, SamplerOptions{{-3}}), InvalidArgument);
  EXPECT_THROW(CollectiveSampler(part, *comm, SamplerOptions{std::vector<int>{}}), InvalidArgument);
  SamplerOptions w{{5}};
  w.scheme = NeighborSampling{true, false};
  EXPECT_THROW(CollectiveSampler(part, *comm, w), InvalidArgument);  // no edge weights
  w.scheme = LayerSampling{true, false};
  EXPECT_THROW(CollectiveSampler(part, *comm, w), InvalidArgument);
  CollectiveSampler s(part, *comm, SamplerOptions{{5}});
  EXPECT_THROW(s.sample({1, 2, 1}, 0, 0), InvalidArgument);      // duplicate seed
  EXPECT_THROW(s.sample({g.num_nodes}, 0, 0), InvalidArgument);  // not a node
  EXPECT_THROW(s.sample({-1}, 0, 0), InvalidArgument);
  WalkSampler walks(part, *comm, 0);
  EXPECT_EQ(test::error_of<InvalidArgument>([&] { walks.random_walks({0}, 3, 1.5, 0, 0); }),
            "random_walks: restart probability must be in [0, 1], got 1.5");
  EXPECT_EQ(test::error_of<InvalidArgument>([&] { walks.pinsage_neighbors({0}, 0, 3, 0.1, 5); }),
            "pinsage_neighbors: num_walks, walk_length and top_k must be positive (got 0, 3, 5)");
  EXPECT_THROW(parse_choice<SamplerKind>("edge"), InvalidArgument);
  // an empty batch is fine: empty blocks
  SampledBatch b = s.sample({}, 0, 0);
  ASSERT_EQ(b.blocks.size(), 1u);
  EXPECT_EQ(b.blocks[0].num_src, 0);
}

}  // namespace
}  // namespace dsp
