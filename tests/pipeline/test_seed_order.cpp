// BGL's proximity-aware seed order: a deterministic permutation of the seeds per pass, with the
// locality it exists for.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <unordered_set>

#include "core/error.hpp"
#include "graph/generate.hpp"
#include "pipeline/scheduler.hpp"
#include "pipeline/seed_order.hpp"

namespace dsp {
namespace {

const Dataset& graph() {
  static Dataset ds = [] {
    CommunityOptions o;
    o.num_nodes = 6000;
    o.num_edges = 40000;
    o.num_communities = 30;
    o.feature_dim = 0;
    o.train_frac = 0.3;
    o.seed = 9;
    return generate_community(o);
  }();
  return ds;
}

std::vector<int64_t> train_sorted() {
  const Dataset& ds = graph();
  std::vector<int64_t> s(ds.train_idx.data<int64_t>(),
                         ds.train_idx.data<int64_t>() + ds.train_idx.dim(0));
  std::sort(s.begin(), s.end());
  return s;
}

// Share of consecutive seeds in `order` that are neighbours or share one.
double adjacent_share(const std::vector<int64_t>& order) {
  const Csr& g = graph().graph;
  auto nbrs = [&](int64_t v) {
    std::unordered_set<int64_t> s;
    for (int64_t e = g.rowptr()[v]; e < g.rowptr()[v + 1]; ++e) s.insert(g.indices.int_at(e));
    return s;
  };
  int64_t close = 0;
  for (size_t i = 1; i < order.size(); ++i) {
    auto a = nbrs(order[i - 1]);
    auto b = nbrs(order[i]);
    bool c = a.count(order[i]) > 0;
    for (int64_t u : b) c = c || a.count(u) > 0;
    close += c;
  }
  return static_cast<double>(close) / static_cast<double>(order.size() - 1);
}

TEST(BfsOrder, EveryPassIsADeterministicPermutationOfTheSeeds) {
  const std::vector<int64_t> seeds = train_sorted();
  for (int s : {1, 3}) {
    BfsSeedOrder a(graph().graph, 0, seeds, 5, {s, 0});
    BfsSeedOrder b(graph().graph, 0, seeds, 5, {s, 0});
    EXPECT_EQ(a.pool_size(), std::max(8, 2 * s));
    for (int i = 0; i < a.pool_size(); ++i) {
      std::vector<int64_t> q = a.sequence(i);
      std::sort(q.begin(), q.end());
      ASSERT_EQ(q, seeds) << "sequence " << i << " is not a permutation";
    }
    for (int64_t epoch : {0, 1, 7}) {
      for (int64_t pass : {0, 1}) {
        std::vector<int64_t> o = a.order(epoch, pass);
        EXPECT_EQ(o, b.order(epoch, pass)) << "not a function of (seed, epoch, pass)";
        std::vector<int64_t> sorted = o;
        std::sort(sorted.begin(), sorted.end());
        ASSERT_EQ(sorted, seeds) << "epoch " << epoch << " pass " << pass;
      }
    }
    EXPECT_NE(a.order(0, 0), a.order(1, 0));
    EXPECT_NE(a.order(0, 0), a.order(0, 1));
    EXPECT_NE(a.order(0, 0), BfsSeedOrder(graph().graph, 0, seeds, 6, {s, 0}).order(0, 0));
  }
}

TEST(BfsOrder, ConsecutiveSeedsAreCloseAndMoreSequencesMixMore) {
  const std::vector<int64_t> seeds = train_sorted();
  const double random = adjacent_share(EpochScheduler::shuffled(seeds, 5, 0, 0));
  const double one = adjacent_share(BfsSeedOrder(graph().graph, 0, seeds, 5, {1, 0}).order(0, 0));
  const double eight = adjacent_share(BfsSeedOrder(graph().graph, 0, seeds, 5, {8, 0}).order(0, 0));
  EXPECT_GT(one, 3 * random) << "bfs " << one << " vs random " << random;
  EXPECT_GT(one, eight);
  EXPECT_GT(eight, random);
}

TEST(BfsOrder, SeedsOutsideTheRowsComeLastAndRepeatsAreKept) {
  // Rows cover global ids [100, 106): a path 100 <- 101 <- ... (each row lists its successor).
  Csr g;
  g.num_nodes = 6;
  g.indptr = Array::from_vector(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 5});
  g.indices = Array::from_vector(std::vector<int64_t>{101, 102, 103, 104, 105});
  std::vector<int64_t> seeds = {7, 100, 102, 102, 105, 300};
  BfsSeedOrder o(g, 100, seeds, 1, {1, 1});
  std::vector<int64_t> q = o.sequence(0);
  ASSERT_EQ(q.size(), seeds.size());
  EXPECT_EQ(std::vector<int64_t>(q.end() - 2, q.end()), (std::vector<int64_t>{7, 300}));
  EXPECT_EQ(std::count(q.begin(), q.end(), 102), 2);
  std::vector<int64_t> p = o.order(3, 0);
  std::sort(p.begin(), p.end());
  EXPECT_EQ(p, seeds);
  EXPECT_THROW(BfsSeedOrder(g, 100, seeds, 1, {0, 0}), InvalidArgument);
  EXPECT_THROW(BfsSeedOrder(g, 100, {5, 1}, 1, {1, 0}), InvalidArgument);
}

TEST(BfsOrder, SchedulerPassesAreBfsOrdersIncludingWrapAround) {
  const std::vector<int64_t> seeds = train_sorted();
  EpochScheduler sched(seeds, 256, 5);
  sched.use_bfs_order(graph().graph, 0, {2, 0});
  ASSERT_TRUE(sched.bfs_order());
  sched.set_steps(sched.local_steps() + 3);  // a rank with fewer seeds wraps into a 2nd pass
  std::vector<int64_t> order = sched.epoch_order(4);
  ASSERT_EQ(static_cast<int64_t>(order.size()), sched.steps() * 256);
  BfsSeedOrder ref(graph().graph, 0, seeds, 5, {2, 0});
  std::vector<int64_t> p0 = ref.order(4, 0), p1 = ref.order(4, 1);
  EXPECT_TRUE(std::equal(p0.begin(), p0.end(), order.begin()));
  EXPECT_TRUE(std::equal(order.begin() + p0.size(), order.end(), p1.begin()));
  std::set<int64_t> used;
  for (int64_t t = 0; t < sched.steps(); ++t) {
    for (int64_t v : sched.batch_seeds(order, t)) used.insert(v);
  }
  EXPECT_EQ(used, std::set<int64_t>(seeds.begin(), seeds.end()));
}

}  // namespace
}  // namespace dsp
