// The train step's aggregation kernels: thin row-per-warp launchers over the shared per-row logic.
#include <cuda_runtime.h>

#include "train/cuda/kernels.hpp"

namespace dsp::cuda {
namespace {

constexpr int kLanes = 32;
constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / kLanes;
constexpr int kMaxBlocks = 65535;
// Floats per lane and chunk: a warp covers 128 features per pass over a row's edges.
constexpr int kChunk = 4;

// Every lane of a warp takes the same rows (grid-stride), so the lane reductions inside the
// per-row functions always see the full warp.
template <class Args, class RowFn>
__global__ void rows_kernel(Args a, int64_t rows, RowFn fn) {
  const int lane = threadIdx.x % kLanes;
  const int64_t first = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / kLanes;
  const int64_t step = (static_cast<int64_t>(gridDim.x) * blockDim.x) / kLanes;
  for (int64_t r = first; r < rows; r += step) fn(a, r, lane);
}

template <class Args, class RowFn>
cudaError_t launch_rows(const Args& a, int64_t rows, RowFn fn, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  rows_kernel<<<static_cast<int>(blocks), kThreads, 0, stream>>>(a, rows, fn);
  return cudaGetLastError();
}

struct SpmmRow {
  __device__ void operator()(const agg::SpmmArgs& a, int64_t r, int lane) const {
    agg::spmm_row<kLanes, kChunk>(a, r, lane);
  }
};
struct SddmmRow {
  __device__ void operator()(const agg::SddmmArgs& a, int64_t r, int lane) const {
    agg::sddmm_row<kLanes, kChunk>(a, r, lane);
  }
};
struct EdgeSoftmaxRow {
  __device__ void operator()(const agg::EdgeSoftmaxArgs& a, int64_t r, int lane) const {
    agg::edge_softmax_row<kLanes>(a, r, lane);
  }
};
struct EdgeSoftmaxGradRow {
  __device__ void operator()(const agg::EdgeSoftmaxGradArgs& a, int64_t r, int lane) const {
    agg::edge_softmax_grad_row<kLanes>(a, r, lane);
  }
};

}  // namespace

cudaError_t launch_spmm(const agg::SpmmArgs& a, int64_t rows, cudaStream_t stream) {
  return launch_rows(a, rows, SpmmRow{}, stream);
}
cudaError_t launch_sddmm(const agg::SddmmArgs& a, int64_t rows, cudaStream_t stream) {
  return launch_rows(a, rows, SddmmRow{}, stream);
}
cudaError_t launch_edge_softmax(const agg::EdgeSoftmaxArgs& a, int64_t rows, cudaStream_t stream) {
  return launch_rows(a, rows, EdgeSoftmaxRow{}, stream);
}
cudaError_t launch_edge_softmax_grad(const agg::EdgeSoftmaxGradArgs& a, int64_t rows,
                                     cudaStream_t stream) {
  return launch_rows(a, rows, EdgeSoftmaxGradRow{}, stream);
}

}  // namespace dsp::cuda
