// The learning rate per epoch: PyTorch's CosineAnnealingLR (eta_min 0), StepLR and
// ReduceLROnPlateau (mode max, relative threshold 1e-4, cooldown 0) by their definitions.
#include <gtest/gtest.h>

#include <cmath>

#include "train/lr_schedule.hpp"

namespace dsp {
namespace {

TrainConfig schedule(const char* kind) {
  TrainConfig c;
  c.lr = 0.1;
  c.lr_schedule = parse_choice<LrScheduleKind>(kind);
  c.lr_gamma = 0.5;
  c.lr_step_size = 3;
  c.lr_patience = 1;
  return c;
}

TEST(LrSchedule, NoneCosineAndStepAreFunctionsOfTheEpoch) {
  const LrSchedule none(schedule("none"), 10);
  const LrSchedule cosine(schedule("cosine"), 10);
  const LrSchedule step(schedule("step"), 10);
  for (int e = 0; e < 10; ++e) {
    EXPECT_DOUBLE_EQ(none.lr(e), 0.1);
    EXPECT_DOUBLE_EQ(cosine.lr(e), 0.1 * (1 + std::cos(M_PI * e / 10)) / 2);
    EXPECT_DOUBLE_EQ(step.lr(e), 0.1 * std::pow(0.5, e / 3));
  }
  EXPECT_DOUBLE_EQ(cosine.lr(0), 0.1);
  EXPECT_DOUBLE_EQ(cosine.lr(5), 0.05);
  EXPECT_DOUBLE_EQ(step.lr(2), 0.1);
  EXPECT_DOUBLE_EQ(step.lr(3), 0.05);
  EXPECT_DOUBLE_EQ(step.lr(9), 0.0125);
}

TEST(LrSchedule, PlateauDecaysAfterMoreThanPatienceEvaluationsWithoutImprovement) {
  LrSchedule p(schedule("plateau"), 10);
  // patience 1: the second evaluation in a row without improvement decays (num_bad > patience).
  const double vals[] = {0.50, 0.60, 0.60, 0.59, 0.70, 0.70000001, 0.65, 0.65, 0.80};
  const double want[] = {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025};
  for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); ++i) {
    SCOPED_TRACE(i);
    p.observe(vals[i]);
    EXPECT_DOUBLE_EQ(p.lr(static_cast<int>(i) + 1), want[i]);
  }
  // Its state restores exactly: the same rates after the same evaluations.
  LrSchedule q(schedule("plateau"), 10);
  q.restore(p.state());
  p.observe(0.1);
  q.observe(0.1);
  EXPECT_DOUBLE_EQ(q.lr(0), p.lr(0));
  EXPECT_THROW(q.restore(nlohmann::json{{"lr", 1}}), FormatError);
}

TEST(LrSchedule, OptionsAreChecked) {
  TrainConfig c;
  c.model.in_dim = 4;
  c.model.out_dim = 2;
  c.validate();
  EXPECT_THROW(parse_choice<LrScheduleKind>("linear"), InvalidArgument);
  c.lr_schedule = LrScheduleKind::kStep;
  try {
    c.validate();
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(),
                 "--lr-schedule step needs --lr-step-size >= 1 (epochs between decays), got 0");
  }
  c.lr_step_size = 2;
  c.lr_gamma = 1.5;
  EXPECT_THROW(c.validate(), InvalidArgument);
}

}  // namespace
}  // namespace dsp
