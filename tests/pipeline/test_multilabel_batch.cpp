// Multi-label labels through the loader: load_batch fills the seeds' label rows (label_matrix,
// label_columns; labels empty), the roles' wire format carries them, and a heterogeneous batch
// refuses them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "graph/array.hpp"
#include "graph/generate.hpp"
#include "layout/partition/partition.hpp"
#include "pipeline/load_batch.hpp"
#include "pipeline/roles.hpp"

namespace dsp {
namespace {

// Node v's row: (v + j) % 3 == 0 for label j; node 4 unlabeled.
Array label_rows(int64_t n, int64_t L) {
  std::vector<int8_t> y(static_cast<size_t>(n * L));
  for (int64_t v = 0; v < n; ++v) {
    for (int64_t j = 0; j < L; ++j) y[v * L + j] = v == 4 ? -1 : (v + j) % 3 == 0;
  }
  return Array::from_vector(std::move(y), {n, L});
}

SampledBatch batch_of(std::vector<int64_t> seeds) {
  SampledBatch sb;
  sb.seeds = seeds;
  Block b;
  b.num_dst = b.num_src = static_cast<int64_t>(seeds.size());
  b.src_ids = seeds;
  b.indptr.assign(seeds.size() + 1, 0);
  sb.blocks.push_back(b);
  return sb;
}

TEST(MultiLabelBatch, LoadBatchFillsTheSeedsRows) {
  const Array y = label_rows(10, 5);
  const std::vector<int64_t> seeds = {7, 4, 0, 9};
  LoadedBatch lb = load_batch(batch_of(seeds), nullptr, y);
  EXPECT_TRUE(lb.multilabel());
  EXPECT_EQ(lb.label_columns, 5);
  EXPECT_TRUE(lb.labels.empty());
  ASSERT_EQ(lb.label_matrix.size(), seeds.size() * 5);
  for (size_t i = 0; i < seeds.size(); ++i) {
    for (int64_t j = 0; j < 5; ++j) {
      EXPECT_EQ(lb.label_matrix[i * 5 + j], y.data<int8_t>()[seeds[i] * 5 + j]) << i << "," << j;
    }
  }
  // Single-label labels stay as they were: labels filled, no matrix.
  const Array single = Array::from_vector(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  LoadedBatch s = load_batch(batch_of(seeds), nullptr, single);
  EXPECT_FALSE(s.multilabel());
  EXPECT_EQ(s.labels, seeds);
  EXPECT_TRUE(s.label_matrix.empty());
}

TEST(MultiLabelBatch, WireFormatCarriesTheRows) {
  LoadedBatch lb = load_batch(batch_of({3, 4, 5}), nullptr, label_rows(10, 4));
  const std::vector<uint8_t> bytes = pack_batch(lb);
  LoadedBatch r = unpack_batch(bytes.data(), bytes.size());
  EXPECT_EQ(r.label_columns, 4);
  EXPECT_EQ(r.label_matrix, lb.label_matrix);
  EXPECT_TRUE(r.labels.empty());
}

TEST(MultiLabelBatch, HeterogeneousBatchRefusesMultiLabel) {
  HeteroLayout layout;
  try {
    load_hetero_batch(batch_of({1}), layout, {}, label_rows(10, 3));
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()),
              "multi-label labels (int8 [N, 3]) are not supported for heterogeneous graphs: their "
              "target type has one class per node");
  }
}

// The roles' whole-graph view (every part's rows in one) keeps the multi-label kind and rows.
TEST(MultiLabelBatch, WholeGraphViewKeepsTheLabelRows) {
  CommunityOptions o;
  o.num_nodes = 300;
  o.num_edges = 1500;
  o.num_communities = 4;
  o.feature_dim = 2;
  o.multilabel = o.num_classes = 3;
  const Dataset ds = generate_community(o);
  const std::string dir =
      (std::filesystem::temp_directory_path() / fmt::format("dsp_ml_whole_{}", ::getpid()))
          .string();
  std::filesystem::remove_all(dir);
  PartitionOptions po;
  po.parts = 2;
  po.method = PartitionMethod::kRandom;
  po.verbose = false;
  partition_dataset(ds, po, dir);
  const PartitionData w = load_whole_partition(dir);
  EXPECT_TRUE(w.meta.multilabel);
  EXPECT_EQ(w.labels.describe(), "int8[300, 3]");
  const std::vector<int64_t> seeds = {0, 150, 299};
  LoadedBatch lb = load_batch(batch_of(seeds), nullptr, w.labels);
  EXPECT_EQ(lb.label_columns, 3);
  EXPECT_EQ(lb.label_matrix.size(), 9u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dsp
