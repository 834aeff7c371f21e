// The CUDA embedding storage: the shared device path (layout/store/kernel_embedding.hpp) on
// CudaExec. Compiled with --fmad=false (CMakeLists.txt) so the optimizer step rounds as the host's.
#include "core/cuda/exec.cuh"
#include "layout/store/cuda/embedding_storage.hpp"
#include "layout/store/kernel_embedding.hpp"

namespace dsp::cuda {

EmbeddingStorageFactory cuda_embedding_storage(int device) {
  return [device]() -> std::unique_ptr<EmbeddingStorage> {
    return std::make_unique<KernelEmbeddingStorage<CudaExec>>(CudaExec(device), "cuda",
                                                              Device::cuda(device),
                                                              MemorySpace::kDevice);
  };
}

}  // namespace dsp::cuda
