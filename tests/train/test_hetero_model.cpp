// The heterogeneous models (rgcn, hsage) on a tiny hand-built graph against a dense reference of
// plain torch ops over the whole graph, their gradients, the trainer's path with learnable rows
// for the featureless type, and the errors of bad input.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <tuple>

#include "ccc/communicator.hpp"
#include "core/error.hpp"
#include "error_of.hpp"
#include "layout/store/embedding_table.hpp"
#include "train/model.hpp"
#include "train/step_embedding.hpp"
#include "train/trainer.hpp"

namespace dsp {
namespace {
using test::error_of;

// Union ids: papers 0..3 (type 0, 3 features), authors 4..6 (type 1, no features), a field 7
// (type 2, 2 features). Relations: 0 author -writes-> paper, 1 paper -cites-> paper,
// 2 paper -rev_writes-> author, 3 field -has_topic-> paper. No relation enters the field type.
struct TinyGraph {
  int64_t n = 8;
  std::vector<int32_t> type = {0, 0, 0, 0, 1, 1, 1, 2};
  std::vector<int> rel_src = {1, 0, 0, 2}, rel_dst = {0, 0, 1, 0};
  // (src, dst, relation)
  std::vector<std::tuple<int64_t, int64_t, int>> edges = {
      {4, 0, 0}, {4, 1, 0}, {5, 1, 0}, {6, 2, 0}, {1, 0, 1}, {2, 0, 1}, {3, 1, 1},
      {0, 3, 1}, {0, 4, 2}, {1, 4, 2}, {1, 5, 2}, {2, 6, 2}, {7, 0, 3}, {7, 2, 3}};
};

const TinyGraph& graph() {
  static const TinyGraph g;
  return g;
}

// A block over every in-neighbour of `dst`, in the sampler's layout (csp/block.hpp): a
// destination's edges relation by relation, each ascending by id; sources first-seen.
Block full_block(const std::vector<int64_t>& dst) {
  const TinyGraph& g = graph();
  Block b;
  b.num_dst = static_cast<int64_t>(dst.size());
  b.src_ids = dst;
  std::map<int64_t, int64_t> local;
  for (size_t i = 0; i < dst.size(); ++i) local[dst[i]] = static_cast<int64_t>(i);
  b.indptr = {0};
  for (int64_t v : dst) {
    for (int r = 0; r < 4; ++r) {
      std::vector<int64_t> us;
      for (const auto& [u, w, rr] : g.edges) {
        if (w == v && rr == r) us.push_back(u);
      }
      std::sort(us.begin(), us.end());
      for (int64_t u : us) {
        if (!local.count(u)) {
          local[u] = static_cast<int64_t>(b.src_ids.size());
          b.src_ids.push_back(u);
        }
        b.indices.push_back(local[u]);
        b.edge_types.push_back(r);
      }
    }
    b.indptr.push_back(static_cast<int64_t>(b.indices.size()));
  }
  b.num_src = static_cast<int64_t>(b.src_ids.size());
  for (int64_t u : b.src_ids) b.src_types.push_back(g.type[u]);
  return b;
}

// `layers` blocks from the seeds out, blocks[0] the input layer's.
std::vector<Block> full_blocks(const std::vector<int64_t>& seeds, int layers) {
  std::vector<Block> out;
  std::vector<int64_t> dst = seeds;
  for (int l = 0; l < layers; ++l) {
    out.insert(out.begin(), full_block(dst));
    dst = out.front().src_ids;
  }
  return out;
}

ModelConfig hetero_config(const std::string& model, int layers) {
  ModelConfig c;
  c.model = parse_choice<ModelKind>(model);
  c.hidden = 4;
  c.out_dim = 3;
  c.layers = layers;
  c.dropout = 0;
  c.type_dims = {3, 0, 2};
  c.embedding_dim = 4;  // the authors' learnable rows: hidden wide
  c.relation_src = graph().rel_src;
  c.relation_dst = graph().rel_dst;
  return c;
}

struct TinyInputs {
  torch::Tensor paper = torch::randn({4, 3}), field = torch::randn({1, 2});
  torch::Tensor author = torch::randn({3, 4}).requires_grad_(true);  // the embedding rows
};

// The model's input for `blocks`: rows of each type among blocks[0]'s sources.
HeteroInput model_input(const std::vector<Block>& blocks, const TinyInputs& d,
                        const ModelConfig& cfg) {
  HeteroInput in;
  for (const Block& b : blocks) in.blocks.push_back(hetero_block_tensors(b, cfg));
  const TinyGraph& g = graph();
  const int64_t first[3] = {0, 4, 7};
  const torch::Tensor* x[3] = {&d.paper, &d.author, &d.field};
  for (int t = 0; t < 3; ++t) {
    std::vector<int64_t> pos, row;
    const std::vector<int64_t>& src = blocks.front().src_ids;
    for (size_t j = 0; j < src.size(); ++j) {
      if (g.type[src[j]] != t) continue;
      pos.push_back(static_cast<int64_t>(j));
      row.push_back(src[j] - first[t]);
    }
    in.rows.push_back(torch::tensor(pos, torch::kInt64));
    in.x.push_back(x[t]->index_select(0, torch::tensor(row, torch::kInt64)));
  }
  return in;
}

// The model with random biases too (they start at zero), so the reference checks them.
std::shared_ptr<GnnModel> make_random_model(const ModelConfig& cfg) {
  auto m = make_model(cfg);
  torch::NoGradGuard ng;
  for (auto& kv : m->named_parameters()) kv.value().normal_();
  return m;
}

torch::Tensor param(GnnModel& m, const std::string& name) {
  auto p = m.named_parameters();
  EXPECT_TRUE(p.contains(name)) << name;
  return p[name];
}

// The dense reference: every node of the graph, per relation a row-normalised adjacency.
torch::Tensor dense_reference(GnnModel& m, const ModelConfig& cfg, const TinyInputs& d,
                              const std::vector<int64_t>& seeds) {
  const TinyGraph& g = graph();
  std::vector<torch::Tensor> adj(4);
  for (int r = 0; r < 4; ++r) {
    adj[r] = torch::zeros({g.n, g.n});
    for (const auto& [u, v, rr] : g.edges) {
      if (rr == r) adj[r][v][u] = 1.0f;
    }
    adj[r] = adj[r] / adj[r].sum(1, true).clamp_min(1);
  }
  auto mask = [&](int t) {
    auto k = torch::zeros({g.n, 1});
    for (int64_t v = 0; v < g.n; ++v) k[v][0] = g.type[v] == t ? 1.0f : 0.0f;
    return k;
  };
  auto lin = [&](const std::string& p, const torch::Tensor& x, bool bias) {
    auto y = torch::matmul(x, param(m, p + ".weight").t());
    return bias ? y + param(m, p + ".bias") : y;
  };
  torch::Tensor h =
      torch::cat({lin("input0", d.paper, true), d.author, lin("input2", d.field, true)});
  for (int l = 0; l < cfg.layers; ++l) {
    const std::string L = "layer" + std::to_string(l);
    torch::Tensor out;
    if (cfg.model == ModelKind::kRgcn) {
      out = lin(L + ".self", h, true);
      for (int r = 0; r < 4; ++r) {
        out = out + lin(L + ".rel" + std::to_string(r), torch::matmul(adj[r], h), false);
      }
    } else {
      const int64_t w = l + 1 == cfg.layers ? cfg.out_dim : cfg.hidden;
      out = torch::zeros({g.n, w});
      for (int r = 0; r < 4; ++r) {
        const std::string R = L + ".rel" + std::to_string(r);
        auto conv = lin(R + ".self", h, true) + lin(R + ".neigh", torch::matmul(adj[r], h), false);
        out = out + mask(g.rel_dst[r]) * conv;
      }
    }
    h = l + 1 == cfg.layers ? out : torch::relu(out);
  }
  return h.index_select(0, torch::tensor(seeds, torch::kInt64));
}

class HeteroModels : public ::testing::TestWithParam<std::string> {};

TEST_P(HeteroModels, EqualTheDenseReferenceOnTheWholeGraph) {
  torch::manual_seed(7);
  for (int layers : {1, 2, 3}) {
    const ModelConfig cfg = hetero_config(GetParam(), layers);
    auto m = make_random_model(cfg);
    m->eval();
    TinyInputs d;
    const std::vector<int64_t> seeds = {0, 2, 3};  // paper 3 has one relation in, no author
    const std::vector<Block> blocks = full_blocks(seeds, layers);
    auto y = m->forward_hetero(model_input(blocks, d, cfg));
    auto ref = dense_reference(*m, cfg, d, seeds);
    ASSERT_EQ(y.sizes(), ref.sizes());
    EXPECT_TRUE(torch::allclose(y, ref, 1e-5, 1e-5)) << layers << " layers\n" << y << ref;
  }
}

TEST_P(HeteroModels, GradientsEqualTheReferenceAndReachEveryRelation) {
  torch::manual_seed(11);
  const ModelConfig cfg = hetero_config(GetParam(), 2);
  auto m = make_random_model(cfg);
  TinyInputs d;
  const std::vector<int64_t> seeds = {0, 1, 2, 3};
  const std::vector<Block> blocks = full_blocks(seeds, 2);
  const auto w = torch::randn({4, 3});
  auto grads = [&](const torch::Tensor& out) {
    // Set to none, not zeroed in place: autograd may hand the same gradient tensor to several
    // parameters (hsage's summed relation biases), which would then accumulate it again.
    m->zero_grad(/*set_to_none=*/true);
    d.author.mutable_grad() = torch::Tensor();
    (out * w).sum().backward();
    std::map<std::string, torch::Tensor> g;
    for (const auto& kv : m->named_parameters()) {
      g[kv.key()] =
          kv.value().grad().defined() ? kv.value().grad().clone() : torch::zeros_like(kv.value());
    }
    g["author"] = d.author.grad().clone();
    return g;
  };
  const auto mine = grads(m->forward_hetero(model_input(blocks, d, cfg)));
  const auto ref = grads(dense_reference(*m, cfg, d, seeds));
  for (const auto& [name, g] : ref) {
    EXPECT_TRUE(torch::allclose(mine.at(name), g, 1e-5, 1e-5)) << name;
  }
  // Every relation's weights in the input layer (papers and authors are destinations there),
  // and those of the relations into papers (the seeds' type) in the last; the authors' rows.
  for (int r = 0; r < 4; ++r) {
    const std::string rel =
        "layer0.rel" + std::to_string(r) + (GetParam() == "rgcn" ? "" : ".neigh");
    EXPECT_GT(mine.at(rel + ".weight").abs().sum().item<float>(), 0) << rel;
    // hsage: the field's hidden rows are 0 (no relation enters the field type), so has_topic
    // carries no gradient in the last layer.
    if (graph().rel_dst[r] != 0 || (GetParam() == "hsage" && r == 3)) continue;
    const std::string last =
        "layer1.rel" + std::to_string(r) + (GetParam() == "rgcn" ? "" : ".neigh");
    EXPECT_GT(mine.at(last + ".weight").abs().sum().item<float>(), 0) << last;
  }
  EXPECT_GT(mine.at("author").abs().sum(1).gt(0).sum().item<int64_t>(), 2);  // all three rows
  EXPECT_GT(mine.at("input0.weight").abs().sum().item<float>(), 0);
  EXPECT_GT(mine.at("input2.weight").abs().sum().item<float>(), 0);
}

INSTANTIATE_TEST_SUITE_P(Models, HeteroModels, ::testing::Values("rgcn", "hsage"));

TEST(HeteroModel, DropoutOnlyInTrainingAndReproducibleFromTheGenerator) {
  torch::manual_seed(3);
  ModelConfig cfg = hetero_config("rgcn", 2);
  cfg.dropout = 0.5;
  auto m = make_model(cfg);
  TinyInputs d;
  const std::vector<Block> blocks = full_blocks({0, 1, 2, 3}, 2);
  const HeteroInput in = model_input(blocks, d, cfg);
  m->eval();
  auto plain = m->forward_hetero(in);
  m->train();
  auto run = [&](uint64_t seed) {
    at::Generator gen = at::detail::createCPUGenerator(seed);
    return m->forward_hetero(in, &gen);
  };
  EXPECT_TRUE(torch::equal(run(5), run(5)));
  EXPECT_FALSE(torch::equal(run(5), plain));
}

TEST(HeteroModel, BlockSplitPerRelation) {
  const ModelConfig cfg = hetero_config("rgcn", 1);
  const Block b = full_block({0, 4});  // a paper, then an author
  HeteroBlockTensors h = hetero_block_tensors(b, cfg);
  ASSERT_EQ(h.relations.size(), 4u);
  EXPECT_TRUE(torch::equal(h.dst_rows[0], torch::tensor({0}, torch::kInt64)));
  EXPECT_TRUE(torch::equal(h.dst_rows[1], torch::tensor({1}, torch::kInt64)));
  EXPECT_EQ(h.dst_rows[2].size(0), 0);
  // Sources [0, 4, 1, 2, 7]: paper 0 <- writes {4}, cites {1, 2}, has_topic {7}; author 4 <-
  // rev_writes {0, 1}, local {0, 2}.
  EXPECT_TRUE(torch::equal(h.relations[0].indptr, torch::tensor({0, 1}, torch::kInt64)));
  EXPECT_TRUE(torch::equal(h.relations[1].indptr, torch::tensor({0, 2}, torch::kInt64)));
  EXPECT_TRUE(torch::equal(h.relations[2].indptr, torch::tensor({0, 2}, torch::kInt64)));
  EXPECT_TRUE(torch::equal(h.relations[2].indices, torch::tensor({0, 2}, torch::kInt64)));
  EXPECT_EQ(h.relations[3].num_dst, 1);
}

TEST(HeteroModel, RefusesBadBlocksAndInputs) {
  const ModelConfig cfg = hetero_config("rgcn", 1);
  auto m = make_model(cfg);
  Block plain = full_block({0});
  plain.edge_types.clear();
  EXPECT_EQ(error_of([&] { hetero_block_tensors(plain, cfg); }),
            "a heterogeneous model needs blocks with node and edge types: 5 source types for 5 "
            "sources, 0 edge types for 4 edges");
  Block wrong = full_block({0});
  wrong.edge_types[0] = 2;  // rev_writes ends at an author, not at paper 0
  EXPECT_EQ(
      error_of([&] { hetero_block_tensors(wrong, cfg); }),
      "edge 0 of the block (relation 2: type 0 -> 1) joins a node of type 1 to one of type 0");
  Block weighted = full_block({0});
  weighted.weights.assign(weighted.indices.size(), 1.0f);
  EXPECT_EQ(error_of<NotSupported>([&] { hetero_block_tensors(weighted, cfg); }),
            "--model rgcn does not support weighted blocks (LABOR's or biased sampling's edge "
            "weights)");

  TinyInputs d;
  const std::vector<Block> blocks = full_blocks({0}, 1);
  HeteroInput in = model_input(blocks, d, cfg);
  in.x[0] = torch::zeros({in.rows[0].size(0), 5});
  EXPECT_EQ(error_of([&] { m->forward_hetero(in); }),
            "inputs of node type 0 are [3, 5] but the model expects [3, 3] (its input nodes x its "
            "features)");
  in = model_input(full_blocks({0}, 2), d, cfg);
  EXPECT_EQ(error_of([&] { m->forward_hetero(in); }),
            "the batch has 2 blocks but the 1-layer model needs 1 (the number of fanouts must "
            "equal the number of layers)");
  EXPECT_EQ(error_of([&] {
              m->forward({}, torch::zeros({1, 1}));
            }),
            "--model rgcn needs a heterogeneous batch (per-type inputs, blocks with relations): "
            "train it on a heterogeneous partition");
  m->eval();
  EXPECT_EQ(error_of([&] {
              m->forward_layer(0, BlockTensors{}, torch::zeros({1, 1}));
            }),
            "full-neighbour (layer-wise) inference of --model rgcn is not implemented: evaluate "
            "with sampled neighbourhoods (--eval sampled)");
}

TEST(HeteroModel, ConfigChecks) {
  ModelConfig c = hetero_config("hsage", 2);
  c.relation_src.clear();
  c.relation_dst.clear();
  EXPECT_EQ(error_of([&] { make_model(c); }),
            "--model hsage needs the graph's node types and relations (3 types, 0 relation "
            "sources, 0 destinations)");
  c = hetero_config("hsage", 2);
  c.embedding_dim = 8;
  EXPECT_EQ(error_of([&] { make_model(c); }),
            "--model hsage: the nodes of a type without features enter with learnable rows of the "
            "hidden width (4), so the embedding width must be 4, got 8 (leave --embedding-dim "
            "out)");
  c = hetero_config("rgcn", 2);
  c.relation_dst[1] = 3;
  EXPECT_EQ(error_of([&] { make_model(c); }),
            "relation 1 goes from type 0 to type 3, outside the 3 node types");
  ModelConfig sage;
  sage.in_dim = 4;
  sage.out_dim = 2;
  sage.type_dims = {4};
  EXPECT_EQ(error_of([&] { make_model(sage); }),
            "node types and relations are for the heterogeneous models (rgcn, hsage), not sage");
  c = hetero_config("rgcn", 2);
  EXPECT_EQ(ModelConfig::from_json(c.to_json()).to_json(), c.to_json());
  sage.type_dims.clear();
  EXPECT_FALSE(sage.to_json().contains("type_dims"));
  EXPECT_EQ(error_of([&] { make_model(sage)->forward_hetero(HeteroInput{}); }),
            "--model sage is for homogeneous graphs: a heterogeneous batch needs rgcn or hsage");
}

// The trainer's path: per-type inputs from the loader's fields, the featureless type's rows from
// the embedding table (only the authors': the rows are keyed through the map), the step.
TEST(HeteroModel, TrainerStepsWithTheEmbeddingTable) {
  auto comm = make_communicator("self");
  TrainConfig tc;
  tc.model = hetero_config("rgcn", 2);
  tc.lr = 0.05;
  tc.weight_decay = 0;
  tc.seed = 1;
  Trainer trainer(tc, *comm);
  EmbeddingOptions eo;
  eo.dim = 4;
  eo.lr = 0.05;
  EmbeddingTable table(*comm, {0, 3}, nullptr, eo);  // one row per author
  trainer.embedding().attach(&table, [](int64_t v) { return v - 4; });
  const std::vector<int64_t> seeds = {0, 1, 2, 3};
  torch::manual_seed(2);
  TinyInputs d;
  auto batch = [&] {
    LoadedBatch lb;
    lb.sample.blocks = full_blocks(seeds, 2);
    lb.sample.seeds = seeds;
    lb.labels = {0, 1, 2, 1};
    const std::vector<int64_t>& src = lb.sample.blocks.front().src_ids;
    const int64_t first[3] = {0, 4, 7};
    const torch::Tensor* x[3] = {&d.paper, nullptr, &d.field};
    lb.typed_rows.resize(3);
    lb.typed_features.resize(3);
    lb.typed_dims = {3, 0, 2};
    for (size_t j = 0; j < src.size(); ++j) {
      const int t = graph().type[src[j]];
      lb.typed_rows[t].push_back(static_cast<int64_t>(j));
      if (!x[t]) continue;
      auto row = (*x[t])[src[j] - first[t]].contiguous();
      lb.typed_features[t].insert(lb.typed_features[t].end(), row.data_ptr<float>(),
                                  row.data_ptr<float>() + row.numel());
    }
    return lb;
  };
  const std::vector<float> before = table.gather(std::vector<int64_t>{0, 1, 2});
  float first_loss = 0, loss = 0;
  for (int step = 0; step < 30; ++step) {
    LoadedBatch lb = batch();
    trainer.embedding().gather(lb);
    ASSERT_EQ(lb.embedding.size(), 3u * 4u);  // the three authors only
    loss = trainer.train_step(lb);
    if (step == 0) first_loss = loss;
  }
  EXPECT_LT(loss, 0.5f * first_loss);
  EXPECT_NE(table.gather(std::vector<int64_t>{0, 1, 2}), before);
  LoadedBatch lb = batch();
  trainer.embedding().gather(lb);
  EXPECT_EQ(trainer.eval().eval_batch(lb).correct, 4);
  lb.typed_dims[2] = 3;
  EXPECT_EQ(error_of([&] { trainer.eval().eval_batch(lb); }),
            "node type 2: the batch has 2 feature values of width 3 for 1 input nodes, the model "
            "expects width 2");
  LoadedBatch homogeneous;
  homogeneous.sample.blocks = full_blocks(seeds, 2);
  homogeneous.labels = {0, 1, 2, 1};
  EXPECT_EQ(error_of([&] { trainer.eval().eval_batch(homogeneous); }),
            "the batch has inputs of 0 node types but --model rgcn has 3: a heterogeneous model "
            "trains on a heterogeneous partition");
}

}  // namespace
}  // namespace dsp
