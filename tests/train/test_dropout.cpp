// The fused dropout: mask statistics, scaling, the fused ReLU, its gradient, and masks that are a
// pure function of (key, element) whatever the thread count.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "core/error.hpp"
#include "train/dropout.hpp"
#include "train/dropout_kernels.hpp"

namespace dsp {
namespace {

TEST(Dropout, KeepsOneMinusPOfTheElementsAndScalesThem) {
  const int64_t n = 1 << 20;
  auto x = torch::ones({n / 64, 64});
  for (double p : {0.1, 0.5, 0.9}) {
    auto y = fused_dropout(x, p, false, 42);
    const double kept = (y != 0).sum().item<int64_t>();
    // Binomial(n, 1 - p): 5 standard deviations.
    const double sd = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(kept, n * (1 - p), 5 * sd) << "p=" << p;
    auto nz = y.masked_select(y != 0);
    EXPECT_TRUE(torch::allclose(nz, torch::full_like(nz, 1.0 / (1.0 - p)))) << "p=" << p;
  }
  EXPECT_TRUE(fused_dropout(x, 0.0, false, 1).equal(x));
}

TEST(Dropout, NeighbouringElementsAreIndependent) {
  // The eight elements of one Philox block come from distinct 16-bit halves: pairs (i, i + 1)
  // are both kept a quarter of the time at p = 0.5.
  const int64_t n = 1 << 20;
  auto y = fused_dropout(torch::ones({n}), 0.5, false, 7) != 0;
  const double both = (y.narrow(0, 0, n - 1) & y.narrow(0, 1, n - 1)).sum().item<int64_t>();
  EXPECT_NEAR(both / (n - 1), 0.25, 5 * std::sqrt(0.25 * 0.75 / n));
}

TEST(Dropout, MaskIsAPureFunctionOfKeyAndElement) {
  auto x = torch::randn({1000, 37});
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  auto one = fused_dropout(x, 0.3, true, 99);
  at::set_num_threads(2);
  auto two = fused_dropout(x, 0.3, true, 99);
  at::set_num_threads(threads);
  EXPECT_TRUE(one.equal(two));
  EXPECT_FALSE(one.equal(fused_dropout(x, 0.3, true, 100)));
  // Element i follows bit i % 8 of block i / 8.
  const uint32_t t = drop::threshold16(0.3);
  auto flat = fused_dropout(torch::ones({1000 * 37}), 0.3, false, 99);
  for (int64_t i : {0, 1, 7, 8, 12345, 36999}) {
    const bool kept = (drop::keep_bits8(99, i / 8, t) >> (i % 8)) & 1u;
    EXPECT_EQ(kept, flat[i].item<float>() != 0.f) << i;
  }
}

TEST(Dropout, FusedReluAndGradient) {
  torch::manual_seed(0);
  auto x = torch::randn({300, 50}).set_requires_grad(true);
  auto y = fused_dropout(x, 0.4, true, 5);
  auto kept = fused_dropout(torch::ones({300, 50}), 0.4, false, 5) != 0;
  // Same key, same mask: y = relu(x) * kept / 0.6.
  auto expect = torch::relu(x.detach()) * kept / 0.6;
  EXPECT_TRUE(torch::allclose(y, expect));
  auto w = torch::randn({300, 50});
  (y * w).sum().backward();
  auto grad_expect = w * kept * (x.detach() > 0) / 0.6;
  EXPECT_TRUE(torch::allclose(x.grad(), grad_expect));
  // p = 0: the ReLU alone.
  EXPECT_TRUE(fused_dropout(x.detach(), 0.0, true, 5).equal(torch::relu(x.detach())));
}

TEST(Dropout, RejectsBadInputs) {
  EXPECT_THROW(fused_dropout(torch::ones({4}), 1.0, false, 1), InvalidArgument);
  EXPECT_THROW(fused_dropout(torch::ones({4}, torch::kFloat64), 0.5, false, 1), InvalidArgument);
}

}  // namespace
}  // namespace dsp
