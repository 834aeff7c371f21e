// Temporal neighbour sampling's per-task logic (csp/temporal_kernels.hpp) and the whole-graph
// reference (temporal_reference.hpp): strict eligibility, uniform picks uniform over the eligible
// entries (chi-square, fixed seeds), distinct without replacement, recent's exact picks with ties,
// independent streams for two times of one node, and the reference's blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "core/rng.hpp"
#include "csp/temporal_kernels.hpp"
#include "csp/temporal_reference.hpp"
#include "graph/csr.hpp"

namespace dsp {
namespace {

using csp::TemporalStrategy;
using testref::TemporalNode;

double chi2(const std::vector<double>& obs, const std::vector<double>& exp) {
  double c = 0;
  for (size_t i = 0; i < obs.size(); ++i) c += (obs[i] - exp[i]) * (obs[i] - exp[i]) / exp[i];
  return c;
}
// Upper bound of the chi-square quantile at p = 1e-4 (Wilson-Hilferty), as test_sampler.cpp.
double chi2_bound(int dof) {
  const double z = 3.72, a = 2.0 / (9.0 * dof);
  return dof * std::pow(1 - a + z * std::sqrt(a), 3);
}

std::vector<int64_t> sample(const std::vector<int64_t>& t, int64_t T, int k,
                            TemporalStrategy strategy, bool replace, uint64_t key, int64_t v = 7) {
  std::vector<int64_t> pos(static_cast<size_t>(std::max(k, 1)));
  const RngStream s = csp::temporal_stream(key, v, T);
  const int c = csp::temporal_positions(t.data(), static_cast<int64_t>(t.size()), T, k, strategy,
                                        replace, s, pos.data());
  pos.resize(static_cast<size_t>(c));
  return pos;
}

// Row times with every third entry at exactly T = 100 and the others before or after it.
std::vector<int64_t> mixed_row(int deg) {
  std::vector<int64_t> t(static_cast<size_t>(deg));
  for (int j = 0; j < deg; ++j) t[j] = j % 3 == 0 ? 100 : j % 3 == 1 ? j : 100 + j;
  return t;
}

TEST(TemporalKernels, EligibilityIsStrict) {
  const std::vector<int64_t> t = {5, 10, 10, 3, 7};
  for (bool replace : {false, true}) {
    for (uint64_t key = 0; key < 500; ++key) {
      for (int64_t p : sample(t, 10, 2, TemporalStrategy::kUniform, replace, key)) {
        ASSERT_LT(t[p], 10) << "position " << p << " (time " << t[p] << ") picked at T = 10";
      }
    }
  }
  EXPECT_EQ(sample(t, 10, 8, TemporalStrategy::kUniform, false, 1),
            (std::vector<int64_t>{0, 3, 4}));
  EXPECT_EQ(sample(t, 10, 8, TemporalStrategy::kRecent, false, 1), (std::vector<int64_t>{0, 3, 4}));
  EXPECT_EQ(sample(t, 11, 8, TemporalStrategy::kRecent, false, 1),
            (std::vector<int64_t>{0, 1, 2, 3, 4}));
  for (bool replace : {false, true}) {
    EXPECT_TRUE(sample(t, 3, 4, TemporalStrategy::kUniform, replace, 1).empty());
    EXPECT_TRUE(sample(t, 3, 4, TemporalStrategy::kRecent, replace, 1).empty());
  }
  EXPECT_TRUE(sample({}, 3, 4, TemporalStrategy::kUniform, false, 1).empty());
  EXPECT_TRUE(sample(t, 10, 0, TemporalStrategy::kUniform, false, 1).empty());
}

TEST(TemporalKernels, UniformWithoutReplacementChiSquareDistinct) {
  const std::vector<int64_t> t = mixed_row(45);  // 15 eligible entries at T = 100
  const int k = 4, trials = 20000;
  std::vector<double> obs(t.size(), 0);
  for (int r = 0; r < trials; ++r) {
    const std::vector<int64_t> p =
        sample(t, 100, k, TemporalStrategy::kUniform, false, rng_key(11, 0, r));
    ASSERT_EQ(p.size(), static_cast<size_t>(k));
    ASSERT_TRUE(std::is_sorted(p.begin(), p.end()));
    ASSERT_EQ(std::set<int64_t>(p.begin(), p.end()).size(), p.size()) << "a repeated pick";
    for (int64_t x : p) obs[x] += 1;
  }
  std::vector<double> o, e;
  for (size_t j = 0; j < t.size(); ++j) {
    if (t[j] >= 100) {
      EXPECT_EQ(obs[j], 0) << "ineligible entry " << j << " picked";
      continue;
    }
    o.push_back(obs[j]);
    e.push_back(static_cast<double>(trials) * k / 15.0);
  }
  ASSERT_EQ(o.size(), 15u);
  EXPECT_LT(chi2(o, e), chi2_bound(14));
}

TEST(TemporalKernels, UniformWithReplacementChiSquare) {
  const std::vector<int64_t> t = mixed_row(30);  // 10 eligible entries at T = 100
  const int k = 3, trials = 20000;
  std::vector<double> obs(t.size(), 0);
  for (int r = 0; r < trials; ++r) {
    const std::vector<int64_t> p =
        sample(t, 100, k, TemporalStrategy::kUniform, true, rng_key(12, 0, r));
    ASSERT_EQ(p.size(), static_cast<size_t>(k));
    ASSERT_TRUE(std::is_sorted(p.begin(), p.end()));
    for (int64_t x : p) obs[x] += 1;
  }
  std::vector<double> o, e;
  for (size_t j = 0; j < t.size(); ++j) {
    if (t[j] >= 100) {
      EXPECT_EQ(obs[j], 0) << "ineligible entry " << j << " picked";
      continue;
    }
    o.push_back(obs[j]);
    e.push_back(static_cast<double>(trials) * k / 10.0);
  }
  EXPECT_LT(chi2(o, e), chi2_bound(9));
}

TEST(TemporalKernels, UniformTakesEveryEligibleEntryWhenAtMostK) {
  const std::vector<int64_t> t = mixed_row(12);  // eligible: 1, 4, 7, 10
  EXPECT_EQ(sample(t, 100, 4, TemporalStrategy::kUniform, false, 3),
            (std::vector<int64_t>{1, 4, 7, 10}));
  EXPECT_EQ(sample(t, 100, 9, TemporalStrategy::kUniform, false, 3),
            (std::vector<int64_t>{1, 4, 7, 10}));
  // With replacement: k picks (repeats possible), all eligible.
  const std::vector<int64_t> p = sample(t, 100, 9, TemporalStrategy::kUniform, true, 3);
  EXPECT_EQ(p.size(), 9u);
  for (int64_t x : p) EXPECT_EQ(x % 3, 1);
}

TEST(TemporalKernels, RecentPicksTheLatestEligibleWithTiesToLowerPositions) {
  //                          0  1  2  3  4  5   6  7
  const std::vector<int64_t> t = {4, 9, 9, 2, 9, 7, 12, 9};
  auto recent = [&](int64_t T, int k) {
    return sample(t, T, k, TemporalStrategy::kRecent, false, 0);
  };
  EXPECT_EQ(recent(10, 1), (std::vector<int64_t>{1}));
  EXPECT_EQ(recent(10, 3), (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(recent(10, 5), (std::vector<int64_t>{1, 2, 4, 5, 7}));
  EXPECT_EQ(recent(10, 6), (std::vector<int64_t>{0, 1, 2, 4, 5, 7}));
  EXPECT_EQ(recent(10, 20), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 7}));
  EXPECT_EQ(recent(13, 2), (std::vector<int64_t>{1, 6}));
  EXPECT_EQ(recent(9, 2), (std::vector<int64_t>{0, 5}));
  EXPECT_EQ(recent(5, 3), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(recent(3, 3), (std::vector<int64_t>{3}));
  EXPECT_TRUE(recent(2, 3).empty());
  // No draws: the key and the replace flag change nothing.
  EXPECT_EQ(sample(t, 10, 3, TemporalStrategy::kRecent, true, 99), recent(10, 3));
}

// (v, T1) and (v, T2) with the same eligible entries draw independently: the 10 x 10 table of one
// pick each under many keys passes a chi-square test of independence; the same (v, T) repeats.
TEST(TemporalKernels, TwoTimesOfOneNodeDrawIndependently) {
  const std::vector<int64_t> t(10, 0);
  const int trials = 20000;
  std::vector<double> joint(100, 0);
  int same = 0;
  for (int r = 0; r < trials; ++r) {
    const uint64_t key = rng_key(5, 1, r, 0);
    const auto a = sample(t, 50, 1, TemporalStrategy::kUniform, false, key);
    const auto b = sample(t, 51, 1, TemporalStrategy::kUniform, false, key);
    ASSERT_EQ(a, sample(t, 50, 1, TemporalStrategy::kUniform, false, key));
    joint[a[0] * 10 + b[0]] += 1;
    same += a[0] == b[0];
  }
  const std::vector<double> expect(100, trials / 100.0);
  EXPECT_LT(chi2(joint, expect), chi2_bound(81));
  EXPECT_NEAR(same, trials / 10.0, 5 * std::sqrt(trials * 0.1 * 0.9));
  // The node id and the step key matter as well.
  EXPECT_NE(csp::temporal_stream(1, 7, 50).at(0), csp::temporal_stream(1, 8, 50).at(0));
  EXPECT_NE(csp::temporal_stream(1, 7, 50).at(0), csp::temporal_stream(2, 7, 50).at(0));
  EXPECT_NE(csp::temporal_stream(1, 7, 50).at(0), RngStream(1, 7, csp::kPurposeNodeWise).at(0));
}

// A random graph with times: row v lists up to 12 neighbours, times in [0, 100).
Csr random_temporal_graph(int64_t n, uint64_t seed) {
  std::vector<int64_t> src, dst, time;
  for (int64_t v = 0; v < n; ++v) {
    RngStream s(seed, static_cast<uint64_t>(v));
    const int deg = static_cast<int>(s.uniform_int(13));
    for (int j = 0; j < deg; ++j) {
      src.push_back(static_cast<int64_t>(s.uniform_int(static_cast<uint64_t>(n))));
      dst.push_back(v);
      time.push_back(static_cast<int64_t>(s.uniform_int(100)));
    }
  }
  return build_in_csr<int64_t>(n, src.data(), dst.data(), static_cast<int64_t>(src.size()), nullptr,
                               CsrBuildOptions{}, time.data());
}

TEST(TemporalReference, BlocksOfTimedNodes) {
  const Csr g = random_temporal_graph(300, 21);
  const std::vector<TemporalNode> seeds = {{3, 50}, {3, 80}, {17, 20}, {250, 99}, {40, 0}};
  for (auto strategy : {TemporalStrategy::kUniform, TemporalStrategy::kRecent}) {
    testref::TemporalRequest r;
    r.fanouts = {4, 3};
    r.strategy = strategy;
    r.seed = 9;
    r.batch = 2;
    const auto blocks = testref::temporal_reference_sample(g, seeds, r);
    ASSERT_EQ(blocks.size(), 2u);
    EXPECT_EQ(
        std::vector<TemporalNode>(blocks[1].src.begin(), blocks[1].src.begin() + blocks[1].num_dst),
        seeds);
    EXPECT_EQ(blocks[0].num_dst, static_cast<int64_t>(blocks[1].src.size()));
    for (const auto& b : blocks) {
      EXPECT_EQ(std::set<TemporalNode>(b.src.begin(), b.src.end()).size(), b.src.size());
      for (int64_t d = 0; d < b.num_dst; ++d) {
        const int64_t count = b.indptr[d + 1] - b.indptr[d];
        const int64_t v = b.src[d].id, T = b.src[d].time;
        const int64_t p0 = g.rowptr()[v], deg = g.degree(v);
        const int64_t eligible = csp::count_eligible(g.times.data<int64_t>() + p0, deg, T);
        const int64_t fanout = &b == &blocks[1] ? 4 : 3;
        EXPECT_EQ(count, std::min(eligible, fanout)) << "node (" << v << ", " << T << ")";
        for (int64_t e = b.indptr[d]; e < b.indptr[d + 1]; ++e) {
          const TemporalNode& u = b.src[b.indices[e]];
          EXPECT_LT(b.edge_time[e], T);
          EXPECT_EQ(u.time, T) << "a neighbour inherits its destination's time";
          EXPECT_EQ(u.id, g.indices.int_at(p0 + b.positions[e]));
          EXPECT_EQ(b.edge_time[e], g.times.data<int64_t>()[p0 + b.positions[e]]);
        }
      }
    }
    // A pure function of its inputs; another batch draws other uniform picks.
    const auto again = testref::temporal_reference_sample(g, seeds, r);
    EXPECT_EQ(again[0].src, blocks[0].src);
    EXPECT_EQ(again[0].positions, blocks[0].positions);
    r.batch = 3;
    const auto other = testref::temporal_reference_sample(g, seeds, r);
    if (strategy == TemporalStrategy::kRecent) {
      EXPECT_EQ(other[0].positions, blocks[0].positions);
    } else {
      EXPECT_NE(other[0].positions, blocks[0].positions);
    }
  }
}

TEST(TemporalReference, RepeatedSeedPairIsRefused) {
  const Csr g = random_temporal_graph(20, 3);
  testref::TemporalRequest r;
  r.fanouts = {2};
  EXPECT_THROW(testref::temporal_reference_sample(g, {{1, 5}, {1, 5}}, r), Error);
}

}  // namespace
}  // namespace dsp
