#pragma once
// The trainer's dropout as one fused autograd op: inverted dropout, optionally fused with the ReLU
// before it, with masks drawn by dropout_kernels.hpp from an explicit 64-bit key (reproducible per
// step, independent of threads and device). One pass over x forward (output + a byte mask), one
// over the gradient backward.
#include <torch/torch.h>

#include <cstdint>

namespace dsp {

// out = (relu ? max(x, 0) : x) * keep / (1 - p) with keep ~ Bernoulli(1 - p) per element (p
// quantised to 1/65536); differentiable in x. p in [0, 1); p == 0 gives relu(x) or x itself.
torch::Tensor fused_dropout(const torch::Tensor& x, double p, bool relu, uint64_t key);

}  // namespace dsp
