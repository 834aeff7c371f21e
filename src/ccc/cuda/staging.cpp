#include "ccc/cuda/staging.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "core/cuda/check.hpp"

namespace dsp {
namespace {

// `alloc`'s memory page-locked for `device` (unlocked before it is released), or cudaHostAlloc's.
HostAlloc pinned(int device, HostAlloc alloc) {
  return [device, alloc = std::move(alloc)](size_t bytes) -> std::shared_ptr<void> {
    cuda::CudaDeviceGuard g(device);
    if (!alloc) {
      void* p = nullptr;
      DSP_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
      return std::shared_ptr<void>(p, [](void* q) { DSP_CUDA_CHECK_NO_THROW(cudaFreeHost(q)); });
    }
    std::shared_ptr<void> mem = alloc(bytes);
    DSP_CHECK(mem != nullptr, "staging: cannot allocate {} bytes of host memory", bytes);
    DSP_CUDA_CHECK(cudaHostRegister(mem.get(), bytes, cudaHostRegisterPortable));
    return std::shared_ptr<void>(
        mem.get(), [mem](void* q) { DSP_CUDA_CHECK_NO_THROW(cudaHostUnregister(q)); });
  };
}

class CudaStaging final : public DeviceStaging {
 public:
  CudaStaging(int device, HostAlloc alloc)
      : device_(device), alloc_(pinned(device, std::move(alloc))) {}
  void* host(int which, size_t bytes) override { return area_[which].reserve(bytes, alloc_); }
  void to_host(void* host, const void* device, size_t bytes) override {
    cuda::CudaDeviceGuard g(device_);
    DSP_CUDA_CHECK(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost));
  }
  void to_device(void* device, const void* host, size_t bytes) override {
    cuda::CudaDeviceGuard g(device_);
    DSP_CUDA_CHECK(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice));
  }

 private:
  int device_;
  HostAlloc alloc_;
  StagingArea area_[2];
};

}  // namespace

std::unique_ptr<DeviceStaging> make_cuda_staging(int device, HostAlloc alloc) {
  return std::make_unique<CudaStaging>(device, std::move(alloc));
}

}  // namespace dsp
