#pragma once
// LibTorch GNN models over the sampler's blocks (message-flow graphs).
//
// Every layer consumes one block: h_src [num_src, d_in] -> h_dst [num_dst, d_out], where the
// destination nodes are the prefix src[0, num_dst) (block.hpp). Aggregation runs over the block's
// CSR through the fused ops of aggregate.hpp.
//
//  * sage: h_dst' = W_self h_dst + W_neigh mean_{u -> v} h_u (+ b). Zero in-degree: the mean is 0.
//  * gcn:  DGL GraphConv norm='both' on the block with self loops (dst is a subset of src, so the
//          self loop of v is the edge v -> v in local ids): h_v' = sum_{u in N(v) + v}
//          h_u W / sqrt(deg_out(u) * deg_in(v)), degrees counted inside the block, self loop
//          included. For full-neighbourhood blocks this is Kipf & Welling's normalisation.
//  * gat:  multi-head attention (Velickovic et al.) over each dst's in-edges plus its self loop:
//          e_uv = LeakyReLU_0.2(a_l . W h_u + a_r . W h_v), softmax over u per (v, head), attention
//          dropout; hidden layers concatenate heads, the output layer averages them. ELU between
//          layers.
// With ModelConfig::preaggregated (PaGraph's PP, sage and gcn) the first layer reads rows
// [x_v | a_v] of the outermost block's sources, a_v aggregated over the whole in-neighbourhood
// when partitioning (layout/partition/partition.hpp: mean for sage, the normalised sum for gcn),
// and the batch has one block fewer: sage W_self x_v + W_neigh a_v + b, gcn W a_v + b. Dropout
// (train mode) as in DGL's models: on the hidden activations of GraphSAGE and GCN (after the ReLU,
// fused with it; not on the raw input features), on the input of every GAT layer and on GAT's
// attention weights. Masks come from keys drawn from the generator passed to forward, so training
// is reproducible per step (see TrainConfig::seed).
//
// Heterogeneous graphs (model_hetero.cpp; blocks over union ids with edge_types and src_types,
// csp/block.hpp): every node type enters with a hidden-width vector, a linear projection of its
// features (no activation) or, for a type without features, its learnable row; then per layer,
// with mean_r(v) the mean of h_u over v's in-neighbours u through relation r (0 without any):
//  * rgcn:  R-GCN (Schlichtkrull et al.; DGL's RelGraphConv with self_loop, no bases):
//           h_v' = W_0 h_v + sum_{r into v's type} W_r mean_r(v) + b.
//  * hsage: DGL's HeteroGraphConv(aggregate='sum') of one SAGEConv('mean') per relation:
//           h_v' = sum_{r into v's type} (W_self,r h_v + W_neigh,r mean_r(v) + b_r); a type no
//           relation enters gets 0 (DGL leaves it out of the layer's output).
// ReLU and dropout (fused) between layers; the logits are the last block's destinations'.
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "train/aggregate.hpp"
#include "train/config.hpp"

namespace dsp {

// One block of a heterogeneous batch split by node type and relation (hetero_block_tensors): the
// destinations of type t, and per relation r the block's edges of r as a CSR over the rows of
// its destination type (in dst_rows' order) into all the block's sources. Built on the host from
// Block::edge_types, once per batch.
struct HeteroBlockTensors {
  int64_t num_dst = 0, num_src = 0;
  std::vector<torch::Tensor> dst_rows;  // [T] int64: positions in [0, num_dst), ascending
  std::vector<BlockTensors> relations;  // [R]: num_dst = dst_rows[dst type].size(0)
};
// InvalidArgument when the block has no edge_types/src_types of the right sizes, a type or
// relation index outside the config's, or an edge of relation r into a node of another type
// than r's destination type.
HeteroBlockTensors hetero_block_tensors(const Block& b, const ModelConfig& cfg,
                                        const torch::Device& device = torch::kCPU);

// A heterogeneous batch's input: the blocks and, per node type t, the positions of blocks[0]'s
// sources of type t (`rows[t]`, int64) and their input rows `x[t]` ([rows, type_dims[t]]
// features, or [rows, hidden] learnable rows for a type without features).
struct HeteroInput {
  std::vector<HeteroBlockTensors> blocks;
  std::vector<torch::Tensor> rows, x;
};

class GnnModel : public torch::nn::Module {
 public:
  explicit GnnModel(ModelConfig cfg) : cfg_(std::move(cfg)) {}
  // blocks[0] is the input layer; x holds the features of blocks[0]'s source nodes (with
  // cfg.preaggregated: their [x | a] rows, and blocks[0] is the second layer's block). Returns
  // logits [blocks.back().num_dst, out_dim]. `gen` draws the dropout masks (training mode only);
  // null uses LibTorch's default generator of x's device.
  virtual torch::Tensor forward(const std::vector<BlockTensors>& blocks, torch::Tensor x,
                                at::Generator* gen = nullptr) = 0;
  // Layer `layer` alone in eval mode (no dropout) on one block, followed by what follows it in
  // forward (the activation between layers; GAT's head mean after the last): h [num_src, width of
  // layer's input] -> [num_dst, layer_width(layer)]. Layer-wise inference (train/inference.hpp)
  // composes forward from these; a pre-aggregated model has none (InvalidArgument).
  virtual torch::Tensor forward_layer(int layer, const BlockTensors& block, torch::Tensor h) = 0;
  // A heterogeneous model's forward (ModelConfig::hetero()): logits [blocks.back().num_dst,
  // out_dim]. InvalidArgument for the homogeneous models, and from the heterogeneous ones' forward
  // and forward_layer (full-neighbour inference has no per-type input there). With `layers` in
  // [1, cfg.layers): the first `layers` layers only, over as many blocks, the last one's output
  // after its activation (dsp embed's hidden layer).
  virtual torch::Tensor forward_hetero(const HeteroInput& in, at::Generator* gen = nullptr,
                                       int layers = -1);
  // Width of layer `layer`'s output as forward_layer returns it (GAT hidden: hidden * heads).
  int64_t layer_width(int layer) const;
  // Link prediction (ModelConfig::predictor dot or mlp): one logit per pair of output rows,
  // hs, hd [n, out_dim] -> [n]. InvalidArgument for a node classifier (predictor none).
  torch::Tensor score(const torch::Tensor& hs, const torch::Tensor& hd);
  // The mlp predictor's layers, registered after the GNN layers (make_model calls it once).
  void make_predictor();
  const ModelConfig& config() const { return cfg_; }

 protected:
  // Inverted dropout (train mode, p > 0), fused with a preceding ReLU when relu is set; its mask
  // comes from a key drawn from gen (null: the default CPU generator). In eval mode only the ReLU.
  torch::Tensor dropout(const torch::Tensor& x, double p, at::Generator* gen,
                        bool relu = false) const;
  // Checks the block count and the input width against the config (InvalidArgument).
  void check_inputs(const std::vector<BlockTensors>& blocks, const torch::Tensor& x) const;
  ModelConfig cfg_;
  torch::nn::Linear pred_hidden_{nullptr}, pred_out_{nullptr};
};

// InvalidArgument "unknown model 'x' (sage, gcn, gat, ...)" and the other config checks.
std::shared_ptr<GnnModel> make_model(const ModelConfig& cfg);
// rgcn and hsage (model_hetero.cpp); make_model calls it for them.
std::shared_ptr<GnnModel> make_hetero_model(const ModelConfig& cfg);

}  // namespace dsp
