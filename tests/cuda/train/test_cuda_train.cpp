// The trainer on the GPU (CUDA build with a CUDA LibTorch; run by scripts/gpu/check.sh):
// GraphSAGE on Cora trained with device "cuda" reaches the CPU build's accuracy band (the CPU
// test, tests/train CoraAccuracy, asks a 3-seed mean test accuracy >= 0.78); a job's step in
// steady state issues no host synchronisation (LibTorch's sync debug mode set to error) and
// trains what the CPU trains (the same dropout masks, float32 without TF32). Skips without a GPU.
#include <c10/cuda/CUDAFunctions.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cmath>
#include <cstdio>

#include "ccc/communicator.hpp"
#include "train/cora_batches.hpp"
#include "train/device_io.hpp"
#include "train/trainer.hpp"

namespace dsp {
namespace {

using namespace dsp::test;

class CudaCoraAccuracy : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaCoraAccuracy, ThreeSeedsReach78PercentOnGpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible to LibTorch";
  const CoraData& d = cora();
  auto comm = make_communicator("self");
  CoraRunOptions o;
  double sum = 0;
  for (uint64_t seed : {1, 2, 3}) {
    TrainConfig cfg = cora_config(GetParam(), seed);
    cfg.device = Device::cuda(0);
    Trainer t(cfg, *comm);
    CoraRunResult r = train_cora(t, d, o);
    std::printf("[cora-gpu] model=%s seed=%llu best_val=%.3f (epoch %d) test=%.3f\n",
                GetParam().c_str(), (unsigned long long)seed, r.best_val, r.best_epoch,
                r.test_at_best);
    sum += r.test_at_best;
  }
  std::printf("[cora-gpu] model=%s mean test=%.4f\n", GetParam().c_str(), sum / 3);
  EXPECT_GE(sum / 3, 0.78);
}

// Named by model (Models/CudaCoraAccuracy.ThreeSeedsReach78PercentOnGpu/sage), so a filter can
// pick one (scripts/gpu/check.sh runs sage first).
INSTANTIATE_TEST_SUITE_P(Models, CudaCoraAccuracy, ::testing::Values("sage", "gcn", "gat"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

std::vector<LoadedBatch> cora_steps(const CoraData& d, int n) {
  std::vector<LoadedBatch> out;
  for (int64_t s = 0; s < n; ++s) {
    std::vector<int64_t> seeds(d.train.begin() + 32 * s, d.train.begin() + 32 * s + 32);
    out.push_back(load_batch(d, sample_batch(d.ds.graph, seeds, {10, 10}, 1, 0, s)));
  }
  return out;
}

// Two warm-up steps (allocators and pinned blocks settle), then steps under LibTorch's sync
// debug mode at "error": any blocking copy, item() or data-dependent size inside a step throws.
// The trainer's own count (device_io().traffic()) agrees: no read, no wait.
TEST(CudaTrainer, AStepNeverWaitsForTheHost) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible to LibTorch";
  const CoraData& d = cora();
  auto comm = make_communicator("self");
  for (const char* model : {"sage", "gcn", "gat"}) {
    TrainConfig cfg = cora_config(model, 2);
    cfg.device = Device::cuda(0);
    Trainer t(cfg, *comm);
    const auto batches = cora_steps(d, 4);
    t.step(batches[0], true);
    t.step(batches[1], true);
    const HostTraffic before = t.device_io().traffic();
    c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_ERROR);
    try {
      t.step(batches[2], true);
      t.step(batches[3], true);
    } catch (const std::exception& e) {
      c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
      FAIL() << model << ": a step synchronised with the host: " << e.what();
    }
    c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
    const HostTraffic steps = t.device_io().traffic() - before;
    EXPECT_EQ(steps.reads, 0) << model;
    EXPECT_EQ(steps.syncs, 0) << model;
    EXPECT_EQ(t.take_tally().steps, 4) << model;
  }
}

// The same four steps on the GPU and on the CPU (TF32 off; SGD, whose update is linear in the
// gradient, where Adam's would magnify the sign of a gradient at rounding level): losses and
// parameters agree to float32 rounding (the masks are drawn from the same host keys on both).
TEST(CudaTrainer, StepsTrainWhatTheCpuTrains) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible to LibTorch";
  const CoraData& d = cora();
  auto comm = make_communicator("self");
  for (const char* model : {"sage", "gcn", "gat"}) {
    TrainConfig cfg = cora_config(model, 3);
    cfg.tf32 = false;
    cfg.optimizer = OptimizerKind::kSgd;
    cfg.lr = 0.1;
    Trainer cpu(cfg, *comm);
    cfg.device = Device::cuda(0);
    Trainer gpu(cfg, *comm);
    for (const auto& b : cora_steps(d, 4)) {
      const float lc = cpu.train_step(b), lg = gpu.train_step(b);
      EXPECT_NEAR(lc, lg, 1e-4 * std::max(1.0f, std::abs(lc))) << model;
    }
    const auto pc = cpu.state().flat_parameters(), pg = gpu.state().flat_parameters();
    ASSERT_EQ(pc.size(), pg.size());
    double worst = 0;
    for (size_t i = 0; i < pc.size(); ++i) worst = std::max(worst, double(std::abs(pc[i] - pg[i])));
    EXPECT_LT(worst, 1e-3) << model;
    std::printf("[gpu-vs-cpu] model=%s max parameter difference %.3g\n", model, worst);
  }
}

}  // namespace
}  // namespace dsp
