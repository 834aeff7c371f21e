// Device-side draws of the shared counter-based RNG. The sampling kernels (CSP issue) build on the
// same RngStream; this kernel lets the GPU check compare draws with the CPU bit for bit.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/rng.hpp"
#include "csp/cuda/rng_kernels.hpp"

namespace dsp::cuda {
namespace {
__global__ void draw_kernel(uint64_t key, const int64_t* subjects, int64_t n, uint32_t per_subject,
                            uint32_t* out) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  RngStream s(key, static_cast<uint64_t>(subjects[i]));
  for (uint32_t j = 0; j < per_subject; ++j) out[i * per_subject + j] = s.next_u32();
}
}  // namespace

cudaError_t launch_rng_draws(uint64_t key, const int64_t* subjects, int64_t n,
                             uint32_t per_subject, uint32_t* out, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  int threads = 256;
  int blocks = static_cast<int>((n + threads - 1) / threads);
  draw_kernel<<<blocks, threads, 0, stream>>>(key, subjects, n, per_subject, out);
  return cudaGetLastError();
}
}  // namespace dsp::cuda
