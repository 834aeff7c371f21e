// PaGraph's pre-aggregation (dsp partition --preaggregate): every row of preaggregated_<kind>.npy
// is [x_v | a_v] with a_v the neighbour mean (or GCN's normalised sum) of the source dataset,
// recomputed here from the dataset's rows, at 1 and 2 parts.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/error.hpp"
#include "graph/npy.hpp"
#include "layout/layout_fixtures.hpp"
#include "layout/partition/partition.hpp"
#include "layout/partition/partition_command.hpp"

namespace dsp {
namespace {

using testing::cora;
using testing::temp_dir;

// a_v of node v (old ids), in double over the row in order, rounded once: the documented formula.
std::vector<float> reference_aggregate(const Dataset& ds, const std::vector<int64_t>& out_deg,
                                       int64_t v, bool gcn) {
  const Csr& g = ds.graph;
  const int64_t f = ds.meta.feature_dim;
  const float* x = ds.features.data<float>();
  std::vector<double> acc(f, 0.0);
  const int64_t deg = g.degree(v);
  auto add = [&](int64_t u, double w) {
    for (int64_t j = 0; j < f; ++j) acc[j] += w * x[u * f + j];
  };
  for (int64_t e = g.rowptr()[v]; e < g.rowptr()[v + 1]; ++e) {
    const int64_t u = g.indices.int_at(e);
    add(u, gcn ? 1.0 / std::sqrt(double(out_deg[u] + 1) * double(deg + 1)) : 1.0);
  }
  if (gcn) add(v, 1.0 / std::sqrt(double(out_deg[v] + 1) * double(deg + 1)));
  std::vector<float> out(f);
  for (int64_t j = 0; j < f; ++j) {
    out[j] = static_cast<float>(gcn || deg == 0 ? acc[j] : acc[j] / double(deg));
  }
  return out;
}

TEST(Preaggregate, RowsEqualTheNeighbourAggregateAt1And2Parts) {
  const Dataset& ds = cora();
  const int64_t n = ds.meta.num_nodes, f = ds.meta.feature_dim;
  std::vector<int64_t> out_deg(n, 0);
  for (int64_t e = 0; e < ds.graph.num_edges(); ++e) ++out_deg[ds.graph.indices.int_at(e)];
  for (int parts : {1, 2}) {
    const std::string dir = temp_dir(fmt::format("pp{}", parts));
    PartitionOptions o;
    o.parts = parts;
    o.verbose = false;
    o.preaggregate = {Preaggregation::kMean, Preaggregation::kGcn};
    PartitionMeta m = partition_dataset(ds, o, dir);
    EXPECT_EQ(m.preaggregated, o.preaggregate);
    Array n2o = load_npy(dir + "/new2old.npy", DType::kInt64, 1);
    for (const Preaggregation kind : o.preaggregate) {
      PartitionData part = load_partition(dir, parts - 1, parts);
      Array rows = load_preaggregated(part, kind);
      ASSERT_EQ(rows.dim(0), n);
      ASSERT_EQ(rows.dim(1), 2 * f);
      const float* r = rows.data<float>();
      const float* x = ds.features.data<float>();
      int64_t bad = 0;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t v = n2o.data<int64_t>()[i];
        const std::vector<float> a =
            reference_aggregate(ds, out_deg, v, kind == Preaggregation::kGcn);
        for (int64_t j = 0; j < f; ++j) {
          bad += r[i * 2 * f + j] != x[v * f + j];
          bad += r[i * 2 * f + f + j] != a[j];
        }
      }
      EXPECT_EQ(bad, 0) << name_of(kind) << " at " << parts << " parts";
    }
    std::filesystem::remove_all(dir);
  }
}

TEST(Preaggregate, MissingKindAndBadKindAreNamed) {
  const Dataset& ds = cora();
  const std::string dir = temp_dir("pp_none");
  PartitionOptions o;
  o.parts = 1;
  o.verbose = false;
  try {
    PartitionCommand cmd;
    options::find(partition_options(), "preaggregate_kinds").parse(cmd, "mean,max");
    FAIL() << "an unknown kind was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "unknown pre-aggregation kind 'max' (mean, gcn)");
  }
  o.preaggregate = {Preaggregation::kMean};
  partition_dataset(ds, o, dir);
  PartitionData part = load_partition(dir, 0, 1);
  try {
    load_preaggregated(part, Preaggregation::kGcn);
    FAIL() << "a missing kind was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()),
              dir +
                  ": the partition has no pre-aggregated 'gcn' rows (it has: mean); write them "
                  "with dsp partition --preaggregate");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dsp
