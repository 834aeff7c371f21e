#pragma once
// Trainer's state and its step's parts (trainer.hpp's pimpl), shared by its two files: the step
// (trainer.cpp) and the checkpoints (trainer_checkpoint.cpp). Private to src/train.
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "layout/store/embedding_table.hpp"
#include "train/device_io.hpp"
#include "train/flat_optimizer.hpp"
#include "train/model.hpp"
#include "train/step_embedding.hpp"
#include "train/trainer.hpp"

namespace dsp {

struct Trainer::Impl {
  explicit Impl(Trainer& t) : owner(t) {}

  // The step's parts (trainer.cpp). The model's output for a batch in the mode set; the forward
  // and backward of one batch into a gradient row; the optimizer's step from the summed rows;
  // the symmetric and the slots' steps (their figures [mean loss, hits] on the device); the
  // tally's sum; the bucket's all-reduce.
  torch::Tensor run_model(const LoadedBatch& batch, at::Generator* gen, torch::Tensor* emb_leaf);
  void backward_into(const LoadedBatch& batch, uint64_t stream, torch::Tensor row,
                     torch::Tensor* hits, int64_t* total);
  torch::Tensor apply_step(torch::Tensor sum, bool local);
  torch::Tensor symmetric_step(const LoadedBatch& batch, bool count, int64_t* total);
  torch::Tensor slots_step(const std::vector<SlotBatch>& batches, int slots, bool count,
                           int64_t* total);
  void add_to_tally(const torch::Tensor& figures);
  void all_reduce_bucket(torch::Tensor& bucket);

  Trainer& owner;  // its configuration, communicator, step count and times
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
  // Learnable embeddings (Trainer::embedding().attach): the table's rows in the step.
  StepEmbedding embedding{owner.cfg_.model, io, device};
  float last_count = 0;    // the last step's global count of seeds (or pairs)
};

}  // namespace dsp
