// PaGraph's self-reliant parts: a rank's sampler over its replicated view, alone (self
// communicator), draws exactly the blocks the sampler draws over the whole graph.
#include <gtest/gtest.h>

#include <filesystem>

#include "ccc/communicator.hpp"
#include "csp/presample.hpp"
#include "csp/sampler.hpp"
#include "csp/schemes.hpp"
#include "graph/generate.hpp"
#include "layout/partition/partition.hpp"

namespace dsp {
namespace {

namespace fs = std::filesystem;

// The whole renumbered graph: every part's rows, in global id order.
Csr whole_graph(const std::string& dir, int parts) {
  std::vector<int64_t> ptr{0}, idx;
  std::vector<float> w;
  for (int p = 0; p < parts; ++p) {
    PartitionData d = load_partition(dir, p, parts);
    for (int64_t r = 0; r < d.patch.num_nodes; ++r) {
      for (int64_t e = d.patch.rowptr()[r]; e < d.patch.rowptr()[r + 1]; ++e) {
        idx.push_back(d.patch.indices.int_at(e));
        if (d.patch.has_weights()) w.push_back(d.patch.weights.data<float>()[e]);
      }
      ptr.push_back(static_cast<int64_t>(idx.size()));
    }
  }
  Csr g;
  g.num_nodes = static_cast<int64_t>(ptr.size()) - 1;
  g.indptr = Array::from_vector(std::move(ptr));
  g.indices = Array::from_vector(std::move(idx));
  if (!w.empty()) g.weights = Array::from_vector(std::move(w));
  return g;
}

void expect_same_blocks(const SampledBatch& a, const SampledBatch& b) {
  ASSERT_EQ(a.blocks.size(), b.blocks.size());
  for (size_t l = 0; l < a.blocks.size(); ++l) {
    EXPECT_EQ(a.blocks[l].src_ids, b.blocks[l].src_ids) << "layer " << l;
    EXPECT_EQ(a.blocks[l].indptr, b.blocks[l].indptr) << "layer " << l;
    EXPECT_EQ(a.blocks[l].indices, b.blocks[l].indices) << "layer " << l;
    EXPECT_EQ(a.blocks[l].weights, b.blocks[l].weights) << "layer " << l;
  }
}

class Replicated : public ::testing::TestWithParam<std::tuple<bool, std::string>> {};

TEST_P(Replicated, LocalSamplingDrawsTheWholeGraphsBlocks) {
  auto [undirected, scheme] = GetParam();
  RmatOptions ro;
  ro.num_nodes = 3000;
  ro.num_edges = 30000;
  ro.undirected = undirected;
  ro.num_classes = 3;
  ro.feature_dim = 0;
  ro.seed = 8;
  Dataset ds = generate_rmat(ro);
  const int parts = 3;
  std::string dir = (fs::temp_directory_path() /
                     fmt::format("dsp_replicated_{}_{}_{}", undirected, scheme, ::getpid()))
                        .string();
  PartitionOptions po;
  po.parts = parts;
  po.method = PartitionMethod::kPagraph;
  po.pagraph.hops = 3;
  po.verbose = false;
  partition_dataset(ds, po, dir);

  PartitionData whole = single_part(whole_graph(dir, parts));
  auto self = make_communicator("self");
  SamplerOptions so;
  so.scheme = scheme_of(parse_choice<SamplerKind>(scheme));
  // Layer-wise fanouts are draws per layer (over the whole frontier), node-wise per node.
  so.fanouts = so.layer() ? std::vector<int>{300, 300, 300} : std::vector<int>{4, 3, 2};
  so.seed = 21;
  CollectiveSampler ref(whole, *self, so);
  int64_t batches = 0;
  for (int p = 0; p < parts; ++p) {
    PartitionData d = load_partition(dir, p, parts);
    PartitionData view = replicated_view(d);
    auto own = make_communicator("self");
    CollectiveSampler local(view, *own, so);
    std::vector<int64_t> seeds(d.seeds.data<int64_t>(), d.seeds.data<int64_t>() + d.seeds.dim(0));
    seeds = shuffle_ids(seeds, 3, p);
    for (int64_t b = 0; b * 64 < static_cast<int64_t>(seeds.size()) && b < 4; ++b) {
      std::vector<int64_t> batch = presample_batch(seeds, 64, b);
      SampledBatch x = local.sample(batch, 0, b);
      SampledBatch y = ref.sample(batch, 0, b);
      expect_same_blocks(x, y);
      ++batches;
    }
    EXPECT_EQ(local.stats().bytes_sent, 0u);
    // Fewer layers than the replicated hops are covered too.
    SamplerOptions two = so;
    two.fanouts = {5, 5};
    CollectiveSampler l2(view, *own, two), r2(whole, *self, two);
    std::vector<int64_t> batch = presample_batch(seeds, 64, 0);
    expect_same_blocks(l2.sample(batch, 1, 0), r2.sample(batch, 1, 0));
  }
  EXPECT_GE(batches, 6);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Pagraph, Replicated,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Values("neighbor", "layer")),
                         [](const auto& info) {
                           return fmt::format("{}_{}",
                                              std::get<0>(info.param) ? "undirected" : "directed",
                                              std::get<1>(info.param));
                         });

}  // namespace
}  // namespace dsp
