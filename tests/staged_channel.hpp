#pragma once
// The device-space channel a multi-rank test gives device backends (samplers, feature stores): MPI
// staged through host memory, pinned on the GPU in CUDA test builds that link the staging
// (DSP_TEST_CUDA_STAGING), plain host memory in CPU builds standing in for the device's. Null
// where none can be made (a CUDA test build without a GPU: its device cases skip).
#include <memory>

#include "ccc/communicator.hpp"
#include "ccc/staged_communicator.hpp"
#ifdef DSP_TEST_CUDA_STAGING
#include <cuda_runtime_api.h>

#include "ccc/cuda/staging.hpp"
#endif

namespace dsp::test {

inline std::unique_ptr<Communicator> make_staged_channel(const CommOptions& opts, int rank) {
  std::unique_ptr<DeviceStaging> staging;
#if defined(DSP_TEST_CUDA_STAGING)
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
    staging = make_cuda_staging(rank % devices);
  }
#elif !defined(DSP_TEST_CUDA)
  staging = make_host_staging();
  (void)rank;
#else
  (void)rank;
#endif
  if (!staging) return nullptr;
  return make_staged_communicator(make_communicator("mpi", opts), std::move(staging));
}

}  // namespace dsp::test
