#pragma once
// Checking of CUDA runtime calls and kernel launches on the host side of the CUDA build: every
// call's status is tested, and a failure throws dsp::Error naming the call, the CUDA error (and,
// through dsp::Error, the source location) (never a silent continue; a sticky device fault surfaces at the next call).
#include <cuda_runtime_api.h>

#include "core/error.hpp"

#define DSP_CUDA_CHECK(expr)                                                            \
  do {                                                                                  \
    const cudaError_t dsp_cuda_err_ = (expr);                                           \
    if (dsp_cuda_err_ != cudaSuccess) {                                                 \
      DSP_THROW("CUDA call '{}' failed: {} ({})", #expr,                                \
                cudaGetErrorString(dsp_cuda_err_), static_cast<int>(dsp_cuda_err_));    \
    }                                                                                   \
  } while (0)
