#pragma once
// Trainer's state (trainer.hpp's pimpl), shared by its two files: the step (trainer.cpp) and the
// checkpoints (trainer_checkpoint.cpp). Private to src/train.
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "layout/store/embedding_table.hpp"
#include "train/device_io.hpp"
#include "train/flat_optimizer.hpp"
#include "train/model.hpp"
#include "train/trainer.hpp"

namespace dsp {

struct Trainer::Impl {
  std::shared_ptr<GnnModel> model;
  // The step runs on `flat` (one flat tensor, its parameters views of it); `optimizer`, LibTorch's
  // over the same parameters, carries its state in and out of checkpoints in their format.
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<FlatOptimizer> flat;
  DeviceIo io{torch::kCPU};
  // Since the last take_tally: the steps' mean losses and train hits summed on the device
  // (float64 [2]), the steps and the predictions counted on the host.
  torch::Tensor tally;
  int64_t tally_steps = 0, tally_total = 0;
  std::vector<torch::Tensor> params;  // registration order
  std::vector<std::string> names;
  int64_t numel = 0;
  torch::Device device = torch::kCPU;
  torch::Tensor mean, inv_std;  // normalize_features standard: [in_dim] on the device
  // Learnable embeddings: the table, and the last step's input ids and their rows' gradients
  // (host), applied once the step's global count is known.
  EmbeddingTable* table = nullptr;
  EmbeddingRowMap emb_rows;  // heterogeneous models: a featureless node's row in the table
  std::vector<int64_t> emb_ids;
  torch::Tensor emb_grad;  // [ids, dim] where the table reads it (table_on_trainer_device)
  float last_count = 0;    // the last step's global count of seeds (or pairs)
};

}  // namespace dsp
