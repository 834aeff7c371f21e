// The trainer on the GPU (CUDA build with a CUDA LibTorch; run by scripts/gpu/check.sh):
// GraphSAGE on Cora trained with device "cuda" reaches the CPU build's accuracy band (the CPU
// test, tests/train CoraAccuracy, asks a 3-seed mean test accuracy >= 0.78). Skips without a GPU.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cstdio>

#include "ccc/communicator.hpp"
#include "train/cora_batches.hpp"
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

}  // namespace
}  // namespace dsp
