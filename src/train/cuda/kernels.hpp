#pragma once
// Launchers of the train step's kernels (CUDA build): the aggregations, one warp per row running
// the per-row logic of train/aggregate_kernels.hpp with kLanes = 32, and the dropout, one thread
// per 8-element block of train/dropout_kernels.hpp. Every pointer in the argument structs must be
// device memory. Compiled by nvcc whenever it is found; linked into the trainer only against a
// CUDA LibTorch (train/aggregate.cpp and train/dropout.cpp call these for CUDA tensors).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "train/aggregate_kernels.hpp"
#include "train/dropout_kernels.hpp"

namespace dsp::cuda {

cudaError_t launch_spmm(const agg::SpmmArgs& a, int64_t rows, cudaStream_t stream);
cudaError_t launch_sddmm(const agg::SddmmArgs& a, int64_t rows, cudaStream_t stream);
cudaError_t launch_edge_softmax(const agg::EdgeSoftmaxArgs& a, int64_t rows, cudaStream_t stream);
cudaError_t launch_edge_softmax_grad(const agg::EdgeSoftmaxGradArgs& a, int64_t rows,
                                     cudaStream_t stream);

// Dropout blocks [0, blocks) of a.
cudaError_t launch_dropout(const drop::DropoutArgs& a, int64_t blocks, cudaStream_t stream);

}  // namespace dsp::cuda
