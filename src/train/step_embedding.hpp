#pragma once
// Learnable node embeddings in the train step (ModelConfig::embedding_dim > 0, attached by
// Trainer::embedding().attach): the table's rows of a batch's input nodes gathered into the batch
// before its step, the gradient of those rows kept after the backward pass, and the table's
// sparse update once the step's global count is known. Trainer's part (trainer_impl.hpp);
// private to src/train.
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "csp/block.hpp"
#include "layout/store/embedding_table.hpp"
#include "train/config.hpp"
#include "train/device_io.hpp"
#include "train/trainer.hpp"

namespace dsp {

class StepEmbedding {
 public:
  // `model`, `io` and `device` are the trainer's, alive as long as this.
  StepEmbedding(const ModelConfig& model, DeviceIo& io, const torch::Device& device)
      : model_(model), io_(io), device_(device) {}
  // InvalidArgument when the table's width is not the model's embedding_dim.
  void attach(EmbeddingTable* table, Trainer::EmbeddingRowMap rows = {});
  bool attached() const { return table_ != nullptr; }
  // The table lives in device memory and so does the model: rows and gradients stay there.
  bool on_trainer_device() const;
  // Collective: the rows of the batch's input nodes (heterogeneous models: of the featureless
  // types' input nodes, type by type) into batch.embedding or batch.device_embedding.
  void gather(LoadedBatch& batch);
  // Before a step: nothing kept.
  void clear();
  // After the backward pass: the batch's rows' ids and the gradient of `leaf` (the rows as the
  // model read them), where the table takes it (its device's memory, else the host: a read).
  void keep_gradient(const LoadedBatch& batch, const torch::Tensor& leaf);
  // Collective (every rank, every step): the kept gradients to the rows' owners, scaled by
  // 1 / global_count (0: nothing learnt).
  void apply(float global_count);

 private:
  const ModelConfig& model_;
  DeviceIo& io_;
  const torch::Device& device_;
  EmbeddingTable* table_ = nullptr;
  Trainer::EmbeddingRowMap rows_;  // heterogeneous models: a featureless node's row in the table
  std::vector<int64_t> ids_;       // the last step's input rows
  torch::Tensor grad_;             // their gradients [ids, dim] where the table reads them
};

}  // namespace dsp
