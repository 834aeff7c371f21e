// LABOR and layer-wise sampling without replacement (one process, one-part partition): the
// picks per seed, the variates shared across seeds (fewer distinct nodes than neighbour sampling
// on the community graph), unbiasedness of the weighted neighbour mean (statistical, fixed seeds),
// the same blocks on every backend, hypergeometric layer-wise counts, and the refusals' messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <set>

#include "ccc/communicator.hpp"
#include "core/error.hpp"
#include "csp/sample_kernels.hpp"
#include "csp/sampler.hpp"
#include "graph/generate.hpp"

#include "backends.hpp"

namespace dsp {
namespace {

Csr make_graph(const std::vector<std::vector<int64_t>>& rows) {
  std::vector<int64_t> src, dst;
  for (size_t v = 0; v < rows.size(); ++v) {
    for (int64_t u : rows[v]) {
      src.push_back(u);
      dst.push_back(static_cast<int64_t>(v));
    }
  }
  CsrBuildOptions o;
  o.force_int64 = false;
  return build_in_csr<int64_t>(static_cast<int64_t>(rows.size()), src.data(), dst.data(),
                               static_cast<int64_t>(src.size()), nullptr, o);
}

const Csr& community() {
  static const Csr g = [] {
    CommunityOptions co;
    co.num_nodes = 4000;
    co.num_edges = 40000;
    co.num_communities = 8;
    co.feature_dim = 1;
    co.seed = 5;
    return generate_community(co).graph;
  }();
  return g;
}

SamplerOptions labor(std::vector<int> fanouts, int importance = 0) {
  SamplerOptions o{std::move(fanouts)};
  o.scheme = LaborSampling{importance};
  o.seed = 9;
  return o;
}

std::vector<int64_t> seeds_of(int64_t batch, int64_t n, int64_t num_nodes) {
  std::vector<int64_t> s;
  for (int64_t i = 0; i < n; ++i) s.push_back((batch * 7919 + i * 13) % num_nodes);
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

// LABOR-0: every seed keeps min(fanout, degree) distinct in-neighbours (GraphBolt's sequential
// Poisson sampling: a fixed count, as neighbour sampling); LABOR-i: distinct, at most the degree.
TEST(Labor, EachSeedKeepsMinOfFanoutAndDegree) {
  const Csr& g = community();
  PartitionData part = single_part(g);
  auto self = make_communicator("self");
  for (int importance : {0, 1, -1}) {
    CollectiveSampler s(part, *self, labor({6, 4}, importance));
    for (int64_t b = 0; b < 3; ++b) {
      SampledBatch sb = s.sample(seeds_of(b, 200, g.num_nodes), 0, b);
      for (const Block& blk : sb.blocks) {
        ASSERT_EQ(blk.weights.empty(), importance == 0);
        for (int64_t v = 0; v < blk.num_dst; ++v) {
          const int64_t deg = g.degree(blk.src_ids[v]);
          const int k = &blk == &sb.blocks.back() ? 6 : 4;
          if (importance == 0) {
            ASSERT_EQ(blk.indptr[v + 1] - blk.indptr[v], std::min<int64_t>(k, deg));
          } else {  // Poisson sampling: any count up to the degree
            ASSERT_LE(blk.indptr[v + 1] - blk.indptr[v], deg);
          }
          std::set<int64_t> nb;
          for (int64_t e = blk.indptr[v]; e < blk.indptr[v + 1]; ++e) {
            nb.insert(blk.src_ids[blk.indices[e]]);
          }
          EXPECT_EQ(static_cast<int64_t>(nb.size()), blk.indptr[v + 1] - blk.indptr[v]);
        }
      }
    }
  }
}

// LABOR-0 picks the k neighbours of smallest variate: checked against the variates directly.
TEST(Labor, Labor0PicksTheSmallestVariates) {
  std::vector<int64_t> row(40);
  for (int64_t i = 0; i < 40; ++i) row[i] = 3 * i + 1;
  csp::LaborVariates lv;
  lv.on = true;
  lv.key0 = lv.key1 = rng_key(4, 1, 2, 3);
  std::vector<std::pair<uint32_t, int64_t>> want;
  for (int64_t i = 0; i < 40; ++i) want.push_back({csp::labor_variate(lv, row[i]), i});
  std::sort(want.begin(), want.end());
  std::vector<int64_t> expect;
  for (int i = 0; i < 7; ++i) expect.push_back(want[i].second);
  std::sort(expect.begin(), expect.end());
  std::vector<int64_t> pos(7);
  ASSERT_EQ(csp::labor_positions(row.data(), 40, 7, lv, pos.data()), 7);
  EXPECT_EQ(pos, expect);
}

// The point of LABOR: seeds share their neighbours' variates, so a batch reaches fewer distinct
// nodes than neighbour sampling at the same fanouts (on the community graph, where
// neighbourhoods overlap); layer dependency shrinks the input layer further.
TEST(Labor, FewerDistinctNodesThanNeighbourSampling) {
  const Csr& g = community();
  PartitionData part = single_part(g);
  auto self = make_communicator("self");
  auto input_nodes = [&](SamplerOptions o) {
    CollectiveSampler s(part, *self, o);
    for (int64_t b = 0; b < 4; ++b) s.sample(seeds_of(b, 256, g.num_nodes), 0, b);
    return s.stats().layer_sources;
  };
  SamplerOptions ns{{10, 10}};
  ns.seed = 9;
  const std::vector<int64_t> n = input_nodes(ns), l0 = input_nodes(labor({10, 10}, 0)),
                             l1 = input_nodes(labor({10, 10}, 1));
  SamplerOptions dep = labor({10, 10}, 0);
  dep.scheme = LaborSampling{0, true};
  const std::vector<int64_t> ld = input_nodes(dep);
  ASSERT_EQ(n.size(), 2u);
  std::cout << "distinct nodes per layer (4 batches): neighbor " << n[0] << " " << n[1]
            << ", labor-0 " << l0[0] << " " << l0[1] << ", labor-1 " << l1[0] << " " << l1[1]
            << ", labor-0 layer dependency " << ld[0] << " " << ld[1] << "\n";
  EXPECT_LT(l0[0], n[0]);
  EXPECT_LT(l0[1], 0.9 * n[1]);  // the input layer, where the hops' neighbourhoods overlap
  EXPECT_LT(l1[1], l0[1]);
  EXPECT_LT(ld[1], l0[1]);
}

// Unbiasedness: seed 0 has 30 in-neighbours 100..129, ten other seeds have two each among
// 100..109, so LABOR-1 gives 100..109 a far higher inclusion probability for seed 0 too. The
// signal x_t = [t < 110] + [3 | t] has the full mean 2/3 over seed 0's row. Over many epochs the
// weighted mean (LABOR-1: sum of w x / n, the models' weighted mean; LABOR-0: the plain mean) must
// approach 1/3 within 4 standard errors, while the unweighted LABOR-1 mean is far off (so the
// weights matter).
TEST(Labor, WeightedNeighbourMeanIsUnbiased) {
  std::vector<std::vector<int64_t>> rows(130);
  for (int64_t t = 100; t < 130; ++t) rows[0].push_back(t);
  for (int64_t j = 1; j <= 10; ++j) rows[j] = {99 + j, 100 + (j % 10)};
  for (auto& r : rows) std::sort(r.begin(), r.end());
  PartitionData part = single_part(make_graph(rows));
  auto self = make_communicator("self");
  const std::vector<int64_t> seeds{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const int E = 4000;
  auto signal = [](int64_t t) { return (t < 110 ? 1.0 : 0.0) + (t % 3 == 0 ? 1.0 : 0.0); };
  double full = 0;
  for (int64_t t : rows[0]) full += signal(t) / 30;
  for (int importance : {0, 1}) {
    CollectiveSampler s(part, *self, labor({5}, importance));
    double sum = 0, sum2 = 0, plain = 0, count = 0;
    for (int ep = 0; ep < E; ++ep) {
      const SampledBatch sb = s.sample(seeds, ep, 0);
      const Block& b = sb.blocks[0];
      double wx = 0, x = 0;
      const int64_t n = b.indptr[1] - b.indptr[0];
      if (importance == 0) {
        ASSERT_EQ(n, 5);
      }
      count += static_cast<double>(n);
      for (int64_t e = b.indptr[0]; e < b.indptr[1]; ++e) {
        const double xe = signal(b.src_ids[b.indices[e]]);
        wx += (b.weights.empty() ? 1.0f : b.weights[e]) * xe;
        x += xe;
      }
      const double est = n ? wx / n : 0.0;  // LABOR-1 may pick none: the estimate is then 0
      sum += est;
      sum2 += est * est;
      plain += n ? x / n : 0.0;
    }
    std::cout << "LABOR-" << importance << ": mean picks of seed 0 " << count / E
              << ", weighted mean " << sum / E << ", plain mean " << plain / E << "\n";
    const double mean = sum / E, sd = std::sqrt(sum2 / E - mean * mean);
    const double tol = 4 * sd / std::sqrt(E) + 1e-6;  // (float weights)
    EXPECT_NEAR(mean, full, tol) << "LABOR-" << importance;
    if (importance) {
      EXPECT_GT(plain / E, full + 0.2) << "LABOR-1 picks favour 100..109";
    }
  }
}

// The same blocks (ids, weights) on every backend, LABOR-0 (backend op) and LABOR-1 (host),
// with batch dependency.
TEST(Labor, SameBlocksOnEveryBackend) {
  const Csr& g = community();
  PartitionData part = single_part(g);
  auto self = make_communicator("self");
  for (int importance : {0, 1}) {
    SamplerOptions o = labor({5, 3}, importance);
    std::get<LaborSampling>(o.scheme).batch_dependency = 3;
    CollectiveSampler ref(part, *self, o);
    for (const std::string& name : test::sampler_backend_names(false)) {
      if (!test::backend_unavailable(name).empty()) continue;
      CollectiveSampler s(part, *self, o, test::sampler_backend(name));
      for (int64_t b = 0; b < 3; ++b) {
        const std::vector<int64_t> seeds = seeds_of(b, 150, g.num_nodes);
        SampledBatch got = s.sample(seeds, 1, b), want = ref.sample(seeds, 1, b);
        for (size_t l = 0; l < got.blocks.size(); ++l) {
          got.blocks[l].edges_to_host();
          EXPECT_EQ(got.blocks[l].src_ids, want.blocks[l].src_ids) << name << " layer " << l;
          EXPECT_EQ(got.blocks[l].indices, want.blocks[l].indices) << name << " layer " << l;
          EXPECT_EQ(got.blocks[l].weights, want.blocks[l].weights) << name << " layer " << l;
        }
      }
    }
  }
}

// Batch dependency: consecutive batches' variates are close, so consecutive batches of the same
// seeds share more picks than with independent variates.
TEST(Labor, BatchDependencyKeepsConsecutiveBatchesClose) {
  const Csr& g = community();
  PartitionData part = single_part(g);
  auto self = make_communicator("self");
  const std::vector<int64_t> seeds = seeds_of(0, 300, g.num_nodes);
  auto overlap = [&](int K) {
    SamplerOptions o = labor({5});
    std::get<LaborSampling>(o.scheme).batch_dependency = K;
    CollectiveSampler s(part, *self, o);
    int64_t same = 0;
    for (int64_t b = 0; b < 8; ++b) {
      const Block x = s.sample(seeds, 0, b).blocks[0], y = s.sample(seeds, 0, b + 1).blocks[0];
      std::set<int64_t> a(x.src_ids.begin(), x.src_ids.end());
      for (int64_t v : y.src_ids) same += a.count(v);
    }
    return same;
  };
  EXPECT_GT(overlap(16), 1.1 * overlap(1));
}

// Layer-wise without replacement: c_u <= d_u always, distinct neighbours, and the counts'
// means n d_u / D (multivariate hypergeometric) within 4.5 standard errors per node.
TEST(LayerWiseWithout, HypergeometricCounts) {
  std::vector<std::vector<int64_t>> rows(40);
  const std::vector<int64_t> deg{1, 2, 3, 5, 8, 13};
  for (size_t i = 0; i < deg.size(); ++i) {
    for (int64_t j = 0; j < deg[i]; ++j) rows[i].push_back(10 + j);
  }
  PartitionData part = single_part(make_graph(rows));
  auto self = make_communicator("self");
  SamplerOptions o{{12}};
  o.scheme = LayerSampling{false, false, LayerDraws::kWithout};
  CollectiveSampler s(part, *self, o);
  const std::vector<int64_t> seeds{0, 1, 2, 3, 4, 5};
  const double D = 32, n = 12;
  const int B = 3000;
  std::vector<double> sum(6, 0);
  for (int b = 0; b < B; ++b) {
    const Block blk = s.sample(seeds, 0, b).blocks[0];
    int64_t total = 0;
    for (int64_t u = 0; u < 6; ++u) {
      const int64_t c = blk.indptr[u + 1] - blk.indptr[u];
      ASSERT_LE(c, deg[u]);
      std::set<int64_t> nb(blk.indices.begin() + blk.indptr[u],
                           blk.indices.begin() + blk.indptr[u + 1]);
      ASSERT_EQ(static_cast<int64_t>(nb.size()), c);
      sum[u] += c;
      total += c;
    }
    ASSERT_EQ(total, 12);
  }
  for (int u = 0; u < 6; ++u) {
    const double p = deg[u] / D, var = n * p * (1 - p) * (D - n) / (D - 1);
    EXPECT_NEAR(sum[u] / B, n * p, 4.5 * std::sqrt(var / B)) << "node " << u;
  }
}

// The flags of a scheme the user did not choose are refused by name, in any order (flags, JSON,
// the Loader's keywords); a scheme's settings that do not fit are refused by the sampler too.
TEST(LaborOptions, RefusalsAndParsing) {
  auto config = [](SamplerKind kind) {
    SamplerConfig c;
    c.kind = kind;
    c.fanouts = {5};
    return c;
  };
  SamplerConfig c = config(SamplerKind::kLabor);
  c.biased = true;
  EXPECT_EQ(error_of([&] { c.options(); }),
            "--sampler labor: LABOR samples node-wise, uniformly and without replacement "
            "(biased, with-replacement and layer-wise LABOR are not supported)");
  c = config(SamplerKind::kNeighbor);
  c.labor_importance = 1;
  EXPECT_EQ(error_of([&] { c.options(); }),
            "--labor-importance, --labor-layer-dependency and --labor-batch-dependency need "
            "--sampler labor");
  c = config(SamplerKind::kNeighbor);
  c.layer_draws = LayerDraws::kWithout;
  EXPECT_EQ(error_of([&] { c.options(); }), "--layer-draws without needs --sampler layer");
  c.kind = SamplerKind::kLayer;
  c.biased = true;
  EXPECT_EQ(error_of([&] { c.options(); }),
            "--layer-draws without: layer-wise sampling without replacement is uniform and takes "
            "distinct neighbours (biased sampling and --replace are not supported with it)");
  EXPECT_EQ(error_of([] { parse_choice<SamplerKind>("ladies"); }),
            "unknown sampler 'ladies' (neighbor, labor, layer)");

  // what the scheme's settings allow: checked by validate() and by the sampler, on every rank
  SamplerOptions o = labor({5});
  o.mode = SampleMode::kPull;
  EXPECT_EQ(error_of([&] { o.validate(); }), "--sampler labor: the pull mode is not supported");
  SamplerOptions n{{5}};
  n.scheme = LayerSampling{true, false, LayerDraws::kWithout};
  EXPECT_EQ(error_of([&] { n.validate(); }),
            "--layer-draws without: layer-wise sampling without replacement is uniform and takes "
            "distinct neighbours (biased sampling and --replace are not supported with it)");
  PartitionData part = single_part(community());
  auto self = make_communicator("self");
  o.scheme = LaborSampling{0, false, 0};
  o.mode = SampleMode::kCsp;
  EXPECT_EQ(error_of([&] { CollectiveSampler s(part, *self, o); }),
            "sampler: --labor-batch-dependency: must be >= 1 (got 0)");
  CollectiveSampler s(part, *self, labor({5}));
  CollectiveSampler::ExcludedEdges ex{{1}, {2}};
  EXPECT_EQ(error_of([&] { s.sample({1}, 0, 0, &ex); }),
            "sampler: edge exclusion (link prediction) is not supported with --sampler labor");

  // the options table: --sampler sets the scheme, * is LABOR-*, and the flags' order is free
  SamplerConfig p;
  const auto& t = sampler_options_table();
  options::find(t, "labor_importance").parse(p, "*");
  options::find(t, "sampler").parse(p, "labor");
  ASSERT_NE(p.options().labor(), nullptr);
  EXPECT_EQ(p.options().labor()->importance, -1);
  EXPECT_EQ(options::find(t, "labor_importance").write(p), "*");
  SamplerConfig q;
  read_options(t, {{"labor_batch_dependency", 2}, {"labor_importance", 3}, {"sampler", "labor"}}, q,
               "test");
  const SamplerOptions qo = q.options();
  ASSERT_NE(qo.labor(), nullptr);
  EXPECT_EQ(qo.labor()->importance, 3);
  EXPECT_EQ(qo.labor()->batch_dependency, 2);
  SamplerConfig zero;  // LABOR's default value given alone: still neighbour sampling
  options::find(t, "labor_importance").parse(zero, "0");
  EXPECT_TRUE(std::holds_alternative<NeighborSampling>(zero.options().scheme));
  options::find(t, "sampler").parse(p, "layer");
  p.labor_importance = 0;
  EXPECT_NE(p.options().layer(), nullptr);
  EXPECT_EQ(error_of([&] { options::find(t, "labor_importance").parse(p, "-2"); }),
            "--labor-importance: rounds must be >= 0 or * (got -2)");
}

}  // namespace
}  // namespace dsp
