// dsp partition of a dataset with edge and node times: part<p>/edge_time.npy aligned with the
// renumbered, sorted rows as edge_weight.npy is, node_time.npy renumbered like labels.npy, the
// damaged files named on load, and the pagraph halo (which does not carry times) refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <utility>

#include "core/error.hpp"
#include "error_of.hpp"
#include "graph/generate.hpp"
#include "graph/npy.hpp"
#include "layout/layout_fixtures.hpp"
#include "layout/partition/partition.hpp"

namespace dsp {
namespace {
namespace fs = std::filesystem;
using test::error_of;
using testing::temp_dir;

const Dataset& timed() {
  static Dataset ds = [] {
    CommunityOptions o;
    o.num_nodes = 1500;
    o.num_edges = 12000;
    o.num_communities = 16;
    o.num_classes = 4;
    o.feature_dim = 4;
    o.temporal = true;
    o.seed = 3;
    Dataset d = generate_community(o);
    // Weights too, so that the two arrays are carried side by side through the same sort.
    std::vector<float> w(static_cast<size_t>(d.graph.num_edges()));
    for (size_t e = 0; e < w.size(); ++e) w[e] = static_cast<float>(e % 7) + 0.5f;
    d.graph.weights = Array::from_vector(std::move(w));
    d.meta.has_weights = true;
    return d;
  }();
  return ds;
}

// (old src, old dst) -> (time, weight) of every entry of the source graph.
std::map<std::pair<int64_t, int64_t>, std::pair<int64_t, float>> entries(const Csr& g) {
  std::map<std::pair<int64_t, int64_t>, std::pair<int64_t, float>> m;
  for (int64_t v = 0; v < g.num_nodes; ++v) {
    for (int64_t e = g.rowptr()[v]; e < g.rowptr()[v + 1]; ++e) {
      m[{g.indices.int_at(e), v}] = {g.times.data<int64_t>()[e], g.weights.data<float>()[e]};
    }
  }
  return m;
}

class TemporalPartition : public ::testing::TestWithParam<std::string> {};

TEST_P(TemporalPartition, CarriesEdgeAndNodeTimes) {
  const Dataset& ds = timed();
  ASSERT_TRUE(ds.graph.has_times());
  ASSERT_TRUE(ds.node_time.defined());
  const std::string dir = temp_dir("temporal_part_" + GetParam());
  PartitionOptions o;
  o.parts = 3;
  o.method = parse_choice<PartitionMethod>(GetParam());
  o.verbose = false;
  o.write_chunk_bytes = 4096;  // many chunks per part
  partition_dataset(ds, o, dir);
  const PartitionMeta m = load_partition_meta(dir);
  EXPECT_TRUE(m.has_edge_time);
  EXPECT_TRUE(m.has_node_time);
  const auto want = entries(ds.graph);
  Array n2o = load_npy(dir + "/new2old.npy", DType::kInt64, 1);
  const int64_t* new2old = n2o.data<int64_t>();
  int64_t seen = 0;
  for (int p = 0; p < 3; ++p) {
    PartitionData d = load_partition(dir, p, 3);
    ASSERT_TRUE(d.patch.has_times());
    ASSERT_EQ(d.patch.times.dim(0), d.patch.num_edges());
    const int64_t* t = d.patch.times.data<int64_t>();
    const float* w = d.patch.weights.data<float>();
    for (int64_t r = 0; r < d.patch.num_nodes; ++r) {
      const int64_t v = new2old[m.offsets[p] + r];
      for (int64_t e = d.patch.rowptr()[r]; e < d.patch.rowptr()[r + 1]; ++e) {
        const auto it = want.find({new2old[d.patch.indices.int_at(e)], v});
        ASSERT_NE(it, want.end());
        ASSERT_EQ(t[e], it->second.first) << "part " << p << " entry " << e;
        ASSERT_EQ(w[e], it->second.second) << "part " << p << " entry " << e;
        ++seen;
      }
    }
    ASSERT_TRUE(d.node_time.defined());
    for (int64_t i = 0; i < m.num_nodes; ++i) {
      ASSERT_EQ(d.node_time.data<int64_t>()[i], ds.node_time.data<int64_t>()[new2old[i]]);
    }
  }
  EXPECT_EQ(seen, ds.graph.num_edges());
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Methods, TemporalPartition,
                         ::testing::Values("random", "metis", "bfs-blocks"));

TEST(TemporalPartitionErrors, DamagedTimesAreNamedAndPagraphIsRefused) {
  const Dataset& ds = timed();
  const std::string dir = temp_dir("temporal_part_damaged");
  PartitionOptions o;
  o.parts = 2;
  o.method = PartitionMethod::kRandom;
  o.verbose = false;
  partition_dataset(ds, o, dir);
  const std::string et = dir + "/part1/edge_time.npy";
  Array good = load_npy(et, false);
  save_npy(et, Array(DType::kFloat32, {good.dim(0)}));
  EXPECT_EQ(error_of([&] { load_partition(dir, 1, 2); }),
            fmt::format("{}: expected int64[{}] (one time per entry of indices.npy), got "
                        "float32[{}]",
                        et, good.dim(0), good.dim(0)));
  fs::remove(et);
  EXPECT_NE(error_of([&] { load_partition(dir, 1, 2); }).find("part1/edge_time.npy"),
            std::string::npos);
  save_npy(et, good);
  EXPECT_NO_THROW(load_partition(dir, 1, 2));
  const std::string nt = dir + "/node_time.npy";
  save_npy(nt, Array(DType::kInt64, {ds.meta.num_nodes - 1}));
  EXPECT_EQ(error_of([&] { load_partition(dir, 0, 2); }),
            fmt::format("{}: expected int64[{}] (one time per node), got int64[{}]", nt,
                        ds.meta.num_nodes, ds.meta.num_nodes - 1));
  fs::remove_all(dir);

  o.method = PartitionMethod::kPagraph;
  EXPECT_EQ(error_of([&] { partition_dataset(ds, o, dir); }),
            "--method pagraph: the replicated halo rows do not carry edge times, and community "
            "has edge_time.npy; partition it with --method metis, random or bfs-blocks");
}

}  // namespace
}  // namespace dsp
