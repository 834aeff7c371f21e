// The heterogeneous models (model.hpp's header comment: rgcn, hsage) and the split of a
// heterogeneous block by node type and relation they run on.
#include <fmt/ranges.h>

#include <numeric>

#include "core/error.hpp"
#include "train/model.hpp"

namespace dsp {

namespace {

torch::Tensor index_tensor(const std::vector<int64_t>& v, const torch::Device& device) {
  auto t = torch::empty({static_cast<int64_t>(v.size())}, torch::kInt64);
  std::copy(v.begin(), v.end(), t.data_ptr<int64_t>());
  return t.to(device);
}

// Every node and edge type of `b` against the config: InvalidArgument naming the first fault.
void check_types(const Block& b, const Block& edges, const ModelConfig& cfg) {
  const int T = cfg.num_types(), R = cfg.num_relations();
  DSP_CHECK_ARG(static_cast<int64_t>(b.src_types.size()) == b.num_src &&
                    static_cast<int64_t>(b.edge_types.size()) == edges.num_edges(),
                "a heterogeneous model needs blocks with node and edge types: {} source types for "
                "{} sources, {} edge types for {} edges",
                b.src_types.size(), b.num_src, b.edge_types.size(), edges.num_edges());
  DSP_CHECK_T(NotSupported, edges.weights.empty(),
              "--model {} does not support weighted blocks (LABOR's or biased sampling's edge "
              "weights)",
              cfg.model);
  for (int64_t i = 0; i < b.num_src; ++i) {
    DSP_CHECK_ARG(b.src_types[i] >= 0 && b.src_types[i] < T,
                  "source {} of the block has node type {}, outside the model's {} types", i,
                  b.src_types[i], T);
  }
  for (int64_t v = 0; v < b.num_dst; ++v) {
    for (int64_t e = edges.indptr[v]; e < edges.indptr[v + 1]; ++e) {
      const int r = b.edge_types[e];
      DSP_CHECK_ARG(r >= 0 && r < R, "edge {} of the block has relation {}, outside the model's {}",
                    e, r, R);
      DSP_CHECK_ARG(cfg.relation_dst[r] == b.src_types[v] &&
                        cfg.relation_src[r] == b.src_types[edges.indices[e]],
                    "edge {} of the block (relation {}: type {} -> {}) joins a node of type {} to "
                    "one of type {}",
                    e, r, cfg.relation_src[r], cfg.relation_dst[r], b.src_types[edges.indices[e]],
                    b.src_types[v]);
    }
  }
}

}  // namespace

HeteroBlockTensors hetero_block_tensors(const Block& b, const ModelConfig& cfg,
                                        const torch::Device& device) {
  const int T = cfg.num_types(), R = cfg.num_relations();
  Block host;  // a device block's edges, read here on the host
  if (b.on_device) {
    host.num_dst = b.num_dst;
    host.on_device = b.on_device;
    host.edges_to_host();
  }
  const Block& edges = b.on_device ? host : b;
  check_types(b, edges, cfg);
  HeteroBlockTensors out;
  out.num_dst = b.num_dst;
  out.num_src = b.num_src;
  std::vector<std::vector<int64_t>> rows(T);
  std::vector<int64_t> local(b.num_dst);  // a destination's row among its type's
  for (int64_t v = 0; v < b.num_dst; ++v) {
    local[v] = static_cast<int64_t>(rows[b.src_types[v]].size());
    rows[b.src_types[v]].push_back(v);
  }
  std::vector<std::vector<int64_t>> indptr(R), indices(R);
  for (int r = 0; r < R; ++r) indptr[r].assign(rows[cfg.relation_dst[r]].size() + 1, 0);
  for (int64_t v = 0; v < b.num_dst; ++v) {  // destinations ascending: each row's edges in order
    for (int64_t e = edges.indptr[v]; e < edges.indptr[v + 1]; ++e) {
      const int r = b.edge_types[e];
      ++indptr[r][local[v] + 1];
      indices[r].push_back(edges.indices[e]);
    }
  }
  for (int t = 0; t < T; ++t) out.dst_rows.push_back(index_tensor(rows[t], device));
  for (int r = 0; r < R; ++r) {
    std::partial_sum(indptr[r].begin(), indptr[r].end(), indptr[r].begin());
    BlockTensors bt;
    bt.num_dst = static_cast<int64_t>(indptr[r].size()) - 1;
    bt.num_src = b.num_src;
    bt.indptr = index_tensor(indptr[r], device);
    bt.indices = index_tensor(indices[r], device);
    bt.cache = std::make_shared<BlockCache>();
    out.relations.push_back(std::move(bt));
  }
  return out;
}

namespace {

// hsage's SAGEConv('mean') of one relation: W_self h_v + b + W_neigh mean_r(v).
class RelationSage : public torch::nn::Module {
 public:
  RelationSage(int64_t in, int64_t out)
      : self(register_module("self", torch::nn::Linear(in, out))),
        neigh(register_module("neigh",
                              torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)))) {
    torch::NoGradGuard ng;
    self->bias.zero_();  // as model.cpp's SageLayer
  }
  torch::nn::Linear self, neigh;
};

// One layer of either model over a HeteroBlockTensors: per destination type t one product of
// [h_v | mean_r1(v) | mean_r2(v) | ...] (the relations into t) with the stacked weights.
class HeteroLayer : public torch::nn::Module {
 public:
  HeteroLayer(const ModelConfig& cfg, int64_t in, int64_t out)
      : rgcn_(cfg.model == ModelKind::kRgcn), out_(out), rels_into_(cfg.num_types()) {
    for (int r = 0; r < cfg.num_relations(); ++r) rels_into_[cfg.relation_dst[r]].push_back(r);
    if (rgcn_) {
      self_ = register_module("self", torch::nn::Linear(in, out));
      torch::NoGradGuard ng;
      self_->bias.zero_();
    }
    for (int r = 0; r < cfg.num_relations(); ++r) {
      const std::string name = "rel" + std::to_string(r);
      if (rgcn_) {
        rel_.push_back(register_module(
            name, torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false))));
      } else {
        conv_.push_back(register_module(name, std::make_shared<RelationSage>(in, out)));
      }
    }
  }

  torch::Tensor forward(const HeteroBlockTensors& b, const torch::Tensor& h) {
    std::vector<torch::Tensor> outs, rows;
    for (size_t t = 0; t < rels_into_.size(); ++t) {
      const torch::Tensor& idx = b.dst_rows[t];
      if (idx.size(0) == 0) continue;
      rows.push_back(idx);
      outs.push_back(type_rows(b, h, static_cast<int>(t)));
    }
    auto out = torch::zeros({b.num_dst, out_}, h.options());
    if (outs.empty()) return out;
    return out.index_copy(0, torch::cat(rows), torch::cat(outs));
  }

 private:
  // The new rows of the destinations of type t, [dst_rows[t], out].
  torch::Tensor type_rows(const HeteroBlockTensors& b, const torch::Tensor& h, int t) {
    const std::vector<int>& rels = rels_into_[t];
    const torch::Tensor& idx = b.dst_rows[t];
    if (!rgcn_ && rels.empty()) return torch::zeros({idx.size(0), out_}, h.options());
    std::vector<torch::Tensor> x = {h.index_select(0, idx)}, w, bias;
    if (rgcn_) {
      w.push_back(self_->weight);
      bias.push_back(self_->bias);
    } else {
      std::vector<torch::Tensor> selfs;
      for (int r : rels) selfs.push_back(conv_[r]->self->weight);
      w.push_back(torch::stack(selfs).sum(0));
    }
    for (int r : rels) {
      x.push_back(aggregate(b.relations[r], h, Aggregation::kMean));
      w.push_back(rgcn_ ? rel_[r]->weight : conv_[r]->neigh->weight);
      if (!rgcn_) bias.push_back(conv_[r]->self->bias);
    }
    const torch::Tensor xw = torch::cat(x, 1);
    if (bias.size() == 1) return torch::addmm(bias[0], xw, torch::cat(w, 1).t());
    return torch::mm(xw, torch::cat(w, 1).t()) + torch::stack(bias).sum(0);
  }

  bool rgcn_;
  int64_t out_;
  std::vector<std::vector<int>> rels_into_;
  torch::nn::Linear self_{nullptr};
  std::vector<torch::nn::Linear> rel_;
  std::vector<std::shared_ptr<RelationSage>> conv_;
};

class HeteroModel : public GnnModel {
 public:
  explicit HeteroModel(const ModelConfig& cfg)
      : GnnModel(cfg), input_(cfg.num_types(), torch::nn::Linear(nullptr)) {
    for (int t = 0; t < cfg.num_types(); ++t) {
      if (cfg.type_dims[t] == 0) continue;  // learnable rows, already hidden wide
      input_[t] = register_module("input" + std::to_string(t),
                                  torch::nn::Linear(cfg.type_dims[t], cfg.hidden));
      torch::NoGradGuard ng;
      input_[t]->bias.zero_();
    }
    for (int l = 0; l < cfg.layers; ++l) {
      const int64_t out = l + 1 == cfg.layers ? cfg.out_dim : cfg.hidden;
      layers_.push_back(register_module("layer" + std::to_string(l),
                                        std::make_shared<HeteroLayer>(cfg, cfg.hidden, out)));
    }
  }

  torch::Tensor forward(const std::vector<BlockTensors>&, torch::Tensor, at::Generator*) override {
    DSP_THROW_T(InvalidArgument,
                "--model {} needs a heterogeneous batch (per-type inputs, blocks with relations): "
                "train it on a heterogeneous partition",
                cfg_.model);
  }

  torch::Tensor forward_layer(int, const BlockTensors&, torch::Tensor) override {
    DSP_THROW_T(InvalidArgument,
                "full-neighbour (layer-wise) inference of --model {} is not implemented: evaluate "
                "with sampled neighbourhoods (--eval sampled)",
                cfg_.model);
  }

  torch::Tensor forward_hetero(const HeteroInput& in, at::Generator* gen, int layers) override {
    const size_t run = layers < 0 ? layers_.size() : static_cast<size_t>(layers);
    DSP_CHECK_ARG(run >= 1 && run <= layers_.size(), "layers {}: the model has {}", layers,
                  layers_.size());
    check(in, static_cast<int>(run));
    std::vector<torch::Tensor> pieces;
    for (int t = 0; t < cfg_.num_types(); ++t) {
      pieces.push_back(cfg_.type_dims[t] > 0 ? input_[t](in.x[t]) : in.x[t]);
    }
    const int64_t n = in.blocks.front().num_src;
    torch::Tensor h = torch::zeros({n, cfg_.hidden}, pieces.front().options())
                          .index_copy(0, torch::cat(in.rows), torch::cat(pieces));
    for (size_t l = 0; l < run; ++l) {
      h = layers_[l]->forward(in.blocks[l], h);
      if (l + 1 < layers_.size()) h = dropout(h, cfg_.dropout, gen, /*relu=*/true);
    }
    return h;
  }

 private:
  // The batch against the config and the `layers` to run: InvalidArgument naming the first fault.
  void check(const HeteroInput& in, int layers) const {
    const int T = cfg_.num_types();
    DSP_CHECK_ARG(static_cast<int>(in.blocks.size()) == layers,
                  "the batch has {} blocks but the {}-layer model needs {} (the number of fanouts "
                  "must equal the number of layers)",
                  in.blocks.size(), cfg_.layers, layers);
    for (size_t l = 1; l < in.blocks.size(); ++l) {
      DSP_CHECK_ARG(in.blocks[l].num_src == in.blocks[l - 1].num_dst,
                    "block {} has {} source nodes but block {} has {} destination nodes", l,
                    in.blocks[l].num_src, l - 1, in.blocks[l - 1].num_dst);
    }
    DSP_CHECK_ARG(static_cast<int>(in.rows.size()) == T && static_cast<int>(in.x.size()) == T,
                  "the batch has inputs of {} and {} node types but the model has {}",
                  in.rows.size(), in.x.size(), T);
    int64_t total = 0;
    for (int t = 0; t < T; ++t) {
      const int64_t width = cfg_.type_dims[t] > 0 ? cfg_.type_dims[t] : cfg_.hidden;
      const int64_t n = in.rows[t].size(0);
      total += n;
      DSP_CHECK_ARG(in.x[t].dim() == 2 && in.x[t].size(0) == n && in.x[t].size(1) == width,
                    "inputs of node type {} are {} but the model expects [{}, {}] ({} x {})", t,
                    fmt::format("[{}]", fmt::join(in.x[t].sizes().vec(), ", ")), n, width,
                    "its input nodes", cfg_.type_dims[t] > 0 ? "its features" : "hidden");
    }
    DSP_CHECK_ARG(total == in.blocks.front().num_src,
                  "the batch's per-type inputs cover {} rows but its first block has {} sources",
                  total, in.blocks.front().num_src);
  }

  std::vector<torch::nn::Linear> input_;
  std::vector<std::shared_ptr<HeteroLayer>> layers_;
};

}  // namespace

std::shared_ptr<GnnModel> make_hetero_model(const ModelConfig& cfg) {
  cfg.validate();
  DSP_CHECK_ARG(cfg.hetero(), "make_hetero_model: {} is not a heterogeneous model", cfg.model);
  auto m = std::make_shared<HeteroModel>(cfg);
  m->make_predictor();  // link prediction's (after the layers: the same parameter order)
  return m;
}

}  // namespace dsp
