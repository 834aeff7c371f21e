// Degree-sorted scheduling (csp/degree_schedule.hpp): the schedules are permutations of the tasks,
// snake order balances bins within the largest cost, and the turbo kernel and the CPU backend's
// turbo split give exactly the default blocks at 1..3 threads (the device kernel's equality at
// 1..4 ranks is the PInvariance suite's "-turbo" backends, on the GPU test_csp_backends_cuda's).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "backends.hpp"
#include "ccc/communicator.hpp"
#include "core/rng.hpp"
#include "csp/degree_schedule.hpp"
#include "csp/sampler.hpp"
#include "graph/generate.hpp"

namespace dsp {
namespace {

using csp::SnakeSplit;
using csp::WarpSnake;

// Power-law-ish keys in [0, kDegreeKeyCap], many ties.
std::vector<int64_t> skewed_keys(int64_t n, uint64_t seed) {
  std::vector<int64_t> k(static_cast<size_t>(n));
  RngStream s(rng_key(seed), 0);
  for (auto& x : k) {
    const double u = s.uniform01();
    x = csp::degree_key(static_cast<int64_t>(1.0 / (u * u + 1e-4)));
  }
  return k;
}

TEST(DegreeOrder, StableDescending) {
  std::vector<int64_t> keys = skewed_keys(5000, 1), order, count;
  keys[7] = csp::kDegreeKeyCap;
  keys[9] = 0;
  csp::degree_order(keys.data(), static_cast<int64_t>(keys.size()), order, count);
  std::vector<int64_t> want(keys.size());
  std::iota(want.begin(), want.end(), 0);
  std::stable_sort(want.begin(), want.end(),
                   [&](int64_t a, int64_t b) { return keys[a] > keys[b]; });
  EXPECT_EQ(order, want);
}

TEST(SnakeSplit, PermutationBalancedWithinLargestKey) {
  for (int64_t n : {0, 1, 2, 5, 97, 4096, 30001}) {
    for (int bins : {1, 2, 3, 7}) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " bins=" << bins);
      const std::vector<int64_t> keys = skewed_keys(n, n + bins);
      SnakeSplit sp;
      sp.build(keys.data(), n, bins);
      ASSERT_EQ(sp.bounds.size(), static_cast<size_t>(bins) + 1);
      EXPECT_EQ(sp.bounds.front(), 0);
      EXPECT_EQ(sp.bounds.back(), n);
      std::vector<int64_t> seen = sp.order;
      std::sort(seen.begin(), seen.end());
      std::vector<int64_t> all(static_cast<size_t>(n));
      std::iota(all.begin(), all.end(), 0);
      EXPECT_EQ(seen, all);  // a permutation of the tasks
      int64_t lo = INT64_MAX, hi = INT64_MIN, max_key = 0, min_size = n, max_size = 0;
      for (int c = 0; c < bins; ++c) {
        int64_t sum = 0;
        for (int64_t j = sp.bounds[c]; j < sp.bounds[c + 1]; ++j) {
          sum += keys[sp.order[j]];
          max_key = std::max(max_key, keys[sp.order[j]]);
          if (j > sp.bounds[c]) {
            EXPECT_GE(keys[sp.order[j - 1]], keys[sp.order[j]]);
          }
        }
        lo = std::min(lo, sum);
        hi = std::max(hi, sum);
        min_size = std::min(min_size, sp.bounds[c + 1] - sp.bounds[c]);
        max_size = std::max(max_size, sp.bounds[c + 1] - sp.bounds[c]);
      }
      EXPECT_LE(hi - lo, max_key);        // the snake bound
      EXPECT_LE(max_size - min_size, 1);  // as many tasks per thread as equal chunks
    }
  }
}

// Equal chunks of the same sorted keys are far from balanced: the bound above is the schedule's
// doing, not the data's.
TEST(SnakeSplit, EqualChunksOfSortedKeysAreNot) {
  std::vector<int64_t> keys = skewed_keys(30001, 3), order, count;
  csp::degree_order(keys.data(), 30001, order, count);
  int64_t first = 0, second = 0;
  for (int64_t j = 0; j < 15000; ++j) first += keys[order[j]];
  for (int64_t j = 15000; j < 30001; ++j) second += keys[order[j]];
  EXPECT_GT(first - second, csp::kDegreeKeyCap);
}

TEST(WarpSnake, EveryTaskOnceAndBlocksBalanced) {
  for (int64_t n : {0, 1, 31, 32, 33, 127, 128, 129, 1000, 4097, 20000}) {
    SCOPED_TRACE(n);
    const WarpSnake geo = WarpSnake::of(n);
    EXPECT_EQ(geo.blocks, (n + WarpSnake::kThreads - 1) / WarpSnake::kThreads);
    // costs along the sorted order: non-increasing
    std::vector<int64_t> cost = skewed_keys(n, 5);
    std::sort(cost.begin(), cost.end(), std::greater<int64_t>());
    std::vector<int> hits(static_cast<size_t>(n), 0);
    int64_t lo = INT64_MAX, hi = INT64_MIN, max_unit = 0;
    for (int64_t b = 0; b < geo.blocks; ++b) {
      int64_t sum = 0;
      for (int t = 0; t < WarpSnake::kThreads; ++t) {
        const int64_t p = geo.position(b, t);
        if (p < 0) continue;
        ASSERT_LT(p, n);
        ++hits[p];
        sum += cost[p];
        // lanes of a warp take consecutive sorted positions
        if (t % WarpSnake::kLanes) {
          EXPECT_EQ(geo.position(b, t - 1), p - 1);
        }
      }
      lo = std::min(lo, sum);
      hi = std::max(hi, sum);
    }
    for (int64_t u = 0; u * WarpSnake::kLanes < n; ++u) {
      int64_t s = 0;
      for (int64_t p = u * WarpSnake::kLanes; p < std::min(n, (u + 1) * WarpSnake::kLanes); ++p) {
        s += cost[p];
      }
      max_unit = std::max(max_unit, s);
    }
    for (int64_t p = 0; p < n; ++p) ASSERT_EQ(hits[p], 1) << p;
    if (geo.blocks > 0) {
      EXPECT_LE(hi - lo, max_unit);
    }
  }
}

TEST(WarpSnake, SharedSlotPolicy) {
  // 128 threads * 48 positions * 8 bytes = 48 KiB: the most a block takes without opting in.
  EXPECT_EQ(WarpSnake::shared_slot(15), 15);
  EXPECT_EQ(WarpSnake::shared_slot(48), 48);
  EXPECT_EQ(WarpSnake::shared_slot(500), 48);
  EXPECT_EQ(WarpSnake::shared_slot(0), 0);
  EXPECT_TRUE(csp::uses_shared_slot(100, 10, 15));
  EXPECT_FALSE(csp::uses_shared_slot(10, 10, 15));   // takes the whole row: nothing to draw
  EXPECT_FALSE(csp::uses_shared_slot(100, 20, 15));  // its fanout does not fit the slot
}

void expect_same(const SampledBatch& a, const SampledBatch& b) {
  ASSERT_EQ(a.blocks.size(), b.blocks.size());
  for (size_t l = 0; l < a.blocks.size(); ++l) {
    SCOPED_TRACE(l);
    EXPECT_EQ(a.blocks[l].indptr, b.blocks[l].indptr);
    EXPECT_EQ(a.blocks[l].indices, b.blocks[l].indices);
    EXPECT_EQ(a.blocks[l].src_ids, b.blocks[l].src_ids);
    EXPECT_EQ(a.blocks[l].weights, b.blocks[l].weights);
  }
}

// Whole batches (every node a seed, so a layer has thousands of tasks and the split has many
// bins) under each scheme: the turbo split and kernel give the default blocks at 1..3 threads.
TEST(TurboKernel, SameBlocksAsDefaultAtAnyThreadCount) {
  CommunityOptions co;
  co.num_nodes = 4000;
  co.num_edges = 60000;
  co.num_communities = 6;
  co.feature_dim = 0;
  co.seed = 4;
  Csr g = generate_community(co).graph;
  std::vector<float> w(static_cast<size_t>(g.num_edges()));
  RngStream s(rng_key(2), 0);
  for (auto& x : w) x = (s.next_u32() % 7 == 0) ? 0.0f : 0.1f + 2 * s.uniform01();
  g.weights = Array::from_vector(std::move(w));
  PartitionData part = single_part(g);
  auto comm = make_communicator("self");
  std::vector<int64_t> seeds(static_cast<size_t>(part.meta.num_nodes));
  std::iota(seeds.begin(), seeds.end(), 0);
  const int saved = omp_get_max_threads();
  for (int biased = 0; biased < 2; ++biased) {
    for (int replace = 0; replace < 2; ++replace) {
      SamplerOptions o{{12, 6}};
      o.scheme = NeighborSampling{biased != 0, replace != 0};
      o.seed = 9;
      CollectiveSampler ref(part, *comm, o);
      const SampledBatch want = ref.sample(seeds, 0, 1);
      EXPECT_GT(want.blocks[1].num_edges(), 40000);  // 4000 tasks in both layers
      for (int threads : {1, 2, 3}) {
        SCOPED_TRACE(::testing::Message()
                     << "biased=" << biased << " replace=" << replace << " threads=" << threads);
        omp_set_num_threads(threads);
        for (const char* name : {"cpu-turbo", "emulated-turbo"}) {
          SCOPED_TRACE(name);
          CollectiveSampler t(part, *comm, o, test::sampler_backend(name));
          expect_same(t.sample(seeds, 0, 1), want);
        }
      }
      omp_set_num_threads(saved);
    }
  }
}

TEST(TurboKernel, ParseNames) {
  EXPECT_EQ(parse_choice<SampleKernel>("default"), SampleKernel::kDefault);
  EXPECT_EQ(parse_choice<SampleKernel>("turbo"), SampleKernel::kTurbo);
  EXPECT_STREQ(name_of(SampleKernel::kTurbo), "turbo");
  try {
    parse_choice<SampleKernel>("fast");
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "unknown sampling kernel 'fast' (default, turbo)");
  }
}

}  // namespace
}  // namespace dsp
