// Partitioning a link-prediction dataset: each part's training edges (sources owned), the shared
// held-out pairs renumbered, METIS balancing training edges, and the loader's checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "error_of.hpp"
#include "graph/generate.hpp"
#include "graph/npy.hpp"
#include "layout/layout_fixtures.hpp"
#include "layout/partition/partition.hpp"

namespace dsp {
namespace {
using Pair = std::pair<int64_t, int64_t>;
using test::error_of;
using testing::temp_dir;

const Dataset& link_community() {
  static Dataset ds = [] {
    CommunityOptions o;
    o.num_nodes = 3000;
    o.num_edges = 20000;
    o.num_communities = 12;
    o.feature_dim = 8;
    o.num_classes = 0;
    o.seed = 5;
    o.link_split = LinkSplitOptions{0.8, 0.1, 0.1, 50, 0};
    return generate_community(o);
  }();
  return ds;
}

std::vector<Pair> rows_of(const Array& a) {
  std::vector<Pair> out;
  const int64_t* p = a.data<int64_t>();
  for (int64_t r = 0; r < a.dim(0); ++r) out.emplace_back(p[2 * r], p[2 * r + 1]);
  return out;
}

class LinkPartition : public ::testing::TestWithParam<std::string> {};

TEST_P(LinkPartition, PartsOwnTheirTrainingEdgesAndSharedPairsAreRenumbered) {
  const Dataset& ds = link_community();
  const std::string dir = temp_dir("link_" + GetParam());
  PartitionOptions o;
  o.parts = 3;
  o.method = parse_choice<PartitionMethod>(GetParam());
  o.verbose = false;
  const PartitionMeta m = partition_dataset(ds, o, dir);
  const Array new2old = load_npy(dir + "/new2old.npy", false);
  const int64_t* n2o = new2old.data<int64_t>();
  std::multiset<Pair> all;
  int64_t total = 0;
  for (int p = 0; p < o.parts; ++p) {
    const PartitionData d = load_partition(dir, p, o.parts);
    ASSERT_TRUE(d.link_train.defined());
    EXPECT_EQ(d.link_train.dim(0), m.part[p].link_train);
    const std::vector<Pair> rows = rows_of(d.link_train);
    EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));
    for (const Pair& e : rows) {
      EXPECT_EQ(m.owner(e.first), p);
      all.insert({n2o[e.first], n2o[e.second]});
    }
    total += d.link_train.dim(0);
    if (m.hops > 0) {  // a self-reliant part's sampling view keeps its training edges
      EXPECT_EQ(rows_of(replicated_view(d).link_train), rows);
    }
    // Shared held-out pairs: mapped back through new2old, the dataset's rows in its order.
    const std::pair<const Array*, const Array*> shared[] = {
        {&d.link_valid, &ds.link_valid}, {&d.link_test, &ds.link_test},
        {&d.link_valid_neg, &ds.link_valid_neg}, {&d.link_test_neg, &ds.link_test_neg}};
    for (const auto& [got, want] : shared) {
      ASSERT_TRUE(got->defined());
      std::vector<Pair> back;
      for (const Pair& e : rows_of(*got)) back.emplace_back(n2o[e.first], n2o[e.second]);
      EXPECT_EQ(back, rows_of(*want));
    }
  }
  const std::vector<Pair> train = rows_of(ds.link_train);
  EXPECT_EQ(total, static_cast<int64_t>(train.size()));
  EXPECT_EQ(all, std::multiset<Pair>(train.begin(), train.end()));
  if (GetParam() == "metis") {  // training edges balanced as METIS's seed constraint
    for (int p = 0; p < o.parts; ++p) {
      EXPECT_LE(m.part[p].link_train, 1.1 * static_cast<double>(total) / o.parts) << p;
    }
  }
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Layout, LinkPartition, ::testing::Values("metis", "random", "pagraph"));

TEST(LinkPartitionLoad, RefusesATrainingEdgeOfAnotherPart) {
  const Dataset& ds = link_community();
  const std::string dir = temp_dir("link_bad");
  PartitionOptions o;
  o.parts = 2;
  o.method = PartitionMethod::kRandom;
  o.verbose = false;
  const PartitionMeta m = partition_dataset(ds, o, dir);
  const std::string f = dir + "/part0/link_train.npy";
  Array a = load_npy(f, false);
  const int64_t foreign = m.offsets[1];
  a.mutable_data<int64_t>()[0] = foreign;
  save_npy(f, a);
  const int64_t dst = a.data<int64_t>()[1];
  EXPECT_EQ(error_of<FormatError>([&] { load_partition(dir, 0, 2); }),
            fmt::format("{}: row 0 ({}, {}) is outside [0, {}) x [0, {})", f, foreign, dst,
                        m.offsets[1], ds.meta.num_nodes));
  std::filesystem::remove_all(dir);
}

TEST(LinkPartitionLoad, ChecksumCoversTheLinkPairs) {
  Dataset ds = link_community();
  const uint64_t before = dataset_checksum(ds);
  std::vector<int64_t> v(ds.link_test.data<int64_t>(),
                         ds.link_test.data<int64_t>() + ds.link_test.numel());
  std::swap(v[0], v[1]);  // row 0 reversed (src < dst: a change)
  ds.link_test = Array::from_vector(std::move(v), {ds.link_test.dim(0), 2});
  EXPECT_NE(dataset_checksum(ds), before);
}

}  // namespace
}  // namespace dsp
