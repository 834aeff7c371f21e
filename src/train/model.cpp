#include "train/model.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/ranges.h>

#include <cmath>
#include <mutex>

#include "core/error.hpp"
#include "train/dropout.hpp"

namespace dsp {

namespace {

// A fresh 64-bit dropout key from the generator, a host one on every device (the trainer's step
// generator, else LibTorch's default CPU generator): a step's generator yields the same keys, in
// the same order, every time it is seeded the same, and nothing is read back from a GPU.
uint64_t draw_key(at::Generator* gen) {
  at::Generator g = gen ? *gen : at::detail::getDefaultCPUGenerator();
  DSP_CHECK_ARG(g.device().is_cpu(), "dropout keys come from a host generator, not a {} one",
                g.device().str());
  std::lock_guard<std::mutex> lock(g.mutex());
  return at::check_generator<at::CPUGeneratorImpl>(g)->random64();
}

}  // namespace

torch::Tensor GnnModel::dropout(const torch::Tensor& x, double p, at::Generator* gen,
                                bool relu) const {
  if (!is_training() || p <= 0.0 || x.numel() == 0) return relu ? torch::relu(x) : x;
  return fused_dropout(x, p, relu, draw_key(gen));
}

void GnnModel::check_inputs(const std::vector<BlockTensors>& blocks, const torch::Tensor& x) const {
  DSP_CHECK_ARG(static_cast<int>(blocks.size()) == cfg_.num_blocks(),
                "the batch has {} blocks but the {}-layer model{} needs {} (the number of fanouts "
                "must equal the number of layers)",
                blocks.size(), cfg_.layers,
                cfg_.preaggregated ? " with a pre-aggregated input" : "", cfg_.num_blocks());
  const int64_t rows = blocks.front().num_src;
  DSP_CHECK_ARG(x.dim() == 2 && x.size(0) == rows && x.size(1) == cfg_.input_width(),
                "input features are {} but the model expects [{}, {}] (input nodes x {})",
                fmt::format("[{}]", fmt::join(x.sizes().vec(), ", ")), rows, cfg_.input_width(),
                cfg_.preaggregated ? "2 in_dim: [x | pre-aggregated]" : "in_dim");
}

int64_t GnnModel::layer_width(int layer) const {
  if (layer + 1 >= cfg_.layers) return cfg_.out_dim;
  return cfg_.model == ModelKind::kGat ? cfg_.hidden * cfg_.heads : cfg_.hidden;
}

namespace {

class Layer : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const BlockTensors& b, const torch::Tensor& h, double attn_drop,
                                at::Generator* gen, const GnnModel& owner) = 0;
  // The layer on pre-aggregated rows [x_v | a_v] (PaGraph's PP): what forward computes for v
  // when a_v is its aggregation over v's whole in-neighbourhood. Only sage and gcn have one
  // (ModelConfig::validate refuses the others).
  virtual torch::Tensor forward_preaggregated(const torch::Tensor& /*xa*/) {
    DSP_THROW_T(InvalidArgument, "this layer has no pre-aggregated form");
  }
};

class SageLayer : public Layer {
 public:
  SageLayer(int64_t in, int64_t out)
      : in_(in),
        out_(out),
        self_(register_module("self", torch::nn::Linear(in, out))),
        neigh_(register_module("neigh",
                               torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)))) {
    // LibTorch's Linear initialisation (PyG's SAGEConv's), the bias at zero as DGL's SAGEConv.
    // Not DGL's xavier uniform (ReLU gain): measured with scripts/peers/parity.py
    // (docs/benchmarks.md), it made training on Amazon Photo's 160 labels unstable (test
    // 0.782 +- 0.091 over 5 seeds, against 0.897 +- 0.011 with this one), and did not help on Cora.
    torch::NoGradGuard ng;
    self_->bias.zero_();
  }

  torch::Tensor forward(const BlockTensors& b, const torch::Tensor& h, double, at::Generator*,
                        const GnnModel&) override {
    // The mean is linear, so project first when that shrinks the rows being aggregated.
    if (in_ > out_) {
      return self_(h.narrow(0, 0, b.num_dst)) + aggregate(b, neigh_(h), Aggregation::kMean);
    }
    // Otherwise one product: [h_dst | mean] [W_self | W_neigh]^T + b.
    auto w = torch::cat({self_->weight, neigh_->weight}, 1);
    return torch::addmm(self_->bias, aggregate_concat_self(b, h, Aggregation::kMean), w.t());
  }

  // W_self x_v + W_neigh mean_v + b: the rows are already [h_dst | mean].
  torch::Tensor forward_preaggregated(const torch::Tensor& xa) override {
    return torch::addmm(self_->bias, xa, torch::cat({self_->weight, neigh_->weight}, 1).t());
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
    // LibTorch's Linear initialisation, not DGL's xavier uniform: see SageLayer (on Photo, GCN
    // 0.312 +- 0.097 with xavier against 0.562 +- 0.244 with this one).
    bias_ = register_parameter("bias", torch::zeros({out}));
  }

  torch::Tensor forward(const BlockTensors& b, const torch::Tensor& h, double, at::Generator*,
                        const GnnModel&) override {
    if (in_ > out_) return aggregate(b, lin_(h), Aggregation::kGcn) + bias_;
    return lin_(aggregate(b, h, Aggregation::kGcn)) + bias_;
  }

  // W a_v + b on the aggregate half of [x_v | a_v].
  torch::Tensor forward_preaggregated(const torch::Tensor& xa) override {
    return lin_(xa.narrow(1, in_, in_)) + bias_;
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
    auto z = fc_(h).view({-1, heads_, dim_});
    auto el = (z * attn_l_).sum(-1);                          // [num_src, H]
    auto er = (z.narrow(0, 0, b.num_dst) * attn_r_).sum(-1);  // [num_dst, H]
    auto a = owner_dropout(owner, edge_softmax(b, el, er, 0.2), attn_drop, gen);
    return aggregate_edges(b, z, a) + bias_;
  }

 private:
  static torch::Tensor owner_dropout(const GnnModel& owner, const torch::Tensor& x, double p,
                                     at::Generator* gen);
  int64_t dim_;
  int heads_;
  torch::nn::Linear fc_;
  torch::Tensor attn_l_, attn_r_, bias_;
};

// The layer stack shared by all three models: layer -> activation -> dropout between layers.
class StackModel : public GnnModel {
 public:
  explicit StackModel(const ModelConfig& cfg) : GnnModel(cfg) {
    const int L = cfg.layers;
    for (int l = 0; l < L; ++l) {
      const bool last = l == L - 1;
      std::shared_ptr<Layer> layer;
      if (cfg.model == ModelKind::kGat) {
        int64_t in = l == 0 ? cfg.in_dim : cfg.hidden * cfg.heads;
        layer = std::make_shared<GatLayer>(in, last ? cfg.out_dim : cfg.hidden,
                                           last ? cfg.out_heads : cfg.heads);
      } else {
        int64_t in = l == 0 ? cfg.in_dim : cfg.hidden;
        int64_t out = last ? cfg.out_dim : cfg.hidden;
        if (cfg.model == ModelKind::kSage) {
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
    const bool gat = cfg_.model == ModelKind::kGat;
    // DGL's placements: GATConv drops out the input of every layer (feat_drop), the GraphSAGE
    // and GCN examples only the hidden activations, not the raw features.
    torch::Tensor h = gat ? dropout(x, cfg_.dropout, gen) : x;
    // With pre-aggregated input, layer 0 is dense and layer l reads block l - 1.
    const size_t skip = cfg_.preaggregated ? 1 : 0;
    for (size_t l = 0; l < layers_.size(); ++l) {
      h = l < skip ? layers_[l]->forward_preaggregated(h)
                   : layers_[l]->forward(blocks[l - skip], h, cfg_.dropout, gen, *this);
      if (l + 1 == layers_.size()) return gat ? h.mean(1) : h;
      h = gat ? dropout(torch::elu(h.flatten(1)), cfg_.dropout, gen)
              : dropout(h, cfg_.dropout, gen, /*relu=*/true);
    }
    return h;
  }

  torch::Tensor forward_layer(int layer, const BlockTensors& block, torch::Tensor h) override {
    DSP_CHECK_ARG(!cfg_.preaggregated,
                  "layer-wise inference needs the model's input layer: a pre-aggregated model "
                  "has none");
    DSP_CHECK_ARG(layer >= 0 && layer < static_cast<int>(layers_.size()),
                  "layer {} of a {}-layer model", layer, layers_.size());
    DSP_CHECK_ARG(!is_training(), "forward_layer runs in eval mode");
    const bool gat = cfg_.model == ModelKind::kGat;
    h = layers_[layer]->forward(block, h, 0.0, nullptr, *this);
    if (layer + 1 == static_cast<int>(layers_.size())) return gat ? h.mean(1) : h;
    return gat ? torch::elu(h.flatten(1)) : torch::relu(h);
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

void GnnModel::make_predictor() {
  if (cfg_.predictor != PredictorKind::kMlp) return;
  pred_hidden_ = register_module("predictor_hidden", torch::nn::Linear(cfg_.out_dim, cfg_.out_dim));
  pred_out_ = register_module("predictor_out", torch::nn::Linear(cfg_.out_dim, 1));
}

torch::Tensor GnnModel::score(const torch::Tensor& hs, const torch::Tensor& hd) {
  DSP_CHECK_ARG(cfg_.predictor == PredictorKind::kDot || cfg_.predictor == PredictorKind::kMlp,
                "scoring pairs needs a link predictor (dot, mlp); this model classifies nodes");
  if (cfg_.predictor == PredictorKind::kDot) return (hs * hd).sum(1);
  return pred_out_->forward(torch::relu(pred_hidden_->forward(hs * hd))).squeeze(1);
}

torch::Tensor GnnModel::forward_hetero(const HeteroInput&, at::Generator*, int) {
  DSP_THROW_T(InvalidArgument,
              "--model {} is for homogeneous graphs: a heterogeneous batch needs rgcn or hsage",
              cfg_.model);
}

std::shared_ptr<GnnModel> make_model(const ModelConfig& cfg) {
  cfg.validate();
  if (cfg.hetero()) return make_hetero_model(cfg);
  auto m = std::make_shared<StackModel>(cfg);
  m->make_predictor();
  return m;
}

}  // namespace dsp
