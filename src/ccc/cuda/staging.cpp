#include "ccc/cuda/staging.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "core/cuda/check.hpp"

namespace dsp {
namespace {

class CudaStaging final : public DeviceStaging {
 public:
  explicit CudaStaging(int device) : device_(device) {}
  ~CudaStaging() override {
    for (Pinned& b : buf_) {
      if (b.ptr) DSP_CUDA_CHECK_NO_THROW(cudaFreeHost(b.ptr));
    }
  }
  void* host(int which, size_t bytes) override {
    Pinned& b = buf_[which];
    if (bytes > b.cap) {
      const size_t cap = std::max(bytes, b.cap + b.cap / 2);
      cuda::CudaDeviceGuard g(device_);
      if (b.ptr) DSP_CUDA_CHECK(cudaFreeHost(b.ptr));
      b.ptr = nullptr;
      b.cap = 0;
      DSP_CUDA_CHECK(cudaHostAlloc(&b.ptr, cap, cudaHostAllocPortable));
      b.cap = cap;
    }
    return b.ptr;
  }
  void to_host(void* host, const void* device, size_t bytes) override {
    cuda::CudaDeviceGuard g(device_);
    DSP_CUDA_CHECK(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost));
  }
  void to_device(void* device, const void* host, size_t bytes) override {
    cuda::CudaDeviceGuard g(device_);
    DSP_CUDA_CHECK(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice));
  }

 private:
  struct Pinned {
    void* ptr = nullptr;
    size_t cap = 0;
  };
  int device_;
  Pinned buf_[2];
};

}  // namespace

std::unique_ptr<DeviceStaging> make_cuda_staging(int device) {
  return std::make_unique<CudaStaging>(device);
}

}  // namespace dsp
