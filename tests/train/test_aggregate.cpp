// The fused aggregation ops against the index_select + index_add_ formulation they replace
// (reference::*), values and gradients, on random blocks with empty rows, zero-degree destinations,
// sources without out-edges and repeated edges; then every model, forward and parameter gradients,
// both ways. Tolerance: float32 results agree to rtol 1e-5 + atol 1e-5 (the two differ only in
// rounding: x * (1/deg) against x / deg, rsqrt(a) * rsqrt(b) against rsqrt(a * b), and the order
// of the terms of a sum).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <random>
#include <vector>

#include "core/error.hpp"
#include "train/aggregate.hpp"
#include "train/aggregate_kernels.hpp"
#include "train/model.hpp"

namespace dsp {
namespace {

constexpr double kRtol = 1e-5, kAtol = 1e-5;

::testing::AssertionResult close(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.sizes() != b.sizes()) {
    return ::testing::AssertionFailure() << "shapes differ: " << a.sizes() << " vs " << b.sizes();
  }
  if (a.numel() == 0 || torch::allclose(a, b, kRtol, kAtol)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "max abs difference " << (a - b).abs().max().item<float>();
}

// num_dst destinations among num_src sources; degrees in [0, max_deg] with every third row empty,
// sources drawn from [0, num_src / 2) so the upper half never has out-edges, repeats allowed.
Block random_block(int64_t num_dst, int64_t num_src, int max_deg, uint32_t seed) {
  std::mt19937 rng(seed);
  Block b;
  b.num_dst = num_dst;
  b.num_src = num_src;
  b.indptr = {0};
  const int64_t src_range = std::max<int64_t>(1, num_src / 2);
  for (int64_t v = 0; v < num_dst; ++v) {
    const int deg = v % 3 == 2 ? 0 : static_cast<int>(rng() % (max_deg + 1));
    for (int k = 0; k < deg; ++k) b.indices.push_back(static_cast<int64_t>(rng() % src_range));
    b.indptr.push_back(static_cast<int64_t>(b.indices.size()));
  }
  b.src_ids.resize(num_src);
  for (int64_t i = 0; i < num_src; ++i) b.src_ids[i] = 1000 + i;
  return b;
}

std::vector<Block> test_blocks() {
  std::vector<Block> out;
  out.push_back(random_block(40, 100, 12, 1));
  out.push_back(random_block(7, 7, 3, 2));  // num_dst == num_src
  out.push_back(random_block(5, 9, 0, 3));  // no edges at all
  out.push_back(random_block(0, 4, 5, 4));  // no destinations
  return out;
}

torch::Tensor randn(std::vector<int64_t> shape, uint64_t seed, bool grad = true) {
  torch::manual_seed(seed);
  return torch::randn(shape).set_requires_grad(grad);
}

// Gradients of sum(out * weights) with respect to the inputs.
std::vector<torch::Tensor> grads(const torch::Tensor& out, std::vector<torch::Tensor> inputs) {
  auto w = torch::randn(out.sizes(), torch::TensorOptions().dtype(torch::kFloat32));
  return torch::autograd::grad({(out * w).sum()}, inputs, {}, false, false, true);
}

// Runs f with the fused ops and with the reference, under the same generator seed for the weights
// of the gradient, and compares the output and the gradient of every input.
template <class F>
void compare(const F& f, std::vector<torch::Tensor> inputs, const std::string& what) {
  torch::manual_seed(99);
  auto fused = f();
  auto g_fused = grads(fused, inputs);
  torch::Tensor ref;
  std::vector<torch::Tensor> g_ref;
  {
    ScopedReferenceAggregation use_ref;
    torch::manual_seed(99);
    ref = f();
    g_ref = grads(ref, inputs);
  }
  EXPECT_TRUE(close(fused, ref)) << what << ": values";
  for (size_t i = 0; i < inputs.size(); ++i) {
    ASSERT_EQ(g_fused[i].defined(), g_ref[i].defined()) << what << ": gradient " << i;
    if (g_ref[i].defined()) {
      EXPECT_TRUE(close(g_fused[i], g_ref[i])) << what << ": gradient " << i;
    }
  }
}

TEST(Aggregate, SumMeanGcnAndConcatSelfMatchTheReferenceWithGradients) {
  const std::vector<std::pair<Aggregation, const char*>> kinds = {
      {Aggregation::kSum, "sum"}, {Aggregation::kMean, "mean"}, {Aggregation::kGcn, "gcn"}};
  uint64_t seed = 0;
  for (const Block& blk : test_blocks()) {
    // 1 and 7 exercise the masked tail of a chunk only, 64 full chunks only, 100 both.
    for (int64_t d : {1, 7, 64, 100}) {
      for (const auto& [kind, name] : kinds) {
        BlockTensors b = block_to_tensors(blk);
        auto x = randn({blk.num_src, d}, ++seed);
        const std::string what =
            fmt::format("{} d={} block {}x{}", name, d, blk.num_dst, blk.num_src);
        compare([&] { return aggregate(b, x, kind); }, {x}, what);
        compare([&] { return aggregate_concat_self(b, x, kind); }, {x}, what + " concat self");
      }
    }
  }
}

// With edge weights (LABOR's importance weights): the fused ops equal the reference's
// weighted messages, gradients included; one weighted row checked by hand; GAT refuses them.
TEST(Aggregate, EdgeWeightsWeighSumMeanAndGcnMessages) {
  const std::vector<std::pair<Aggregation, const char*>> kinds = {
      {Aggregation::kSum, "sum"}, {Aggregation::kMean, "mean"}, {Aggregation::kGcn, "gcn"}};
  uint64_t seed = 50;
  for (Block blk : test_blocks()) {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    for (size_t e = 0; e < blk.indices.size(); ++e) blk.weights.push_back(0.25f + rng() % 8);
    for (int64_t d : {1, 64, 100}) {
      for (const auto& [kind, name] : kinds) {
        BlockTensors b = block_to_tensors(blk);
        auto x = randn({blk.num_src, d}, ++seed);
        const std::string what =
            fmt::format("weighted {} d={} block {}x{}", name, d, blk.num_dst, blk.num_src);
        compare([&] { return aggregate(b, x, kind); }, {x}, what);
        compare([&] { return aggregate_concat_self(b, x, kind); }, {x}, what + " concat self");
      }
    }
  }
  Block one;
  one.num_dst = 1;
  one.num_src = 3;
  one.indptr = {0, 2};
  one.indices = {1, 2};
  one.weights = {0.5f, 3.0f};
  one.src_ids = {0, 1, 2};
  BlockTensors b = block_to_tensors(one);
  auto x = torch::tensor({1.0f, 2.0f, 4.0f}).view({3, 1});
  EXPECT_FLOAT_EQ(aggregate(b, x, Aggregation::kMean).item<float>(), (0.5f * 2 + 3.0f * 4) / 2);
  EXPECT_FLOAT_EQ(aggregate(b, x, Aggregation::kSum).item<float>(), 0.5f * 2 + 3.0f * 4);
  auto el = torch::zeros({3, 1}), er = torch::zeros({1, 1});
  try {
    edge_softmax(b, el, er, 0.2);
    ADD_FAILURE() << "gat accepted edge weights";
  } catch (const NotSupported& e) {
    EXPECT_STREQ(e.what(),
                 "gat: blocks with edge weights (LABOR importance sampling, --labor-importance "
                 "!= 0) are not supported; use sage or gcn, or --labor-importance 0");
  }
}

TEST(Aggregate, MeanOfAnEmptyRowIsZeroAndGcnKeepsTheSelfLoop) {
  Block blk;
  blk.num_dst = 2;
  blk.num_src = 3;
  blk.indptr = {0, 2, 2};  // dst 1 has no in-edges
  blk.indices = {1, 2};
  blk.src_ids = {0, 1, 2};
  BlockTensors b = block_to_tensors(blk);
  auto x = torch::tensor({1.f, 2.f, 4.f}).view({3, 1});
  EXPECT_TRUE(
      torch::equal(aggregate(b, x, Aggregation::kMean), torch::tensor({3.f, 0.f}).view({2, 1})));
  EXPECT_TRUE(
      torch::equal(aggregate(b, x, Aggregation::kSum), torch::tensor({6.f, 0.f}).view({2, 1})));
  // dst 1: only its self loop; deg_in 1, deg_out of src 1 = 2 (edge to dst 0 + its loop).
  auto gcn = aggregate(b, x, Aggregation::kGcn);
  EXPECT_FLOAT_EQ(gcn[1][0].item<float>(), 2.f / std::sqrt(2.f));
}

TEST(Aggregate, GatEdgeSoftmaxAndWeightedSumMatchTheReference) {
  uint64_t seed = 100;
  for (const Block& blk : test_blocks()) {
    for (int64_t heads : {1, 3}) {
      for (int64_t d : {5, 32}) {
        BlockTensors b = block_to_tensors(blk);
        const std::string what =
            fmt::format("gat H={} d={} block {}x{}", heads, d, blk.num_dst, blk.num_src);
        auto el = randn({blk.num_src, heads}, ++seed);
        auto er = randn({blk.num_dst, heads}, ++seed);
        compare([&] { return edge_softmax(b, el, er, 0.2); }, {el, er}, what + " softmax");
        auto z = randn({blk.num_src, heads, d}, ++seed);
        auto att = randn({blk.num_edges() + blk.num_dst, heads}, ++seed);
        compare([&] { return aggregate_edges(b, z, att); }, {z, att}, what + " aggregate");
        // The two chained, as the layer runs them.
        compare([&] { return aggregate_edges(b, z, edge_softmax(b, el, er, 0.2)); }, {z, el, er},
                what + " chained");
      }
    }
  }
}

TEST(Aggregate, SoftmaxRowsSumToOne) {
  Block blk = random_block(30, 60, 9, 7);
  BlockTensors b = block_to_tensors(blk);
  auto att = edge_softmax(b, randn({60, 2}, 1, false) * 30, randn({30, 2}, 2, false) * 30, 0.2);
  // Row sums through the weighted aggregation of a constant 1.
  auto sums = aggregate_edges(b, torch::ones({60, 2, 1}), att);
  EXPECT_TRUE(torch::allclose(sums, torch::ones({30, 2, 1}), 1e-6, 1e-6));
}

TEST(Aggregate, TransposeIsBuiltOncePerBlockAndOnlyForGradients) {
  Block blk = random_block(20, 50, 6, 3);
  BlockTensors b = block_to_tensors(blk);
  auto x = randn({50, 8}, 5);
  {
    torch::NoGradGuard ng;
    aggregate(b, x, Aggregation::kMean);
  }
  aggregate(b, x.detach(), Aggregation::kMean);
  EXPECT_FALSE(b.cache->t_indptr.defined()) << "no gradient, no transpose";
  auto y = aggregate(b, x, Aggregation::kMean);
  ASSERT_TRUE(b.cache->t_indptr.defined());
  const void* built = b.cache->t_dst.data_ptr();
  // GCN needs the source degrees and the same transpose; GAT's ops too: none rebuilds it.
  auto z = aggregate(b, x, Aggregation::kGcn);
  auto el = randn({50, 1}, 6), er = randn({20, 1}, 7);
  auto att = edge_softmax(b, el, er, 0.2);
  auto w = aggregate_edges(b, x.view({50, 1, 8}), att);
  (y.sum() + z.sum() + w.sum()).backward();
  EXPECT_EQ(b.cache->t_dst.data_ptr(), built);
  // Row u of the transpose lists the destinations of u's out-edges, ascending, with edge ids.
  auto tp = b.cache->t_indptr, td = b.cache->t_dst, te = b.cache->t_eids;
  for (int64_t u = 0; u < 50; ++u) {
    for (int64_t k = tp[u].item<int64_t>(); k < tp[u + 1].item<int64_t>(); ++k) {
      const int64_t e = te[k].item<int64_t>(), v = td[k].item<int64_t>();
      EXPECT_EQ(blk.indices[e], u);
      EXPECT_TRUE(blk.indptr[v] <= e && e < blk.indptr[v + 1]);
      if (k > tp[u].item<int64_t>()) {
        EXPECT_LE(td[k - 1].item<int64_t>(), v);
      }
    }
  }
  EXPECT_EQ(tp[50].item<int64_t>(), blk.num_edges());
}

// The device formulation of the transpose (sort, searched row starts, told sizes: nothing waits
// for a GPU) builds exactly the host's counting sort, on every test block.
TEST(Aggregate, DeviceTransposeEqualsTheCountingSort) {
  auto x_of = [](int64_t n) { return randn({n, 3}, 9); };
  for (const Block& blk : test_blocks()) {
    BlockTensors host = block_to_tensors(blk);
    auto x = x_of(blk.num_src);
    aggregate(host, x, Aggregation::kSum).sum().backward();  // builds the host transpose
    BlockTensors dev = block_to_tensors(blk);
    transpose_on_device(dev, *dev.cache);
    const BlockCache &h = *host.cache, &d = *dev.cache;
    ASSERT_TRUE(h.t_indptr.defined());
    EXPECT_TRUE(torch::equal(h.t_indptr, d.t_indptr)) << blk.num_dst << "x" << blk.num_src;
    EXPECT_TRUE(torch::equal(h.t_dst, d.t_dst));
    EXPECT_TRUE(torch::equal(h.t_eids, d.t_eids));
  }
}

TEST(Aggregate, RejectsBadInputs) {
  Block blk = random_block(4, 6, 2, 1);
  BlockTensors b = block_to_tensors(blk);
  try {
    aggregate(b, torch::zeros({5, 3}), Aggregation::kSum);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(),
                 "aggregate: input: expected a float32 tensor of 2 dimensions with 6 rows, got "
                 "Float [5, 3]");
  }
  EXPECT_THROW(aggregate(b, torch::zeros({6, 3}, torch::kFloat64), Aggregation::kSum),
               InvalidArgument);
  EXPECT_THROW(edge_softmax(b, torch::zeros({6, 2}), torch::zeros({4, 3}), 0.2), InvalidArgument);
  EXPECT_THROW(aggregate_edges(b, torch::zeros({6, 2, 3}), torch::zeros({5, 2})), InvalidArgument);
}

// The CUDA kernels run spmm_row with 32 lanes and 4 floats per lane; emulate that warp on the host
// (the lanes of spmm do not talk to each other) to check the lane indexing and the masked tail.
TEST(AggregateKernels, SpmmWithLanesMatchesOneLane) {
  Block blk = random_block(25, 60, 7, 11);
  const int64_t heads = 2;
  for (int64_t d : {3, 64, 129, 300}) {
    auto x = torch::randn({blk.num_src, heads, d});
    auto w = torch::rand({blk.num_edges() + blk.num_dst, heads});
    auto scale = torch::rand({blk.num_src});
    agg::SpmmArgs a;
    a.g.indptr = blk.indptr.data();
    a.g.cols = blk.indices.data();
    a.g.self_rows = blk.num_dst;
    a.g.self_eid_base = blk.num_edges();
    a.x = x.data_ptr<float>();
    a.edge_w = w.data_ptr<float>();
    a.row_scale = scale.data_ptr<float>();
    a.col_scale = scale.data_ptr<float>();
    a.heads = heads;
    a.dim = d;
    auto one = torch::full({blk.num_dst, heads, d}, -1.f);
    auto warp = torch::full({blk.num_dst, heads, d}, -1.f);
    for (int64_t r = 0; r < blk.num_dst; ++r) {
      a.out = one.data_ptr<float>();
      agg::spmm_row<1, 32>(a, r, 0);
      a.out = warp.data_ptr<float>();
      for (int lane = 0; lane < 32; ++lane) agg::spmm_row<32, 4>(a, r, lane);
    }
    EXPECT_TRUE(close(one, warp)) << "d=" << d;
    EXPECT_FALSE((one == -1.f).any().item<bool>()) << "every element written, d=" << d;
  }
}

// ---- whole models ------------------------------------------------------------------------------

struct ModelCase {
  const char* model;
  int heads, out_heads;
};

TEST(Aggregate, EveryModelMatchesTheReferenceWithParameterGradients) {
  const ModelCase cases[] = {{"sage", 1, 1}, {"gcn", 1, 1}, {"gat", 1, 1}, {"gat", 3, 2}};
  // Three layers of random blocks chained (each block's destinations are the next's sources);
  // widths chosen so SAGE and GCN run both orders (aggregate then project, and the reverse).
  const std::vector<Block> raw = {random_block(30, 80, 10, 21), random_block(12, 30, 6, 22),
                                  random_block(5, 12, 4, 23)};
  for (const ModelCase& mc : cases) {
    for (int64_t in_dim : {6, 40}) {
      ModelConfig c;
      c.model = parse_choice<ModelKind>(mc.model);
      c.in_dim = in_dim;
      c.hidden = 16;
      c.out_dim = 4;
      c.layers = 3;
      c.dropout = 0;
      c.heads = mc.heads;
      c.out_heads = mc.out_heads;
      torch::manual_seed(3);
      auto m = make_model(c);
      auto x = randn({80, in_dim}, 4);
      const std::string what =
          fmt::format("{} heads {}/{} in {}", mc.model, mc.heads, mc.out_heads, in_dim);
      std::vector<torch::Tensor> params;
      for (const auto& p : m->parameters()) params.push_back(p);
      params.push_back(x);
      compare([&] { return m->forward(blocks_to_tensors(raw), x); }, params, what);
    }
  }
}

}  // namespace
}  // namespace dsp
