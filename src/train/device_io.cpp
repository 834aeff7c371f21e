#include "train/device_io.hpp"

#ifdef DSP_TRAIN_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace dsp {

torch::Tensor DeviceIo::read(const torch::Tensor& t) {
  traffic_.syncs += 1;
  traffic_.add_read(static_cast<size_t>(t.numel()) * t.element_size());
  return t.to(torch::kCPU).contiguous();
}

void DeviceIo::wait() {
  traffic_.syncs += 1;
#ifdef DSP_TRAIN_CUDA
  if (device_.is_cuda()) c10::cuda::getCurrentCUDAStream(device_.index()).synchronize();
#endif
}

torch::Tensor upload_to_device(const torch::Tensor& host, const torch::Device& device) {
  if (device.is_cpu() || !host.is_cpu()) return host.to(device);
  // A copy from pageable memory waits for the stream (LibTorch synchronises a blocking copy);
  // from pinned memory it is queued, and the pinned block is reused only after it.
  return host.pin_memory().to(device, /*non_blocking=*/true);
}

}  // namespace dsp
