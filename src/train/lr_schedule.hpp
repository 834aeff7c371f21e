#pragma once
// The learning rate of every epoch (dsp train --lr-schedule), as PyTorch's schedulers compute it:
//   none     the base rate throughout
//   cosine   CosineAnnealingLR over the job's epochs: lr * (1 + cos(pi * epoch / epochs)) / 2
//   step     StepLR: lr * gamma^floor(epoch / step_size)
//   plateau  ReduceLROnPlateau on validation accuracy (mode max, relative threshold 1e-4): after
//            more than `patience` evaluations without improvement the rate is multiplied by gamma
// cosine and step are functions of the epoch; plateau's state (best, evaluations without
// improvement, the rate) is the job's to checkpoint (state/restore), so a resumed job continues
// with the rates of an uninterrupted one. Torch-free.
#include <nlohmann/json.hpp>

#include "train/config.hpp"

namespace dsp {

class LrSchedule {
 public:
  LrSchedule() = default;
  // `c`: lr, lr_schedule, lr_gamma, lr_step_size, lr_patience (TrainConfig::validate checks
  // them); `epochs`: the job's.
  LrSchedule(const TrainConfig& c, int epochs);
  double lr(int epoch) const;    // the rate to train epoch `epoch` (0-based) with
  void observe(double val_acc);  // plateau: an evaluation's validation accuracy
  nlohmann::json state() const;
  void restore(const nlohmann::json& state);  // FormatError naming the field

 private:
  LrScheduleKind kind_ = LrScheduleKind::kNone;
  double base_ = 0.01, gamma_ = 0.1;
  int step_size_ = 1, patience_ = 0, epochs_ = 1;
  double current_ = 0.01, best_ = -1;  // plateau
  int bad_ = 0;                        // plateau: evaluations without improvement
};

}  // namespace dsp
