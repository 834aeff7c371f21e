// Heterogeneous partitions: types contiguous per part (owner and type lookups are range checks),
// per-type balance, every relation row and feature row renumbered exactly, the per-type views a
// feature store serves, and one clear error for a corrupted part or an unsupported method.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "core/error.hpp"
#include "error_of.hpp"
#include "graph/hetero_fixture.hpp"
#include "graph/npy.hpp"
#include "layout/partition/partition.hpp"

namespace dsp {
namespace {

namespace fs = std::filesystem;
using test::error_of;

std::string temp_dir(const std::string& name) {
  return (fs::temp_directory_path() / fmt::format("dsp_hetero_{}_{}", name, ::getpid())).string();
}

std::string partition_fixture(const HeteroDataset& ds, int parts, const std::string& method) {
  const std::string dir = temp_dir(method + std::to_string(parts));
  PartitionOptions o;
  o.parts = parts;
  o.method = parse_choice<PartitionMethod>(method);
  o.verbose = false;
  o.overwrite = true;
  partition_dataset(hetero_union(ds), o, dir);
  return dir;
}

// Dataset (type, local id) of new id v.
std::pair<int, int64_t> old_of(const HeteroSchema& s, const Array& new2old, int64_t v) {
  const std::vector<int64_t> toff = s.type_offsets();
  const int64_t u = new2old.data<int64_t>()[v];
  const int t = static_cast<int>(std::upper_bound(toff.begin(), toff.end(), u) - toff.begin()) - 1;
  return {t, u - toff[t]};
}

TEST(HeteroPartition, RowsFeaturesAndLabelsAreTheDatasetsRenumbered) {
  const HeteroDataset ds = testref::hetero_fixture();
  for (const std::string method : {"metis", "random"}) {
    for (int parts : {1, 3}) {
      SCOPED_TRACE(method + " " + std::to_string(parts));
      const std::string dir = partition_fixture(ds, parts, method);
      const Array new2old = load_npy(dir + "/new2old.npy");
      const Array old2new = load_npy(dir + "/old2new.npy");
      const Array labels = load_npy(dir + "/labels.npy");
      std::vector<int64_t> seen(ds.schema.num_types(), 0);
      for (int p = 0; p < parts; ++p) {
        PartitionData d = load_partition(dir, p, parts);
        const HeteroLayout& h = *d.meta.hetero;
        const int64_t R = h.num_relations(), base = d.meta.offsets[p];
        for (int64_t i = 0; i < d.patch.num_nodes; ++i) {
          const int64_t v = base + i;
          const auto [t, local] = old_of(ds.schema, new2old, v);
          ASSERT_EQ(h.type_of(v), t) << v;  // types contiguous per part, in type order
          ASSERT_EQ(h.type_node(t, h.type_index(v)), v);
          ++seen[t];
          // each relation's segment: the dataset's row, renumbered and ascending
          for (int64_t r = 0; r < R; ++r) {
            const RelationInfo& ri = ds.schema.relations[r];
            std::vector<int64_t> want;
            if (ri.dst_type == t) {
              const Csr& g = ds.relations[r];
              const int64_t soff = ds.schema.type_offsets()[ri.src_type];
              for (int64_t e = g.rowptr()[local]; e < g.rowptr()[local + 1]; ++e) {
                want.push_back(old2new.data<int64_t>()[soff + g.indices.int_at(e)]);
              }
              std::sort(want.begin(), want.end());
            }
            const int64_t* rp = d.relation_indptr.data<int64_t>();
            std::vector<int64_t> got;
            for (int64_t e = rp[i * R + r]; e < rp[i * R + r + 1]; ++e) {
              got.push_back(d.patch.indices.int_at(e));
            }
            ASSERT_EQ(got, want) << "node " << v << " relation " << ri.key();
          }
          // features: row type_index(v) of features_<type>.npy is the dataset's row
          if (ds.features[t].defined()) {
            const int64_t f = ds.schema.node_types[t].feature_dim;
            const float* a = d.type_features[t].data<float>() + h.type_index(v) * f;
            const float* b = ds.features[t].data<float>() + local * f;
            ASSERT_TRUE(std::equal(a, a + f, b)) << v;
          } else {
            EXPECT_FALSE(d.type_features[t].defined());
          }
          const int64_t y = t == ds.schema.target ? ds.labels.int_at(local) : -1;
          ASSERT_EQ(labels.data<int64_t>()[v], y) << v;
        }
      }
      for (int t = 0; t < ds.schema.num_types(); ++t) {
        EXPECT_EQ(seen[t], ds.schema.node_types[t].count);
      }
      fs::remove_all(dir);
    }
  }
}

TEST(HeteroPartition, MetisBalancesEveryNodeType) {
  const HeteroDataset ds = testref::hetero_fixture(1200, 600, 40);
  const int parts = 4;
  const std::string dir = partition_fixture(ds, parts, "metis");
  const PartitionMeta m = load_partition_meta(dir);
  const HeteroLayout& h = *m.hetero;
  for (int t = 0; t < h.num_types(); ++t) {
    const double mean = static_cast<double>(ds.schema.node_types[t].count) / parts;
    for (int p = 0; p < parts; ++p) {
      const int64_t n = h.bounds[p * h.num_types() + t + 1] - h.bounds[p * h.num_types() + t];
      EXPECT_LE(n, 1.1 * mean + 1) << ds.schema.node_types[t].name << " part " << p;
    }
  }
  fs::remove_all(dir);
}

TEST(HeteroPartition, TypeViewServesATypesOwnIds) {
  const HeteroDataset ds = testref::hetero_fixture();
  const std::string dir = partition_fixture(ds, 2, "metis");
  for (int p = 0; p < 2; ++p) {
    PartitionData d = load_partition(dir, p, 2);
    const HeteroLayout& h = *d.meta.hetero;
    PartitionData v = hetero_type_view(d, 0);
    EXPECT_EQ(v.meta.num_nodes, ds.schema.node_types[0].count);
    EXPECT_EQ(v.meta.offsets.back(), v.meta.num_nodes);
    EXPECT_EQ(v.meta.feature_dim, 4);
    // the part's own papers are exactly its range of type ids
    const int64_t b = h.bounds[p * h.num_types()], e = h.bounds[p * h.num_types() + 1];
    EXPECT_EQ(v.meta.offsets[p + 1] - v.meta.offsets[p], e - b);
    if (e > b) EXPECT_EQ(h.type_index(b), v.meta.offsets[p]);
    for (int64_t i = 0; i < v.cached.dim(0); ++i) {
      const int64_t id = v.cached.data<int64_t>()[i];
      EXPECT_TRUE(id >= v.meta.offsets[p] && id < v.meta.offsets[p + 1]) << id;
    }
    EXPECT_FALSE(hetero_type_view(d, 1).features.defined());  // authors: no features
  }
  fs::remove_all(dir);
}

TEST(HeteroPartition, BadInputGetsOneClearError) {
  const HeteroDataset ds = testref::hetero_fixture();
  PartitionOptions o;
  o.method = PartitionMethod::kPagraph;
  o.verbose = false;
  EXPECT_EQ(error_of([&] { partition_dataset(hetero_union(ds), o, temp_dir("pg")); }),
            "--method pagraph: the replicated halo rows do not keep relations apart, and "
            "hetero-fixture is a heterogeneous graph; partition it with --method metis, random or "
            "bfs-blocks");
  // a relation segment that names a node of the wrong type
  const std::string dir = partition_fixture(ds, 1, "random");
  Array rp = load_npy(dir + "/part0/relation_indptr.npy");
  std::vector<int64_t> v(rp.data<int64_t>(), rp.data<int64_t>() + rp.dim(0));
  const int64_t R = ds.schema.num_relations();
  // move the first non-empty boundary between two relations of a row by one entry
  int64_t row = -1, r = -1;
  for (int64_t i = 0; i < static_cast<int64_t>(v.size() - 1) / R && row < 0; ++i) {
    for (int64_t k = 0; k + 1 < R; ++k) {
      if (v[i * R + k] < v[i * R + k + 1] && v[i * R + k + 1] < v[(i + 1) * R]) {
        row = i;
        r = k;
        break;
      }
    }
  }
  ASSERT_GE(row, 0);
  v[row * R + r + 1] += 1;
  save_npy(dir + "/part0/relation_indptr.npy", Array::from_vector(v));
  const std::string msg = error_of([&] { load_partition(dir, 0, 1); });
  EXPECT_NE(msg.find(dir + "/part0/relation_indptr.npy: row " + std::to_string(row)),
            std::string::npos)
      << msg;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dsp
