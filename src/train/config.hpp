#pragma once
// Model and training configuration. Torch-free on purpose: the CLI and the pipeline include this
// (and trainer.hpp) without paying for <torch/torch.h>.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/choice.hpp"
#include "core/device.hpp"
#include "core/options.hpp"
#include "graph/array.hpp"
#include "layout/partition/preaggregation.hpp"

namespace dsp {

// The choices of the model and the optimiser (core/choice.hpp: each names table written once, in
// config.cpp).
enum class ModelKind { kSage, kGcn, kGat, kRgcn, kHsage };
enum class PredictorKind { kNone, kDot, kMlp };
enum class LossKind { kAuto, kCe, kBce };
enum class OptimizerKind { kAdam, kSgd, kAdamW, kAdagrad };
enum class FeatureNorm { kNone, kRow, kStandard };
enum class LrScheduleKind { kNone, kCosine, kStep, kPlateau };
const Names<ModelKind>& names_of(ModelKind);
const Names<PredictorKind>& names_of(PredictorKind);
const Names<LossKind>& names_of(LossKind);
const Names<OptimizerKind>& names_of(OptimizerKind);
const Names<FeatureNorm>& names_of(FeatureNorm);
const Names<LrScheduleKind>& names_of(LrScheduleKind);

struct ModelConfig {
  // On heterogeneous graphs "rgcn" (R-GCN) or "hsage" (a GraphSAGE per relation, summed per
  // destination type; model_hetero.cpp), whose in_dim is 0 (see type_dims).
  ModelKind model = ModelKind::kSage;  // sage (GraphSAGE, mean aggregator), gcn, gat
  int64_t in_dim = 0;          // feature dimension
  int64_t hidden = 128;        // width of every hidden layer; for GAT: per head (DGL/PyG style),
                               // so a hidden GAT layer outputs hidden * heads
  int64_t out_dim = 0;         // number of classes
  int layers = 2;              // == number of blocks per batch == number of fanouts
  double dropout = 0.5;        // on the input of every layer (and on GAT attention weights)
  int heads = 1;               // GAT heads of the hidden layers (concatenated)
  int out_heads = 1;           // GAT heads of the output layer (averaged)
  // PaGraph's pre-aggregation (sage, gcn): the first layer reads [x_v | a_v] rows (2 in_dim wide,
  // a_v aggregated over v's whole in-neighbourhood when partitioning) instead of a block, so a
  // batch carries layers - 1 blocks and the rows of the outermost one's sources.
  bool preaggregated = false;
  // Link prediction: how a pair of output rows becomes a logit. "none" (node classification:
  // the output rows are the logits), "dot" (h_u . h_v) or "mlp" (DGL's example predictor:
  // Linear(out_dim, out_dim), ReLU, Linear(out_dim, 1) over h_u * h_v; its parameters follow the
  // layers').
  PredictorKind predictor = PredictorKind::kNone;
  // Learnable node embeddings (layout/store/embedding_table.hpp) concatenated after the features:
  // in_dim counts them (in_dim = feature columns + embedding_dim).
  int64_t embedding_dim = 0;
  // Node classification's loss: "ce" (softmax cross-entropy over out_dim classes), "bce" (binary
  // cross-entropy with logits: one logit for a 2-class task, label 1 positive; one per label
  // column of a multi-label task), or "auto" until a job resolves it from its labels (ce for int64
  // labels, bce for multi-label ones). A trainer takes "auto" as ce. Checkpoints record it.
  LossKind loss = LossKind::kAuto;
  // Heterogeneous models (graph/hetero.hpp's schema): every node type's input width, 0 for a type
  // without features, whose nodes enter with learnable rows of `hidden` columns (embedding_dim
  // is then `hidden`); every relation's source and destination type. Empty otherwise.
  std::vector<int64_t> type_dims;
  std::vector<int> relation_src, relation_dst;

  bool hetero() const { return is_hetero_model(model); }
  static bool is_hetero_model(ModelKind m) {
    return m == ModelKind::kRgcn || m == ModelKind::kHsage;
  }
  int num_types() const { return static_cast<int>(type_dims.size()); }
  int num_relations() const { return static_cast<int>(relation_src.size()); }
  bool bce() const { return loss == LossKind::kBce; }
  int num_blocks() const { return preaggregated ? layers - 1 : layers; }
  // The pre-aggregation kind (layout/partition/preaggregation.hpp) of the model's first layer:
  // mean (sage), gcn (gcn); none for any other.
  std::optional<Preaggregation> preaggregation() const;
  int64_t input_width() const { return preaggregated ? 2 * in_dim : in_dim; }
  // Throws InvalidArgument naming the field ("unknown model 'x' (sage, gcn, gat, rgcn, hsage)",
  // ...).
  void validate() const;
  nlohmann::json to_json() const;
  static ModelConfig from_json(const nlohmann::json& j);  // FormatError on missing/bad fields
};

struct TrainConfig {
  ModelConfig model;
  OptimizerKind optimizer = OptimizerKind::kAdam;
  double lr = 0.01;
  double weight_decay = 5e-4;
  double momentum = 0.0;  // sgd only (refused with the others)
  // Seeds parameter initialisation and every dropout mask: the mask of a step is a pure function
  // of (seed, epoch, batch, rank), so a resumed run draws exactly the masks of an uninterrupted
  // one.
  uint64_t seed = 0;
  // LibTorch intra-op threads; 0 leaves LibTorch's setting alone. The CPU build gives each rank
  // cores / ranks (DESIGN.md), which the caller computes.
  int num_threads = 0;
  // Where the replica lives: the CPU or a GPU (a CUDA-enabled LibTorch); a job's trainer lives on
  // its rank's device (RankRuntime::device).
  Device device = Device::cpu();
  // The input features as the model sees them: "none"; "row", each row divided by its sum
  // (clamped at 1), as PyG's NormalizeFeatures; "standard", each column minus its mean over the
  // graph's nodes, over its standard deviation (1 for a constant column), with the statistics
  // below (in_dim entries each; a job computes them from the data: column_statistics).
  FeatureNorm normalize_features = FeatureNorm::kNone;
  // The learning rate per epoch (train/lr_schedule.hpp): none, cosine, step (every lr_step_size
  // epochs times lr_gamma) or plateau (times lr_gamma after more than lr_patience evaluations
  // without a better validation accuracy).
  LrScheduleKind lr_schedule = LrScheduleKind::kNone;
  double lr_gamma = 0.1;
  int lr_step_size = 0;
  int lr_patience = 10;
  std::vector<float> feature_mean, feature_inv_std;
  // Matrix products in TF32 on GPUs that have it (LibTorch's cuBLAS and cuDNN switches, set by
  // the trainer for its process); false keeps them in full float32. Nothing on the CPU.
  bool tf32 = true;

  void validate() const;
  nlohmann::json to_json() const;
};

// The model's and optimiser's options a user sets (core/options.hpp): model, hidden, heads,
// out_heads, dropout, optimizer, lr, weight_decay, momentum, normalize_features, lr_schedule,
// lr_gamma, lr_step_size, lr_patience, tf32. dsp train's table
// embeds them (JobConfig::train); TrainConfig::validate is their one check.
const OptionTable<TrainConfig>& train_config_table();

// Column means and inverse standard deviations (1 for a constant column) of a partition's [N, F]
// stored features (normalize_features standard) as the gather decodes them (int8: with `scale`,
// PartitionData::feature_scale), in double, summed per fixed chunk of rows in order: the same on
// every rank and for any thread count.
void column_statistics(const Array& x, std::vector<float>* mean, std::vector<float>* inv_std,
                       const Array& scale = Array());

// One fanout per layer of `model` (each fanout's value is csp's check_fanouts). InvalidArgument
// otherwise.
void check_fanout_count(const std::vector<int>& fanouts, const ModelConfig& model);

}  // namespace dsp
