#include "train/model.hpp"

#include <fmt/ranges.h>

#include <cmath>
#include <limits>

#include "core/error.hpp"

namespace dsp {

BlockTensors block_to_tensors(const Block& b, const torch::Device& device) {
  DSP_CHECK_ARG(b.num_dst >= 0 && b.num_dst <= b.num_src,
                "block has {} destination nodes but only {} source nodes (dst must prefix src)",
                b.num_dst, b.num_src);
  DSP_CHECK_ARG(static_cast<int64_t>(b.indptr.size()) == b.num_dst + 1,
                "block indptr has {} entries, expected num_dst + 1 = {}", b.indptr.size(),
                b.num_dst + 1);
  DSP_CHECK_ARG(b.indptr.front() == 0 && b.indptr.back() == b.num_edges(),
                "block indptr spans [{}, {}] but the block has {} edges", b.indptr.front(),
                b.indptr.back(), b.num_edges());
  BlockTensors t;
  t.num_dst = b.num_dst;
  t.num_src = b.num_src;
  auto opts = torch::TensorOptions().dtype(torch::kInt64);
  // from_blob does not copy; the tensors are never written, so the const_cast is safe.
  t.indptr = torch::from_blob(const_cast<int64_t*>(b.indptr.data()), {b.num_dst + 1}, opts);
  t.indices = b.num_edges() > 0
                  ? torch::from_blob(const_cast<int64_t*>(b.indices.data()), {b.num_edges()}, opts)
                  : torch::empty({0}, opts);
  if (device != torch::kCPU) {
    t.indptr = t.indptr.to(device);
    t.indices = t.indices.to(device);
  }
  auto deg = t.indptr.narrow(0, 1, b.num_dst) - t.indptr.narrow(0, 0, b.num_dst);
  t.dst = torch::repeat_interleave(torch::arange(b.num_dst, opts.device(device)), deg);
  return t;
}

std::vector<BlockTensors> blocks_to_tensors(const std::vector<Block>& blocks,
                                            const torch::Device& device) {
  std::vector<BlockTensors> out;
  out.reserve(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) {
    out.push_back(block_to_tensors(blocks[i], device));
    if (i > 0) {
      // The destination nodes of a block are the source nodes of the next one.
      DSP_CHECK_ARG(blocks[i].num_src == blocks[i - 1].num_dst,
                    "block {} has {} source nodes but block {} has {} destination nodes", i,
                    blocks[i].num_src, i - 1, blocks[i - 1].num_dst);
    }
  }
  return out;
}

torch::Tensor GnnModel::dropout(const torch::Tensor& x, double p, at::Generator* gen) const {
  if (!is_training() || p <= 0.0 || x.numel() == 0) return x;
  c10::optional<at::Generator> g;
  if (gen) g = *gen;
  auto keep = torch::empty_like(x).bernoulli_(1.0 - p, g);
  return x * keep * (1.0 / (1.0 - p));
}

void GnnModel::check_inputs(const std::vector<BlockTensors>& blocks, const torch::Tensor& x) const {
  DSP_CHECK_ARG(static_cast<int>(blocks.size()) == cfg_.layers,
                "the batch has {} blocks but the {}-layer model needs one per layer (the number "
                "of fanouts must equal the number of layers)",
                blocks.size(), cfg_.layers);
  DSP_CHECK_ARG(x.dim() == 2 && x.size(0) == blocks.front().num_src && x.size(1) == cfg_.in_dim,
                "input features are {} but the model expects [{}, {}] (input nodes x in_dim)",
                fmt::format("[{}]", fmt::join(x.sizes().vec(), ", ")), blocks.front().num_src,
                cfg_.in_dim);
}

namespace {

torch::Tensor in_degree(const BlockTensors& b, const torch::TensorOptions& fopts) {
  return (b.indptr.narrow(0, 1, b.num_dst) - b.indptr.narrow(0, 0, b.num_dst)).to(fopts);
}

// Edge lists with one self loop per destination node appended (local id v -> v).
std::pair<torch::Tensor, torch::Tensor> with_self_loops(const BlockTensors& b) {
  auto loop = torch::arange(b.num_dst, b.indices.options());
  return {torch::cat({b.indices, loop}), torch::cat({b.dst, loop})};
}

class Layer : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const BlockTensors& b, const torch::Tensor& h, double attn_drop,
                                at::Generator* gen, const GnnModel& owner) = 0;
};

class SageLayer : public Layer {
 public:
  SageLayer(int64_t in, int64_t out)
      : in_(in),
        out_(out),
        self_(register_module("self", torch::nn::Linear(in, out))),
        neigh_(register_module("neigh",
                               torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)))) {}

  torch::Tensor forward(const BlockTensors& b, const torch::Tensor& h, double, at::Generator*,
                        const GnnModel&) override {
    auto h_dst = h.narrow(0, 0, b.num_dst);
    // The mean is linear, so project first when that shrinks the rows being gathered.
    auto src = in_ > out_ ? neigh_(h) : h;
    auto sum = torch::zeros({b.num_dst, src.size(1)}, src.options())
                   .index_add_(0, b.dst, src.index_select(0, b.indices));
    auto mean = sum / in_degree(b, src.options()).clamp_min(1.0).unsqueeze(1);
    return self_(h_dst) + (in_ > out_ ? mean : neigh_(mean));
  }

 private:
  int64_t in_, out_;
  torch::nn::Linear self_, neigh_;
};

class GcnLayer : public Layer {
 public:
  GcnLayer(int64_t in, int64_t out)
      : in_(in),
        out_(out),
        lin_(register_module("lin",
                             torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)))) {
    bias_ = register_parameter("bias", torch::zeros({out}));
  }

  torch::Tensor forward(const BlockTensors& b, const torch::Tensor& h, double, at::Generator*,
                        const GnnModel&) override {
    auto [src, dst] = with_self_loops(b);
    auto fopts = h.options();
    auto deg_in = in_degree(b, fopts) + 1.0;
    // Out-degree of every source inside the block, its own self loop included.
    auto deg_out =
        torch::zeros({b.num_src}, fopts).index_add_(0, src, torch::ones({src.size(0)}, fopts));
    auto norm = (deg_out.index_select(0, src) * deg_in.index_select(0, dst)).rsqrt();
    auto x = in_ > out_ ? lin_(h) : h;
    auto agg = torch::zeros({b.num_dst, x.size(1)}, x.options())
                   .index_add_(0, dst, x.index_select(0, src) * norm.unsqueeze(1));
    return (in_ > out_ ? agg : lin_(agg)) + bias_;
  }

 private:
  int64_t in_, out_;
  torch::nn::Linear lin_;
  torch::Tensor bias_;
};

class GatLayer : public Layer {
 public:
  GatLayer(int64_t in, int64_t dim, int heads)
      : dim_(dim),
        heads_(heads),
        fc_(register_module(
            "fc", torch::nn::Linear(torch::nn::LinearOptions(in, dim * heads).bias(false)))) {
    // DGL's GATConv initialisation (xavier normal, gain sqrt(2)).
    const double gain = std::sqrt(2.0);
    torch::NoGradGuard ng;
    torch::nn::init::xavier_normal_(fc_->weight, gain);
    attn_l_ = register_parameter("attn_l", torch::empty({1, heads, dim}));
    attn_r_ = register_parameter("attn_r", torch::empty({1, heads, dim}));
    torch::nn::init::xavier_normal_(attn_l_, gain);
    torch::nn::init::xavier_normal_(attn_r_, gain);
    bias_ = register_parameter("bias", torch::zeros({heads, dim}));
  }

  // Returns [num_dst, heads, dim].
  torch::Tensor forward(const BlockTensors& b, const torch::Tensor& h, double attn_drop,
                        at::Generator* gen, const GnnModel& owner) override {
    auto [src, dst] = with_self_loops(b);
    auto z = fc_(h).view({-1, heads_, dim_});
    auto el = (z * attn_l_).sum(-1);                          // [num_src, H]
    auto er = (z.narrow(0, 0, b.num_dst) * attn_r_).sum(-1);  // [num_dst, H]
    auto e = torch::leaky_relu(el.index_select(0, src) + er.index_select(0, dst), 0.2);
    // Edge softmax per (dst, head). The max is only a shift for stability (softmax is invariant to
    // it), so it needs no gradient.
    auto dst_h = dst.unsqueeze(1).expand({dst.size(0), heads_}).contiguous();
    torch::Tensor m;
    {
      torch::NoGradGuard ng;
      m = torch::full({b.num_dst, heads_}, -std::numeric_limits<float>::infinity(), e.options())
              .scatter_reduce(0, dst_h, e.detach(), "amax", /*include_self=*/true);
    }
    auto ex = torch::exp(e - m.index_select(0, dst));
    auto denom = torch::zeros({b.num_dst, heads_}, e.options()).index_add_(0, dst, ex);
    auto a = ex / denom.index_select(0, dst);  // every dst has its self loop: denom > 0
    a = owner_dropout(owner, a, attn_drop, gen);
    auto out = torch::zeros({b.num_dst, heads_, dim_}, z.options())
                   .index_add_(0, dst, z.index_select(0, src) * a.unsqueeze(-1));
    return out + bias_;
  }

 private:
  static torch::Tensor owner_dropout(const GnnModel& owner, const torch::Tensor& x, double p,
                                     at::Generator* gen);
  int64_t dim_;
  int heads_;
  torch::nn::Linear fc_;
  torch::Tensor attn_l_, attn_r_, bias_;
};

// The layer stack shared by all three models: dropout -> layer -> activation between layers.
class StackModel : public GnnModel {
 public:
  explicit StackModel(const ModelConfig& cfg) : GnnModel(cfg) {
    const int L = cfg.layers;
    for (int l = 0; l < L; ++l) {
      const bool last = l == L - 1;
      std::shared_ptr<Layer> layer;
      if (cfg.model == "gat") {
        int64_t in = l == 0 ? cfg.in_dim : cfg.hidden * cfg.heads;
        layer = std::make_shared<GatLayer>(in, last ? cfg.out_dim : cfg.hidden,
                                           last ? cfg.out_heads : cfg.heads);
      } else {
        int64_t in = l == 0 ? cfg.in_dim : cfg.hidden;
        int64_t out = last ? cfg.out_dim : cfg.hidden;
        if (cfg.model == "sage") {
          layer = std::make_shared<SageLayer>(in, out);
        } else {
          layer = std::make_shared<GcnLayer>(in, out);
        }
      }
      layers_.push_back(register_module("layer" + std::to_string(l), layer));
    }
  }

  torch::Tensor forward(const std::vector<BlockTensors>& blocks, torch::Tensor x,
                        at::Generator* gen) override {
    check_inputs(blocks, x);
    const bool gat = cfg_.model == "gat";
    torch::Tensor h = x;
    for (size_t l = 0; l < layers_.size(); ++l) {
      const bool last = l + 1 == layers_.size();
      h = dropout(h, cfg_.dropout, gen);
      h = layers_[l]->forward(blocks[l], h, cfg_.dropout, gen, *this);
      if (gat) {
        h = last ? h.mean(1) : torch::elu(h.flatten(1));
      } else if (!last) {
        h = torch::relu(h);
      }
    }
    return h;
  }

  // Lets layers draw dropout masks from the same generator and training flag.
  torch::Tensor layer_dropout(const torch::Tensor& x, double p, at::Generator* gen) const {
    return dropout(x, p, gen);
  }

 private:
  std::vector<std::shared_ptr<Layer>> layers_;
};

torch::Tensor GatLayer::owner_dropout(const GnnModel& owner, const torch::Tensor& x, double p,
                                      at::Generator* gen) {
  return static_cast<const StackModel&>(owner).layer_dropout(x, p, gen);
}

}  // namespace

std::shared_ptr<GnnModel> make_model(const ModelConfig& cfg) {
  cfg.validate();
  return std::make_shared<StackModel>(cfg);
}

}  // namespace dsp
