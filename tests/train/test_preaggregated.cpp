// PaGraph's pre-aggregated first layer (ModelConfig::preaggregated) against the sampled model
// with a full-neighbourhood input block: the same logits on the same nodes.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "graph/npy.hpp"
#include "layout/partition/partition.hpp"
#include "train/model.hpp"

namespace dsp {
namespace {

// A directed graph (in-degrees differ from out-degrees, so GCN's two degree scales matter), with a
// node without in-neighbours.
Csr directed_graph(int64_t n) {
  std::vector<int64_t> indptr{0}, indices;
  for (int64_t v = 0; v < n; ++v) {
    for (int64_t u = 0; u < n && v != 3; ++u) {
      if (u != v && RngStream(11, v * n + u).uniform_int(3) == 0) indices.push_back(u);
    }
    indptr.push_back(static_cast<int64_t>(indices.size()));
  }
  Csr g;
  g.num_nodes = n;
  g.indptr = Array::from_vector(std::move(indptr));
  g.indices = Array::from_vector(std::move(indices));
  return g;
}

TEST(Preaggregated, FirstLayerEqualsTheFullNeighbourhoodLayer) {
  const int64_t n = 14, f = 6, seeds = 5;
  Csr g = directed_graph(n);
  torch::manual_seed(3);
  torch::Tensor x = torch::randn({n, f});
  Array xa = Array::from_vector(
      std::vector<float>(x.data_ptr<float>(), x.data_ptr<float>() + n * f), {n, f});
  std::vector<int64_t> ids(n);
  for (int64_t v = 0; v < n; ++v) ids[v] = v;
  // The full-neighbourhood blocks: every node is a destination of the input block (so GCN's
  // in-block degrees are the graph's), then `seeds` of them are the batch.
  Block in, out;
  in.num_dst = in.num_src = out.num_src = n;
  const int64_t* p = g.rowptr();
  in.indptr.assign(p, p + n + 1);
  for (int64_t e = 0; e < g.num_edges(); ++e) in.indices.push_back(g.indices.int_at(e));
  in.src_ids = out.src_ids = ids;
  out.num_dst = seeds;
  out.indptr.assign(p, p + seeds + 1);
  out.indices.assign(in.indices.begin(), in.indices.begin() + p[seeds]);
  const std::vector<Block> raw = {in, out};
  const std::vector<BlockTensors> blocks = blocks_to_tensors(raw);
  const std::string dir =
      (std::filesystem::temp_directory_path() / fmt::format("dsp_pp_{}", ::getpid())).string();
  std::filesystem::create_directories(dir);
  for (const char* model : {"sage", "gcn"}) {
    ModelConfig c;
    c.model = parse_choice<ModelKind>(model);
    c.in_dim = f;
    c.hidden = 4;
    c.out_dim = 3;
    c.layers = 2;
    c.dropout = 0;
    auto full = make_model(c);
    c.preaggregated = true;
    auto pp = make_model(c);
    {
      torch::NoGradGuard ng;
      auto src = full->named_parameters();
      for (auto& q : pp->named_parameters()) q.value().copy_(src[q.key()]);
    }
    full->eval();
    pp->eval();
    const std::string path = dir + "/" + model + ".npy";
    write_preaggregated(g, xa, ids, *c.preaggregation(), path);
    Array rows = load_npy(path, DType::kFloat32, 2);
    ASSERT_EQ(rows.dim(1), 2 * f);
    auto xpp =
        torch::from_blob(const_cast<float*>(rows.data<float>()), {n, 2 * f}, torch::kFloat32);
    auto want = full->forward(blocks, x);
    auto got = pp->forward({blocks[1]}, xpp);
    EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-6))
        << model << ": max difference " << (got - want).abs().max().item<float>();
    // The input is checked: a sampled-width input or a block too many is refused.
    EXPECT_THROW(pp->forward({blocks[1]}, x), InvalidArgument) << model;
    EXPECT_THROW(pp->forward(blocks, xpp), InvalidArgument) << model;
  }
  std::filesystem::remove_all(dir);
}

TEST(Preaggregated, OtherModelsAndOneLayerAreRefused) {
  ModelConfig c;
  c.model = ModelKind::kGat;
  c.in_dim = 4;
  c.out_dim = 2;
  c.preaggregated = true;
  try {
    c.validate();
    FAIL() << "gat accepted a pre-aggregated input";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("--preaggregate works with sage and gcn"),
              std::string::npos)
        << e.what();
  }
  c.model = ModelKind::kSage;
  c.layers = 1;
  EXPECT_THROW(c.validate(), InvalidArgument);
  using P = std::optional<Preaggregation>;
  for (auto [model, kind] :
       {std::pair{ModelKind::kSage, P(Preaggregation::kMean)},
        std::pair{ModelKind::kGcn, P(Preaggregation::kGcn)}, std::pair{ModelKind::kGat, P()}}) {
    c.model = model;
    EXPECT_EQ(c.preaggregation(), kind);
  }
}

}  // namespace
}  // namespace dsp
