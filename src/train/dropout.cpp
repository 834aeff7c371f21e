#include "train/dropout.hpp"

#include <ATen/Parallel.h>

#include "core/error.hpp"
#include "train/dropout_kernels.hpp"

#ifdef DSP_TRAIN_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "train/cuda/kernels.hpp"
#endif

namespace dsp {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kGrainBlocks = 4096;  // 32k elements per task

void run_forward(const drop::DropoutArgs& a, const torch::Device& dev) {
  const int64_t blocks = (a.n + 7) / 8;
  if (dev.is_cpu()) {
    at::parallel_for(0, blocks, kGrainBlocks, [&a](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) drop::dropout_block(a, b);
    });
    return;
  }
#ifdef DSP_TRAIN_CUDA
  if (dev.is_cuda()) {
    c10::cuda::CUDAGuard guard(dev);
    const cudaError_t err =
        cuda::launch_dropout(a, blocks, c10::cuda::getCurrentCUDAStream(dev.index()).stream());
    DSP_CHECK_T(Error, err == cudaSuccess, "dropout kernel on {}: {}", dev.str(),
                cudaGetErrorString(err));
    return;
  }
#endif
  DSP_THROW_T(NotSupported, "dropout on {}: this build has no kernels for that device", dev.str());
}

class DropoutFunction : public torch::autograd::Function<DropoutFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, double p, bool relu,
                               uint64_t key) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    auto mask = torch::empty(xc.sizes(), xc.options().dtype(torch::kUInt8));
    drop::DropoutArgs a;
    a.x = xc.data_ptr<float>();
    a.out = out.data_ptr<float>();
    a.mask = mask.data_ptr<uint8_t>();
    a.n = xc.numel();
    a.key = key;
    a.threshold = drop::threshold16(p);
    a.scale = static_cast<float>(1.0 / (1.0 - p));
    a.relu = relu;
    run_forward(a, xc.device());
    ctx->saved_data["mask"] = mask;
    ctx->saved_data["scale"] = static_cast<double>(a.scale);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto mask = ctx->saved_data["mask"].toTensor();
    const float scale = static_cast<float>(ctx->saved_data["scale"].toDouble());
    auto g = grads[0].contiguous();
    torch::Tensor gi;
    if (g.is_cpu()) {
      gi = torch::empty_like(g);
      const float* gp = g.data_ptr<float>();
      const uint8_t* mp = mask.data_ptr<uint8_t>();
      float* op = gi.data_ptr<float>();
      at::parallel_for(0, g.numel(), kGrainBlocks * 8, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) op[i] = gp[i] * (scale * static_cast<float>(mp[i]));
      });
    } else {
      gi = g * mask * scale;
    }
    return {gi, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor fused_dropout(const torch::Tensor& x, double p, bool relu, uint64_t key) {
  DSP_CHECK_ARG(p >= 0.0 && p < 1.0, "dropout probability must lie in [0, 1), got {}", p);
  DSP_CHECK_ARG(x.scalar_type() == torch::kFloat32, "dropout: expected a float32 tensor, got {}",
                c10::toString(x.scalar_type()));
  if (p == 0.0 || x.numel() == 0) return relu ? torch::relu(x) : x;
  return DropoutFunction::apply(x, p, relu, key);
}

}  // namespace dsp
