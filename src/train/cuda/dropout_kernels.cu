// The trainer's dropout kernel: one thread per 8-element block of the shared per-block logic.
#include <cuda_runtime.h>

#include "train/cuda/kernels.hpp"

namespace dsp::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;

__global__ void dropout_kernel(drop::DropoutArgs a, int64_t blocks) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; b < blocks;
       b += step) {
    drop::dropout_block(a, b);
  }
}

}  // namespace

cudaError_t launch_dropout(const drop::DropoutArgs& a, int64_t blocks, cudaStream_t stream) {
  if (blocks == 0) return cudaSuccess;
  int64_t grid = (blocks + kThreads - 1) / kThreads;
  if (grid > kMaxBlocks) grid = kMaxBlocks;
  dropout_kernel<<<static_cast<int>(grid), kThreads, 0, stream>>>(a, blocks);
  return cudaGetLastError();
}

}  // namespace dsp::cuda
