#pragma once
// Host-callable launchers of the RNG test kernel (compiled by nvcc in dsp::kernels).
#include <cuda_runtime_api.h>

#include <cstdint>

namespace dsp::cuda {
// out[i * per_subject + j] = RngStream(key, subjects[i]).next_u32() drawn j+1 times.
cudaError_t launch_rng_draws(uint64_t key, const int64_t* subjects, int64_t n,
                             uint32_t per_subject, uint32_t* out, cudaStream_t stream);
}  // namespace dsp::cuda
