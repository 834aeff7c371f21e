#pragma once
// The one checking header of every CUDA call in dsp (CUDA build only). Every runtime call and
// every kernel launch is checked:
//   DSP_CUDA_CHECK(expr)           throws dsp::Error naming the call and the CUDA error (a sticky
//                                  device fault surfaces at the next checked call);
//   DSP_CUDA_CHECK_NO_THROW(expr)  for destructors and cleanup: logs the failure and goes on.
// CudaDeviceGuard makes a device current for a scope and restores the previous one, so a call
// made from any worker thread targets the device its object belongs to.
#include <cuda_runtime_api.h>

#include "core/error.hpp"
#include "core/logging.hpp"

#define DSP_CUDA_CHECK(expr)                                                             \
  do {                                                                                   \
    const cudaError_t dsp_cuda_err_ = (expr);                                            \
    if (dsp_cuda_err_ != cudaSuccess) {                                                  \
      DSP_THROW("CUDA call '{}' failed: {} ({})", #expr, cudaGetErrorName(dsp_cuda_err_), \
                cudaGetErrorString(dsp_cuda_err_));                                      \
    }                                                                                    \
  } while (0)

#define DSP_CUDA_CHECK_NO_THROW(expr)                                                       \
  do {                                                                                      \
    const cudaError_t dsp_cuda_err_ = (expr);                                               \
    if (dsp_cuda_err_ != cudaSuccess) {                                                     \
      DSP_WARN("cuda", "CUDA call '{}' failed: {} ({})", #expr,                             \
               cudaGetErrorName(dsp_cuda_err_), cudaGetErrorString(dsp_cuda_err_));         \
    }                                                                                       \
  } while (0)

namespace dsp::cuda {

class CudaDeviceGuard {
 public:
  explicit CudaDeviceGuard(int device) {
    DSP_CUDA_CHECK(cudaGetDevice(&prev_));
    if (prev_ != device) DSP_CUDA_CHECK(cudaSetDevice(device));
  }
  ~CudaDeviceGuard() { DSP_CUDA_CHECK_NO_THROW(cudaSetDevice(prev_)); }
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

 private:
  int prev_ = 0;
};

}  // namespace dsp::cuda
