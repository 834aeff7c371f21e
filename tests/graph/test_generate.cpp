#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <set>
#include <vector>

#include "core/error.hpp"
#include "error_of.hpp"
#include "graph/commands.hpp"
#include "graph/csr.hpp"
#include "graph/dataset.hpp"
#include "graph/generate.hpp"
#include "graph/generate_checks.hpp"
#include "graph/io_test_util.hpp"

namespace dsp {
namespace {

using gentest::expect_split_sizes;
using gentest::same_bytes;
using gentest::same_dataset;

// Sets the OpenMP thread count for one scope.
class Threads {
 public:
  explicit Threads(int n) : old_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~Threads() { omp_set_num_threads(old_); }

 private:
  int old_;
};

RmatOptions small_rmat() {
  RmatOptions o;
  o.num_nodes = 5000;  // not a power of two on purpose
  o.num_edges = 80000;
  o.feature_dim = 8;
  o.num_classes = 5;
  o.seed = 7;
  return o;
}

CommunityOptions small_community() {
  CommunityOptions o;
  o.num_nodes = 20000;
  o.num_edges = 200000;
  o.num_communities = 32;
  o.num_classes = 8;  // default feature_dim and noise: the calibration users get
  o.seed = 11;
  return o;
}

std::vector<int64_t> in_degrees(const Csr& g) {
  std::vector<int64_t> d(g.num_nodes);
  for (int64_t v = 0; v < g.num_nodes; ++v) d[v] = g.degree(v);
  return d;
}

// Calls f(v, u) for every stored edge u -> v.
template <class F>
void for_each_edge(const Csr& g, F&& f) {
  for (int64_t v = 0; v < g.num_nodes; ++v) {
    for (int64_t j = g.rowptr()[v]; j < g.rowptr()[v + 1]; ++j) f(v, g.indices.int_at(j));
  }
}

void expect_valid_splits(const Dataset& ds, double train_frac, double valid_frac) {
  const int64_t n = ds.graph.num_nodes;
  EXPECT_EQ(ds.train_idx.numel(), std::llround(train_frac * n));
  EXPECT_EQ(ds.valid_idx.numel(), std::llround(valid_frac * n));
  EXPECT_EQ(ds.meta.num_train, ds.train_idx.numel());
  EXPECT_EQ(ds.meta.num_valid, ds.valid_idx.numel());
  EXPECT_EQ(ds.meta.num_test, ds.test_idx.numel());
  std::vector<int> seen(n, 0);
  for (const Array* split : {&ds.train_idx, &ds.valid_idx, &ds.test_idx}) {
    ASSERT_EQ(split->dtype(), DType::kInt64);
    const int64_t* p = split->data<int64_t>();
    EXPECT_TRUE(std::is_sorted(p, p + split->numel()));
    for (int64_t i = 0; i < split->numel(); ++i) {
      ASSERT_TRUE(p[i] >= 0 && p[i] < n);
      ++seen[p[i]];
    }
  }
  // Disjoint and covering: every node in exactly one split.
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
}

TEST(GenerateRmat, DeterministicForASeedAndDifferentAcrossSeeds) {
  RmatOptions o = small_rmat();
  Dataset a = generate_rmat(o), b = generate_rmat(o);
  EXPECT_TRUE(same_dataset(a, b));
  o.seed = 8;
  Dataset c = generate_rmat(o);
  EXPECT_FALSE(same_bytes(a.graph.indices, c.graph.indices));
  EXPECT_FALSE(same_bytes(a.features, c.features));
  EXPECT_FALSE(same_bytes(a.labels, c.labels));
  EXPECT_FALSE(same_bytes(a.train_idx, c.train_idx));
}

TEST(GenerateRmat, IndependentOfThreadCount) {
  RmatOptions o = small_rmat();
  o.undirected = true;
  Dataset one, three;
  {
    Threads t(1);
    one = generate_rmat(o);
  }
  {
    Threads t(3);
    three = generate_rmat(o);
  }
  EXPECT_TRUE(same_dataset(one, three));
}

TEST(GenerateRmat, SkewedInDegreesOnPermutedIds) {
  RmatOptions o = small_rmat();
  o.num_nodes = 1 << 14;
  o.num_edges = 16 << 14;
  Dataset ds = generate_rmat(o);
  validate_csr(ds.graph, "rmat");
  EXPECT_TRUE(ds.meta.directed);
  EXPECT_EQ(ds.meta.num_edges, ds.graph.num_edges());
  EXPECT_LE(ds.graph.num_edges(), o.num_edges);
  EXPECT_GT(ds.graph.num_edges(), o.num_edges / 2);  // repeats are removed, most edges stay
  std::vector<int64_t> deg = in_degrees(ds.graph);
  double mean = static_cast<double>(ds.graph.num_edges()) / o.num_nodes;
  int64_t max_deg = *std::max_element(deg.begin(), deg.end());
  EXPECT_GT(max_deg, 10 * mean) << "mean " << mean;

  // Without the permutation the hubs sit at the lowest ids; with it, they are spread out.
  std::vector<int64_t> order(o.num_nodes);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + 20, order.end(),
                    [&](int64_t x, int64_t y) { return deg[x] > deg[y]; });
  int64_t high = std::count_if(order.begin(), order.begin() + 20,
                               [&](int64_t v) { return v >= o.num_nodes / 2; });
  EXPECT_GE(high, 3);
  o.permute = false;
  Dataset raw = generate_rmat(o);
  std::vector<int64_t> raw_deg = in_degrees(raw.graph);
  EXPECT_EQ(std::max_element(raw_deg.begin(), raw_deg.end()) - raw_deg.begin(), 0);
}

TEST(GenerateRmat, NoSelfLoopsOrRepeatsAndIdsInRange) {
  RmatOptions o = small_rmat();
  o.undirected = true;
  Dataset ds = generate_rmat(o);
  validate_csr(ds.graph, "rmat");
  EXPECT_FALSE(ds.meta.directed);
  std::set<std::pair<int64_t, int64_t>> edges;
  bool self_loop = false;
  for_each_edge(ds.graph, [&](int64_t v, int64_t u) {
    self_loop |= u == v;
    edges.insert({u, v});
  });
  EXPECT_FALSE(self_loop);
  EXPECT_EQ(static_cast<int64_t>(edges.size()), ds.graph.num_edges());
  for (const auto& e : edges) EXPECT_TRUE(edges.count({e.second, e.first})) << "not symmetric";
  ASSERT_TRUE(ds.features.defined());
  EXPECT_EQ(ds.features.shape(), (std::vector<int64_t>{o.num_nodes, 8}));
  const float* x = ds.features.data<float>();
  EXPECT_TRUE(std::all_of(x, x + ds.features.numel(), [](float f) { return f >= -1 && f < 1; }));
  const int64_t* y = ds.labels.data<int64_t>();
  EXPECT_TRUE(std::all_of(y, y + o.num_nodes, [](int64_t c) { return c >= 0 && c < 5; }));
  expect_valid_splits(ds, o.train_frac, o.valid_frac);
}

float half_to_float(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  float v = e == 0 ? std::ldexp(static_cast<float>(m), -24)
                   : std::ldexp(static_cast<float>(m | 0x400), e - 25);
  return (h & 0x8000) ? -v : v;
}

TEST(GenerateRmat, Float16FeaturesRoundFloat32Ones) {
  RmatOptions o = small_rmat();
  Dataset f32 = generate_rmat(o);
  o.feature_dtype = DType::kFloat16;
  Dataset f16 = generate_rmat(o);
  ASSERT_EQ(f16.features.dtype(), DType::kFloat16);
  EXPECT_EQ(f16.meta.feature_dtype, DType::kFloat16);
  const float* a = f32.features.data<float>();
  const uint16_t* b = f16.features.data<uint16_t>();
  for (int64_t i = 0; i < f32.features.numel(); ++i) {
    ASSERT_NEAR(half_to_float(b[i]), a[i], std::max(1e-7f, std::fabs(a[i]) * 4.9e-4f)) << i;
  }
}

TEST(GenerateCommunity, DeterministicAndIndependentOfThreadCount) {
  CommunityOptions o = small_community();
  o.num_nodes = 5000;
  o.num_edges = 40000;
  Dataset one, two, again;
  {
    Threads t(1);
    one = generate_community(o);
  }
  {
    Threads t(2);
    two = generate_community(o);
    again = generate_community(o);
  }
  EXPECT_TRUE(same_dataset(one, two));
  EXPECT_TRUE(same_dataset(two, again));
  o.seed = 12;
  Dataset other = generate_community(o);
  EXPECT_FALSE(same_bytes(one.graph.indices, other.graph.indices));
  EXPECT_FALSE(same_bytes(one.features, other.features));
  EXPECT_FALSE(same_bytes(one.labels, other.labels));
}

TEST(GenerateCommunity, SymmetricHeavyTailedAndMostlyIntraCommunity) {
  CommunityOptions o = small_community();
  std::vector<int32_t> comm;
  Dataset ds = generate_community(o, &comm);
  const Csr& g = ds.graph;
  validate_csr(g, "community");
  ASSERT_EQ(static_cast<int64_t>(comm.size()), o.num_nodes);
  EXPECT_FALSE(ds.meta.directed);
  EXPECT_EQ(ds.meta.num_edges, g.num_edges());
  EXPECT_LE(g.num_edges(), 2 * o.num_edges);
  EXPECT_GT(g.num_edges(), 2 * o.num_edges * 8 / 10);

  std::set<std::pair<int64_t, int64_t>> edges;
  int64_t self_loops = 0, inside = 0;
  for_each_edge(g, [&](int64_t v, int64_t u) {
    self_loops += u == v;
    inside += comm[u] == comm[v];
    edges.insert({u, v});
  });
  EXPECT_EQ(self_loops, 0);
  EXPECT_EQ(static_cast<int64_t>(edges.size()), g.num_edges());
  for (const auto& e : edges) ASSERT_TRUE(edges.count({e.second, e.first})) << "not symmetric";

  double intra = static_cast<double>(inside) / g.num_edges();
  // Repeats are denser inside communities, so dedup lowers the share a little.
  EXPECT_NEAR(intra, o.intra_fraction, 0.04);
  EXPECT_NEAR(ds.meta.extra.at("measured_intra_fraction").get<double>(), intra, 1e-12);

  std::vector<int64_t> deg = in_degrees(g);
  double mean = static_cast<double>(g.num_edges()) / o.num_nodes;
  EXPECT_GT(*std::max_element(deg.begin(), deg.end()), 10 * mean) << "mean " << mean;

  // Communities are scattered over the id space, not contiguous ranges.
  int64_t changes = 0;
  for (int64_t v = 1; v < o.num_nodes; ++v) changes += comm[v] != comm[v - 1];
  EXPECT_GT(changes, o.num_nodes / 2);
  // Every community is used, with about equal sizes.
  std::vector<int64_t> size(o.num_communities, 0);
  for (int32_t c : comm) ++size[c];
  EXPECT_EQ(*std::min_element(size.begin(), size.end()), o.num_nodes / o.num_communities);

  double bound = 1 - o.label_noise * (1 - 1.0 / o.num_classes);
  EXPECT_NEAR(ds.meta.extra.at("accuracy_bound").get<double>(), bound, 1e-12);
  EXPECT_EQ(ds.meta.num_classes, o.num_classes);
  expect_valid_splits(ds, o.train_frac, o.valid_frac);
}

// Accuracy on the test split of a nearest-centroid classifier whose centroids (one per community,
// learned from the training nodes) vote for the community's class.
double nearest_centroid_accuracy(const Dataset& ds, const std::vector<float>& x, int64_t dim,
                                 const std::vector<int32_t>& comm, int64_t k, int64_t classes) {
  std::vector<double> sum(k * dim, 0.0);
  std::vector<int64_t> count(k, 0);
  const int64_t* train = ds.train_idx.data<int64_t>();
  for (int64_t i = 0; i < ds.train_idx.numel(); ++i) {
    int64_t v = train[i];
    for (int64_t j = 0; j < dim; ++j) sum[comm[v] * dim + j] += x[v * dim + j];
    ++count[comm[v]];
  }
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t j = 0; j < dim; ++j) sum[c * dim + j] /= std::max<int64_t>(count[c], 1);
  }
  const int64_t* test = ds.test_idx.data<int64_t>();
  const int64_t* y = ds.labels.data<int64_t>();
  int64_t correct = 0;
  for (int64_t i = 0; i < ds.test_idx.numel(); ++i) {
    int64_t v = test[i], best = 0;
    double best_d = 1e300;
    for (int64_t c = 0; c < k; ++c) {
      double d = 0;
      for (int64_t j = 0; j < dim; ++j) {
        double t = x[v * dim + j] - sum[c * dim + j];
        d += t * t;
      }
      if (d < best_d) best_d = d, best = c;
    }
    correct += best % classes == y[v];
  }
  return static_cast<double>(correct) / ds.test_idx.numel();
}

TEST(GenerateCommunity, NeighbourAggregationBeatsFeaturesAlone) {
  CommunityOptions o = small_community();
  std::vector<int32_t> comm;
  Dataset ds = generate_community(o, &comm);
  const int64_t n = o.num_nodes, dim = o.feature_dim;
  const float* f = ds.features.data<float>();
  std::vector<float> own(f, f + n * dim), agg(n * dim, 0.0f);
  // Mean over the node and its neighbours: one round of GraphSAGE-style aggregation.
  for (int64_t v = 0; v < n; ++v) {
    float* a = agg.data() + v * dim;
    for (int64_t j = 0; j < dim; ++j) a[j] = f[v * dim + j];
    for (int64_t e = ds.graph.rowptr()[v]; e < ds.graph.rowptr()[v + 1]; ++e) {
      int64_t u = ds.graph.indices.int_at(e);
      for (int64_t j = 0; j < dim; ++j) a[j] += f[u * dim + j];
    }
    for (int64_t j = 0; j < dim; ++j) a[j] /= static_cast<float>(ds.graph.degree(v) + 1);
  }
  double alone = nearest_centroid_accuracy(ds, own, dim, comm, o.num_communities, o.num_classes);
  double with_graph =
      nearest_centroid_accuracy(ds, agg, dim, comm, o.num_communities, o.num_classes);
  double bound = ds.meta.extra.at("accuracy_bound").get<double>();
  std::printf("features alone %.3f, with neighbours %.3f, bound %.3f\n", alone, with_graph, bound);
  EXPECT_GT(alone, 0.25);
  EXPECT_LT(alone, 0.7);
  EXPECT_GT(with_graph, 0.75);
  EXPECT_GT(with_graph, alone + 0.2);
  EXPECT_LE(with_graph, bound + 0.02);
}

TEST(Generate, BadParametersThrowInvalidArgument) {
  auto rmat = [](auto edit) {
    RmatOptions o = small_rmat();
    edit(o);
    return generate_rmat(o);
  };
  EXPECT_THROW(rmat([](RmatOptions& o) { o.num_nodes = 0; }), InvalidArgument);
  EXPECT_THROW(rmat([](RmatOptions& o) { o.num_edges = -1; }), InvalidArgument);
  EXPECT_THROW(rmat([](RmatOptions& o) { o.a = 0.7; }), InvalidArgument);  // a + b + c >= 1
  EXPECT_THROW(rmat([](RmatOptions& o) { o.b = -0.1; }), InvalidArgument);
  EXPECT_THROW(rmat([](RmatOptions& o) { o.feature_dim = -1; }), InvalidArgument);
  EXPECT_THROW(rmat([](RmatOptions& o) { o.train_frac = 1.5; }), InvalidArgument);
  EXPECT_THROW(rmat([](RmatOptions& o) { o.valid_frac = -0.1; }), InvalidArgument);
  EXPECT_THROW(rmat([](RmatOptions& o) { o.train_frac = 0.6, o.valid_frac = 0.5; }),
               InvalidArgument);
  EXPECT_THROW(rmat([](RmatOptions& o) { o.feature_dtype = DType::kInt32; }), InvalidArgument);
  EXPECT_THROW(rmat([](RmatOptions& o) { o.test_frac = 1.5; }), InvalidArgument);
  EXPECT_THROW(rmat([](RmatOptions& o) { o.test_frac = 0.9; }), InvalidArgument);  // sum > 1

  auto community = [](auto edit) {
    CommunityOptions o = small_community();
    o.num_nodes = 100;
    o.num_edges = 200;
    o.num_communities = 4;
    edit(o);
    return generate_community(o);
  };
  EXPECT_NO_THROW(community([](CommunityOptions&) {}));
  EXPECT_THROW(community([](CommunityOptions& o) { o.num_nodes = -5; }), InvalidArgument);
  EXPECT_THROW(community([](CommunityOptions& o) { o.num_communities = 0; }), InvalidArgument);
  EXPECT_THROW(community([](CommunityOptions& o) { o.num_communities = 101; }), InvalidArgument);
  EXPECT_THROW(community([](CommunityOptions& o) { o.intra_fraction = 1.1; }), InvalidArgument);
  EXPECT_THROW(community([](CommunityOptions& o) { o.label_noise = -0.5; }), InvalidArgument);
  EXPECT_THROW(community([](CommunityOptions& o) { o.degree_exponent = 1.0; }), InvalidArgument);
  EXPECT_THROW(community([](CommunityOptions& o) { o.feature_noise = -1; }), InvalidArgument);
  EXPECT_THROW(community([](CommunityOptions& o) { o.num_classes = -1; }), InvalidArgument);
  // No classes: a graph without labels (for link prediction).
  EXPECT_NO_THROW(community([](CommunityOptions& o) { o.num_classes = 0; }));
  EXPECT_THROW(community([](CommunityOptions& o) { o.feature_dim = -3; }), InvalidArgument);
}

TEST(Generate, DegenerateSizes) {
  // One node: every edge is a self loop and is dropped; the dataset is still well formed.
  RmatOptions r = small_rmat();
  r.num_nodes = 1;
  Dataset one = generate_rmat(r);
  validate_csr(one.graph, "one node");
  EXPECT_EQ(one.graph.num_edges(), 0);
  CommunityOptions c = small_community();
  c.num_nodes = 10;
  c.num_edges = 0;
  c.num_communities = 1;
  Dataset empty = generate_community(c);
  validate_csr(empty.graph, "no edges");
  EXPECT_EQ(empty.graph.num_edges(), 0);
  EXPECT_EQ(empty.labels.numel(), 10);
}

// ---------------------------------------------------------------- splits

// round(n * count / 111,059,956): ogbn-papers100M's share of `count` nodes, at n nodes.
int64_t papers_share(int64_t n, int64_t count) {
  return std::llround(static_cast<double>(n) * static_cast<double>(count) / 111059956.0);
}

TEST(GenerateSplits, Papers100mPresetHasOgbShares) {
  RmatOptions o;
  o.num_nodes = 1000000;
  o.num_edges = 100000;
  o.feature_dim = 0;
  o.num_classes = 4;
  const SplitFractions f = split_preset(SplitPreset::kPapers100m);
  o.train_frac = f.train;
  o.valid_frac = f.valid;
  o.test_frac = f.test;
  Dataset ds = generate_rmat(o);
  // 10870 / 1128 / 1930 of 1M: 1.4% of the nodes in a split, as in ogbn-papers100M.
  expect_split_sizes(ds, papers_share(o.num_nodes, 1207179), papers_share(o.num_nodes, 125265),
                     papers_share(o.num_nodes, 214338));
  EXPECT_EQ(ds.train_idx.numel() + ds.valid_idx.numel() + ds.test_idx.numel(), 13928);
  EXPECT_EQ(ds.meta.extra.at("test_frac").get<double>(), 214338 / 111059956.0);
}

TEST(GenerateSplits, AllPresetIsTheDefault) {
  const SplitFractions all = split_preset(SplitPreset::kAll), defaults;
  EXPECT_EQ(all.train, 0.1);
  EXPECT_EQ(all.valid, 0.05);
  EXPECT_FALSE(all.test.has_value());
  EXPECT_EQ(RmatOptions().train_frac, defaults.train);
  EXPECT_EQ(CommunityOptions().valid_frac, defaults.valid);
  EXPECT_EQ(test::error_of([] { parse_choice<SplitPreset>("papers"); }),
            "unknown split preset 'papers' (all, papers100m)");
}

TEST(GenerateSplits, TestFracLeavesTheOtherNodesInNoSplit) {
  CommunityOptions o = small_community();
  o.test_frac = 0.2;
  Dataset ds = generate_community(o);
  expect_split_sizes(ds, 2000, 1000, 4000);  // 20,000 nodes: 13,000 in no split
  EXPECT_EQ(ds.meta.extra.at("test_frac").get<double>(), 0.2);
  // Train and valid are those of the default: the test split is cut from the same permutation.
  Dataset all = generate_community(small_community());
  EXPECT_TRUE(same_bytes(ds.train_idx, all.train_idx));
  EXPECT_TRUE(same_bytes(ds.valid_idx, all.valid_idx));
  EXPECT_TRUE(same_bytes(ds.labels, all.labels));
  EXPECT_FALSE(all.meta.extra.contains("test_frac"));  // dataset.json as before the option
  // Everything given to a split: the sizes still round each share.
  o.train_frac = 0.5, o.valid_frac = 0.25, o.test_frac = 0.25;
  expect_split_sizes(generate_community(o), 10000, 5000, 5000);
}

TEST(GenerateSplits, FractionsOutOfRangeRefusedWithOneLine) {
  auto message = [](double train, double valid, std::optional<double> test) {
    RmatOptions o = small_rmat();
    o.train_frac = train;
    o.valid_frac = valid;
    o.test_frac = test;
    return test::error_of<InvalidArgument>([&] { generate_rmat(o); });
  };
  EXPECT_EQ(message(0.1, 0.05, 0.9), "train + valid + test fractions (0.1 + 0.05 + 0.9) exceed 1");
  EXPECT_EQ(message(0.1, 0.05, 1.5), "test fraction 1.5 is outside [0, 1]");
  EXPECT_EQ(message(0.1, 0.05, -0.1), "test fraction -0.1 is outside [0, 1]");
  EXPECT_EQ(message(0.6, 0.5, std::nullopt), "train + valid fractions (0.6 + 0.5) exceed 1");
  EXPECT_EQ(message(0.5, 0.25, 0.25), "no error");
}

TEST(GenerateSplits, PresetWithAFractionRefusedNamingBoth) {
  // The keywords (Python's, a --config file's) go through the table and the check the CLI uses.
  for (const char* key : {"train_frac", "valid_frac", "test_frac"}) {
    SCOPED_TRACE(key);
    RmatCommand cmd;
    read_options(rmat_options(), {{"splits", "papers100m"}, {key, 0.2}}, cmd, "test");
    cmd.run.out = "/nonexistent/never-written";
    std::string flag = std::string("--") + key;
    flag.replace(flag.find('_'), 1, "-");
    EXPECT_EQ(test::error_of<InvalidArgument>([&] { run_generate(cmd); }),
              "give --splits or " + flag + ", not both");
  }
  CommunityCommand cmd;
  read_options(community_options(), {{"splits", "all"}, {"train_frac", 0.1}}, cmd, "test");
  EXPECT_EQ(test::error_of<InvalidArgument>([&] { cmd.validate(); }),
            "give --splits or --train-frac, not both");
  // Fractions alone apply over the generator's; null is "not given".
  CommunityCommand f;
  read_options(community_options(), {{"test_frac", 0.3}, {"train_frac", nullptr}}, f, "test");
  f.validate();
  EXPECT_EQ(f.o.train_frac, 0.1);
  EXPECT_EQ(f.o.test_frac, 0.3);
  EXPECT_TRUE(write_options(community_options(), CommunityCommand()).at("test_frac").is_null());
}

}  // namespace
}  // namespace dsp
