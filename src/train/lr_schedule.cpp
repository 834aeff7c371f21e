#include "train/lr_schedule.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace dsp {

LrSchedule::LrSchedule(const TrainConfig& c, int epochs)
    : kind_(c.lr_schedule),
      base_(c.lr),
      gamma_(c.lr_gamma),
      step_size_(std::max(1, c.lr_step_size)),
      patience_(c.lr_patience),
      epochs_(std::max(1, epochs)),
      current_(c.lr) {}

double LrSchedule::lr(int epoch) const {
  constexpr double kPi = 3.14159265358979323846;
  if (kind_ == LrScheduleKind::kCosine) return base_ * (1 + std::cos(kPi * epoch / epochs_)) / 2;
  if (kind_ == LrScheduleKind::kStep) return base_ * std::pow(gamma_, epoch / step_size_);
  if (kind_ == LrScheduleKind::kPlateau) return current_;
  return base_;
}

void LrSchedule::observe(double val_acc) {
  if (kind_ != LrScheduleKind::kPlateau) return;
  if (val_acc > best_ * (1 + 1e-4)) {
    best_ = val_acc;
    bad_ = 0;
  } else if (++bad_ > patience_) {
    current_ *= gamma_;
    bad_ = 0;
  }
}

nlohmann::json LrSchedule::state() const {
  return {{"lr", current_}, {"best", best_}, {"bad", bad_}};
}

void LrSchedule::restore(const nlohmann::json& s) {
  try {
    current_ = s.at("lr").get<double>();
    best_ = s.at("best").get<double>();
    bad_ = s.at("bad").get<int>();
  } catch (const nlohmann::json::exception&) {
    DSP_THROW_T(FormatError, "checkpoint: malformed lr_schedule state {}", s.dump());
  }
}

}  // namespace dsp
