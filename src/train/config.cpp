#include "train/config.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "layout/partition/partition.hpp"

namespace dsp {

const Names<ModelKind>& names_of(ModelKind) {
  using M = ModelKind;
  static const Names<M> n("model", {{M::kSage, "sage"},
                                    {M::kGcn, "gcn"},
                                    {M::kGat, "gat"},
                                    {M::kRgcn, "rgcn"},
                                    {M::kHsage, "hsage"}});
  return n;
}

const Names<PredictorKind>& names_of(PredictorKind) {
  using P = PredictorKind;
  static const Names<P> n("predictor", {{P::kNone, "none"}, {P::kDot, "dot"}, {P::kMlp, "mlp"}});
  return n;
}

const Names<LossKind>& names_of(LossKind) {
  using L = LossKind;
  static const Names<L> n("loss", {{L::kAuto, "auto"}, {L::kCe, "ce"}, {L::kBce, "bce"}});
  return n;
}

const Names<OptimizerKind>& names_of(OptimizerKind) {
  using O = OptimizerKind;
  static const Names<O> n(
      "optimizer",
      {{O::kAdam, "adam"}, {O::kSgd, "sgd"}, {O::kAdamW, "adamw"}, {O::kAdagrad, "adagrad"}});
  return n;
}

const Names<FeatureNorm>& names_of(FeatureNorm) {
  using F = FeatureNorm;
  static const Names<F> n("feature normalisation",
                          {{F::kNone, "none"}, {F::kRow, "row"}, {F::kStandard, "standard"}});
  return n;
}

const Names<LrScheduleKind>& names_of(LrScheduleKind) {
  using L = LrScheduleKind;
  static const Names<L> n(
      "learning rate schedule",
      {{L::kNone, "none"}, {L::kCosine, "cosine"}, {L::kStep, "step"}, {L::kPlateau, "plateau"}});
  return n;
}

namespace {

// The heterogeneous fields: a schema's types and relations, or none for a homogeneous model.
void check_hetero_fields(const ModelConfig& m) {
  if (!m.hetero()) {
    DSP_CHECK_ARG(m.type_dims.empty() && m.relation_src.empty() && m.relation_dst.empty(),
                  "node types and relations are for the heterogeneous models (rgcn, hsage), not "
                  "{}",
                  m.model);
    return;
  }
  DSP_CHECK_ARG(!m.type_dims.empty() && !m.relation_src.empty() &&
                    m.relation_src.size() == m.relation_dst.size(),
                "--model {} needs the graph's node types and relations ({} types, {} relation "
                "sources, {} destinations)",
                m.model, m.type_dims.size(), m.relation_src.size(), m.relation_dst.size());
  bool featureless = false;
  for (const int64_t d : m.type_dims) {
    DSP_CHECK_ARG(d >= 0, "node type input widths must be >= 0, got {}", d);
    featureless = featureless || d == 0;
  }
  for (int r = 0; r < m.num_relations(); ++r) {
    DSP_CHECK_ARG(m.relation_src[r] >= 0 && m.relation_src[r] < m.num_types() &&
                      m.relation_dst[r] >= 0 && m.relation_dst[r] < m.num_types(),
                  "relation {} goes from type {} to type {}, outside the {} node types", r,
                  m.relation_src[r], m.relation_dst[r], m.num_types());
  }
  DSP_CHECK_ARG(m.embedding_dim == (featureless ? m.hidden : 0),
                "--model {}: the nodes of a type without features enter with learnable rows of "
                "the hidden width ({}), so the embedding width must be {}, got {} (leave "
                "--embedding-dim out)",
                m.model, m.hidden, featureless ? m.hidden : 0, m.embedding_dim);
  DSP_CHECK_ARG(!m.preaggregated,
                "--preaggregate with --model {}: pre-aggregated rows are a homogeneous graph's "
                "(one aggregation over every in-neighbour), not one per relation",
                m.model);
}

}  // namespace

void ModelConfig::validate() const {
  DSP_CHECK_ARG(hetero() || in_dim > 0, "model input dimension must be positive, got {}", in_dim);
  DSP_CHECK_ARG(out_dim > 0, "model output dimension (classes) must be positive, got {}", out_dim);
  DSP_CHECK_ARG(hidden > 0, "hidden size must be positive, got {}", hidden);
  DSP_CHECK_ARG(layers >= 1, "a model needs at least one layer, got {}", layers);
  DSP_CHECK_ARG(dropout >= 0.0 && dropout < 1.0, "dropout must lie in [0, 1), got {}", dropout);
  check_hetero_fields(*this);
  DSP_CHECK_ARG(!preaggregated || model == ModelKind::kSage || model == ModelKind::kGcn,
                "--preaggregate works with sage and gcn, whose first layer is a linear map of a "
                "neighbour aggregate; {}'s first layer cannot be computed ahead of sampling",
                model);
  DSP_CHECK_ARG(!preaggregated || layers >= 2,
                "--preaggregate needs 2 or more layers (the first is pre-aggregated, the others "
                "are sampled), got {}",
                layers);
  DSP_CHECK_ARG(hetero() || (embedding_dim >= 0 && embedding_dim <= in_dim),
                "embedding dimension {} must lie in [0, in_dim = {}]", embedding_dim, in_dim);
  DSP_CHECK_ARG(heads >= 1 && out_heads >= 1, "attention heads must be >= 1, got {} and {}", heads,
                out_heads);
}

std::optional<Preaggregation> ModelConfig::preaggregation() const {
  if (model == ModelKind::kSage) return Preaggregation::kMean;
  if (model == ModelKind::kGcn) return Preaggregation::kGcn;
  return std::nullopt;
}

nlohmann::json ModelConfig::to_json() const {
  nlohmann::json j = {{"model", name_of(model)},
                      {"in_dim", in_dim},
                      {"hidden", hidden},
                      {"out_dim", out_dim},
                      {"layers", layers},
                      {"dropout", dropout},
                      {"heads", heads},
                      {"out_heads", out_heads},
                      {"preaggregated", preaggregated},
                      {"predictor", name_of(predictor)},
                      {"embedding_dim", embedding_dim},
                      {"loss", name_of(loss == LossKind::kAuto ? LossKind::kCe : loss)}};
  if (hetero()) {
    j["type_dims"] = type_dims;
    j["relation_src"] = relation_src;
    j["relation_dst"] = relation_dst;
  }
  return j;
}

ModelConfig ModelConfig::from_json(const nlohmann::json& j) {
  ModelConfig c;
  try {
    c.model = parse_choice<ModelKind>(j.at("model").get<std::string>());
    c.in_dim = j.at("in_dim").get<int64_t>();
    c.hidden = j.at("hidden").get<int64_t>();
    c.out_dim = j.at("out_dim").get<int64_t>();
    c.layers = j.at("layers").get<int>();
    c.dropout = j.at("dropout").get<double>();
    c.heads = j.at("heads").get<int>();
    c.out_heads = j.at("out_heads").get<int>();
    c.preaggregated = j.value("preaggregated", false);  // absent in older checkpoints
    c.predictor = parse_choice<PredictorKind>(j.value("predictor", std::string("none")));
    c.embedding_dim = j.value("embedding_dim", int64_t{0});
    // absent before --loss: cross-entropy
    c.loss = parse_choice<LossKind>(j.value("loss", std::string("ce")));
    c.type_dims = j.value("type_dims", std::vector<int64_t>{});  // heterogeneous models only
    c.relation_src = j.value("relation_src", std::vector<int>{});
    c.relation_dst = j.value("relation_dst", std::vector<int>{});
  } catch (const nlohmann::json::exception& e) {
    DSP_THROW_T(FormatError, "bad model config {}: {}", j.dump(), e.what());
  } catch (const InvalidArgument& e) {  // a name outside a choice's table
    DSP_THROW_T(FormatError, "bad model config {}: {}", j.dump(), e.what());
  }
  return c;
}

namespace {

OptionTable<TrainConfig> make_train_table() {
  using options::value;
  using T = TrainConfig;
  // clang-format off
#define DSP_TRAIN(member) [](T& t) -> auto& { return t.member; }
  // clang-format on
  return {
      value<T>("--model", "model",
               "sage (default), gcn or gat; on a heterogeneous graph rgcn (R-GCN) or hsage (a "
               "GraphSAGE per relation, summed per node type)",
               DSP_TRAIN(model.model)),
      value<T>("--hidden", "hidden", "hidden width (GAT: per head; default 128)",
               DSP_TRAIN(model.hidden)),
      value<T>("--lr", "lr",
               "learning rate (default 0.01; 0.001 with --task link and --model rgcn or hsage)",
               DSP_TRAIN(lr)),
      value<T>("--weight-decay", "weight_decay",
               "weight decay: the L2 term of adam, sgd and adagrad, adamw's decoupled decay "
               "(default 5e-4; 0 with --task link)",
               DSP_TRAIN(weight_decay)),
      value<T>("--optimizer", "optimizer",
               "adam (default), sgd, adamw (Adam with decoupled weight decay, torch.optim.AdamW's) "
               "or adagrad; each one fused step over all parameters",
               DSP_TRAIN(optimizer)),
      value<T>("", "momentum", "sgd momentum (default 0)", DSP_TRAIN(momentum)),
      value<T>("--dropout", "dropout", "dropout (default 0.5)", DSP_TRAIN(model.dropout)),
      value<T>("--predictor", "predictor",
               "--task link: a pair's logit from its two output rows, dot (the default with "
               "--task link) or mlp (Linear, ReLU, Linear over their product); none for node tasks",
               DSP_TRAIN(model.predictor)),
      value<T>("--loss", "loss",
               "node classification's loss: ce (softmax cross-entropy), bce (binary "
               "cross-entropy: a 2-class task's one logit, label 1 positive, or a multi-label "
               "task's logit per label) or auto (default: ce for class labels, bce for "
               "multi-label ones)",
               DSP_TRAIN(model.loss)),
      value<T>("--heads", "heads", "GAT heads of hidden layers (default 1)",
               DSP_TRAIN(model.heads)),
      value<T>("", "out_heads", "GAT heads of the output layer (default 1)",
               DSP_TRAIN(model.out_heads)),
      value<T>("--normalize-features", "normalize_features",
               "the input features as the model sees them: none (default), row (each row over "
               "its sum, as PyG's NormalizeFeatures) or standard (each column minus its mean over "
               "the nodes, over its standard deviation)",
               DSP_TRAIN(normalize_features)),
      value<T>("--lr-schedule", "lr_schedule",
               "learning rate per epoch: none (default), cosine (annealed to 0 over --epochs), "
               "step (times --lr-gamma every --lr-step-size epochs) or plateau (times --lr-gamma "
               "after more than --lr-patience evaluations without a better validation accuracy)",
               DSP_TRAIN(lr_schedule)),
      value<T>("--lr-gamma", "lr_gamma", "step, plateau: the factor of a decay (default 0.1)",
               DSP_TRAIN(lr_gamma)),
      value<T>("--lr-step-size", "lr_step_size", "step: epochs between decays",
               DSP_TRAIN(lr_step_size)),
      value<T>("--lr-patience", "lr_patience",
               "plateau: evaluations without improvement before a decay (default 10)",
               DSP_TRAIN(lr_patience)),
      options::resumable(value<T>("--tf32", "tf32",
                                  "on a GPU, matrix products in TF32 (true, the default, where "
                                  "the GPU has it) or in full float32 (false)",
                                  DSP_TRAIN(tf32))),
  };
#undef DSP_TRAIN
}

}  // namespace

const OptionTable<TrainConfig>& train_config_table() {
  static const OptionTable<TrainConfig> table = make_train_table();
  return table;
}

void TrainConfig::validate() const {
  model.validate();
  DSP_CHECK_ARG(lr > 0, "learning rate must be positive, got {}", lr);
  DSP_CHECK_ARG(weight_decay >= 0, "weight decay must be >= 0, got {}", weight_decay);
  DSP_CHECK_ARG(momentum >= 0, "momentum must be >= 0, got {}", momentum);
  DSP_CHECK_ARG(momentum == 0 || optimizer == OptimizerKind::kSgd,
                "momentum is sgd's (--optimizer sgd); --optimizer {} takes none", optimizer);
  DSP_CHECK_ARG(num_threads >= 0, "thread count must be >= 0, got {}", num_threads);
  DSP_CHECK_ARG(normalize_features != FeatureNorm::kStandard || !model.hetero(),
                "--normalize-features standard with --model {}: per node type column statistics "
                "are not implemented; use row or none",
                model.model);
  DSP_CHECK_ARG(lr_gamma > 0 && lr_gamma <= 1, "--lr-gamma must be in (0, 1], got {}", lr_gamma);
  DSP_CHECK_ARG(lr_schedule != LrScheduleKind::kStep || lr_step_size >= 1,
                "--lr-schedule step needs --lr-step-size >= 1 (epochs between decays), got {}",
                lr_step_size);
  DSP_CHECK_ARG(lr_step_size >= 0 && lr_patience >= 0,
                "--lr-step-size and --lr-patience must be >= 0");
}

nlohmann::json TrainConfig::to_json() const {
  return {{"model", model.to_json()},
          {"optimizer", name_of(optimizer)},
          {"lr", lr},
          {"weight_decay", weight_decay},
          {"momentum", momentum},
          {"seed", seed},
          {"normalize_features", name_of(normalize_features)}};
}

void check_fanout_count(const std::vector<int>& fanouts, const ModelConfig& model) {
  DSP_CHECK_ARG(static_cast<int>(fanouts.size()) == model.layers,
                "{} fanouts given for a {}-layer model: give exactly one fanout per layer",
                fanouts.size(), model.layers);
}

void column_statistics(const Array& x, std::vector<float>* mean, std::vector<float>* inv_std,
                       const Array& scale) {
  const int64_t n = x.dim(0), f = x.dim(1);
  constexpr int64_t kChunk = 4096;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const float* row_scale = nullptr;
  const FeatureCodec codec = stored_feature_codec(x, scale, &row_scale);
  const auto* base = static_cast<const unsigned char*>(x.raw());
  const size_t rb = static_cast<size_t>(f) * dtype_size(x.dtype());
  auto at = [&](int64_t i, int64_t j) -> double {  // as the gather decodes it
    return decode_feature(codec, base + i * rb, j, row_scale ? row_scale[i] : 1.0f);
  };
  auto pass = [&](const std::vector<double>& centre) {  // sums of (x - centre)^k, k = 1 or 2
    const bool squares = !centre.empty();
    std::vector<double> part(static_cast<size_t>(chunks * f), 0.0), total(f, 0.0);
    parallel_for(0, chunks, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t c = lo; c < hi; ++c) {
        double* acc = part.data() + c * f;
        for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) {
          for (int64_t j = 0; j < f; ++j) {
            const double d = squares ? at(i, j) - centre[j] : at(i, j);
            acc[j] += squares ? d * d : d;
          }
        }
      }
    });
    for (int64_t c = 0; c < chunks; ++c)
      for (int64_t j = 0; j < f; ++j) total[j] += part[c * f + j];
    return total;
  };
  std::vector<double> mu = pass({});
  for (double& m : mu) m /= static_cast<double>(std::max<int64_t>(n, 1));
  const std::vector<double> var = pass(mu);
  mean->assign(mu.begin(), mu.end());
  inv_std->resize(f);
  for (int64_t j = 0; j < f; ++j) {
    const double sd = std::sqrt(var[j] / static_cast<double>(std::max<int64_t>(n, 1)));
    (*inv_std)[j] = sd > 0 ? static_cast<float>(1.0 / sd) : 1.0f;
  }
}

}  // namespace dsp
