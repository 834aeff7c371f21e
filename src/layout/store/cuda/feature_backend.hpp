#pragma once
// The CUDA feature backend (CUDA build, dsp::layout_cuda): KernelFeatureBackend<CudaExec>, hot rows
// in device memory, cold rows read through UVA from the registered features mapping. Host header.
#include "layout/store/feature_backend.hpp"

namespace dsp::cuda {

// A factory for FeatureStore's `backend` argument: gathers land in device memory of `device`.
FeatureBackendFactory cuda_feature_backend(int device = 0);

}  // namespace dsp::cuda
