// Multi-label labels (int8 [N, L]) through dsp partition: every method renumbers them as rows of
// width L, and load_partition maps them as such.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "graph/generate.hpp"
#include "graph/npy.hpp"
#include "layout/layout_fixtures.hpp"
#include "layout/partition/partition.hpp"

namespace dsp {
namespace {

using testing::temp_dir;

const Dataset& multilabel_graph() {
  static Dataset ds = [] {
    CommunityOptions o;
    o.num_nodes = 900;
    o.num_edges = 6000;
    o.num_communities = 9;
    o.feature_dim = 4;
    o.multilabel = o.num_classes = 7;
    o.seed = 3;
    Dataset d = generate_community(o);
    // Two unlabeled rows, so that -1 rows travel too.
    int8_t* y = const_cast<int8_t*>(d.labels.data<int8_t>());
    std::memset(y + 5 * 7, -1, 7);
    std::memset(y + 600 * 7, -1, 7);
    return d;
  }();
  return ds;
}

// Row v of the partition's labels is the dataset's row of the node renumbered to v, on every part.
void expect_renumbered_rows(const Dataset& ds, const std::string& dir, int parts) {
  const int64_t n = ds.meta.num_nodes, L = ds.meta.num_classes;
  const Array n2o = load_npy(dir + "/new2old.npy", DType::kInt64, 1);
  for (int p = 0; p < parts; ++p) {
    const PartitionData part = load_partition(dir, p, parts);
    EXPECT_TRUE(part.meta.multilabel);
    EXPECT_EQ(part.meta.num_classes, L);
    ASSERT_EQ(part.labels.describe(), fmt::format("int8[{}, {}]", n, L));
    const int8_t* got = part.labels.data<int8_t>();
    const int8_t* src = ds.labels.data<int8_t>();
    for (int64_t v = 0; v < n; ++v) {
      ASSERT_EQ(std::memcmp(got + v * L, src + n2o.data<int64_t>()[v] * L, L), 0)
          << "row " << v << " of part " << p;
    }
  }
}

TEST(MultiLabelPartition, EveryMethodRenumbersRowsAtOneAndThreeParts) {
  const Dataset& ds = multilabel_graph();
  for (const char* method : {"metis", "random", "bfs-blocks", "pagraph"}) {
    for (int parts : {1, 3}) {
      SCOPED_TRACE(fmt::format("{} at {} parts", method, parts));
      const std::string dir = temp_dir(fmt::format("ml_{}_{}", method, parts));
      PartitionOptions o;
      o.parts = parts;
      o.method = parse_choice<PartitionMethod>(method);
      o.verbose = false;
      const PartitionMeta m = partition_dataset(ds, o, dir);
      EXPECT_TRUE(m.multilabel);
      expect_renumbered_rows(ds, dir, parts);
      std::filesystem::remove_all(dir);
    }
  }
}

TEST(MultiLabelPartition, LabelsOfTheOtherKindAreRefused) {
  const Dataset& ds = multilabel_graph();
  const std::string dir = temp_dir("ml_refused");
  PartitionOptions o;
  o.parts = 2;
  o.method = PartitionMethod::kRandom;
  o.verbose = false;
  partition_dataset(ds, o, dir);
  save_npy(dir + "/labels.npy", Array(DType::kInt64, {900}));
  try {
    load_partition(dir, 0, 2);
    ADD_FAILURE() << "no error";
  } catch (const FormatError& e) {
    EXPECT_EQ(std::string(e.what()),
              dir +
                  "/labels.npy: partition.json says multilabel = true with 7 labels: expected "
                  "int8[900, 7] (a row of 0/1 per node), got int64[900]");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dsp
