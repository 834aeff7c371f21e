#pragma once
// The dense optimizer as a handful of launches over one flat tensor (LibTorch inside: included
// only by trainer.cpp and its tests).
//
// The model's parameters are made views of one contiguous tensor (`adopt`), the optimizer's state
// lives in tensors of the same length, and the gradient comes as the train step's flat bucket: so
// Adam's step is eight element-wise ops (AdamW's nine, Adagrad's four) and SGD's two to four,
// whatever the number of parameters (the loop over parameters issued that many per parameter,
// ~200 launches a GraphSAGE step on a GPU). The arithmetic is LibTorch's torch::optim::Adam /
// AdamW / Adagrad / SGD's (1.13), op for op, on every element (tests/train/test_flat_optimizer.cpp
// compares each with its LibTorch twin over steps). The state goes in and out
// of a checkpoint through the torch optimizer it was always written with (`save_into`,
// `load_from`), so checkpoints keep their format.
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "train/config.hpp"

namespace dsp {

struct FlatOptimizerOptions {
  OptimizerKind kind = OptimizerKind::kAdam;
  double lr = 0.01, weight_decay = 0, momentum = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // torch::optim::AdamOptions' defaults
  double adagrad_eps = 1e-10;                     // torch::optim::AdagradOptions' default
};

// The torch::optim optimizer of `c`'s kind over `params`: what a checkpoint holds the state in
// (FlatOptimizer::save_into / load_from).
std::unique_ptr<torch::optim::Optimizer> checkpoint_optimizer(std::vector<torch::Tensor>& params,
                                                              const TrainConfig& c);

class FlatOptimizer {
 public:
  // Moves `params` (same device and dtype float32) into one flat tensor and makes each a view
  // of it: later writes to either are writes to both.
  FlatOptimizer(std::vector<torch::Tensor>& params, FlatOptimizerOptions o);
  // One step from the flat gradient (numel entries, the parameters' order), on its device.
  void step(const torch::Tensor& grad);
  void set_lr(double lr) { o_.lr = lr; }
  double lr() const { return o_.lr; }
  const torch::Tensor& flat() const { return flat_; }
  // The state into / from the torch::optim optimizer of its kind over the same parameters (its
  // per-parameter state, as its own step would have left it): checkpoints.
  void save_into(torch::optim::Optimizer& opt) const;
  void load_from(torch::optim::Optimizer& opt);

 private:
  std::vector<torch::Tensor> params_;
  FlatOptimizerOptions o_;
  void adam_step(const torch::Tensor& grad);
  void adagrad_step(const torch::Tensor& grad);
  void sgd_step(const torch::Tensor& grad);

  // parameters; the moments of Adam and AdamW (m_, v_), SGD's momentum buffer or Adagrad's sum of
  // squares (m_)
  torch::Tensor flat_, m_, v_;
  int64_t steps_ = 0;  // steps taken (SGD: whether the momentum buffer is set)
};

}  // namespace dsp
