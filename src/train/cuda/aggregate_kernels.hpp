#pragma once
// Launchers of the train step's aggregation kernels (CUDA build). One warp per row, running the
// per-row logic of train/aggregate_kernels.hpp with kLanes = 32; every pointer in the argument
// structs must be device memory. Compiled by nvcc whenever it is found; linked into the trainer
// only against a CUDA LibTorch (train/aggregate.cpp calls these for CUDA tensors).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "train/aggregate_kernels.hpp"

namespace dsp::cuda {

cudaError_t launch_spmm(const agg::SpmmArgs& a, int64_t rows, cudaStream_t stream);
cudaError_t launch_sddmm(const agg::SddmmArgs& a, int64_t rows, cudaStream_t stream);
cudaError_t launch_edge_softmax(const agg::EdgeSoftmaxArgs& a, int64_t rows, cudaStream_t stream);
cudaError_t launch_edge_softmax_grad(const agg::EdgeSoftmaxGradArgs& a, int64_t rows,
                                     cudaStream_t stream);

}  // namespace dsp::cuda
