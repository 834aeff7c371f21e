#pragma once
// The CUDA sampler backend (CUDA build, dsp::csp_cuda): KernelSamplerBackend<CudaExec>, the device
// path of csp/kernel_backend.hpp run on a GPU. Host header: no CUDA includes.
#include <cstddef>
#include <limits>

#include "csp/backend.hpp"

namespace dsp::cuda {

struct CudaSamplerOptions {
  int device = 0;
  // Bytes of device memory the neighbour array may take; beyond it, it stays in (pinned,
  // registered) host memory and kernels read it through UVA, except the hottest rows that fit.
  // Unset (the maximum): half of the device's free memory when the backend is built (the rest is
  // the feature cache's and the model's).
  size_t index_budget = std::numeric_limits<size_t>::max();
};

// A factory for CollectiveSampler's `backend` argument.
SamplerBackendFactory cuda_sampler_backend(CudaSamplerOptions opts = {});

}  // namespace dsp::cuda
