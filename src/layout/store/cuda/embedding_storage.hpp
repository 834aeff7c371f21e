#pragma once
// The CUDA embedding storage (CUDA build, dsp::layout_cuda): KernelEmbeddingStorage<CudaExec>, the
// table's values, optimizer state and step counts in device memory. Host header.
#include "layout/store/embedding_storage.hpp"

namespace dsp::cuda {

// A factory for EmbeddingTable's `storage` argument: rows in device memory of `device`.
EmbeddingStorageFactory cuda_embedding_storage(int device = 0);

}  // namespace dsp::cuda
