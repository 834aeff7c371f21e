// The CUDA feature backend: the shared device path (layout/store/kernel_features.hpp) on CudaExec.
#include "core/cuda/exec.cuh"
#include "layout/store/cuda/feature_backend.hpp"
#include "layout/store/kernel_features.hpp"

namespace dsp::cuda {

FeatureBackendFactory cuda_feature_backend(int device) {
  return [device](const FeatureSource& src) -> std::unique_ptr<FeatureBackend> {
    return std::make_unique<KernelFeatureBackend<CudaExec>>(CudaExec(device), "cuda",
                                                            Device::cuda(device), src);
  };
}

}  // namespace dsp::cuda
