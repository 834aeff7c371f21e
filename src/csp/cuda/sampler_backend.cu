// The CUDA sampler backend: the shared device path (csp/kernel_backend.hpp) on CudaExec.
#include "core/cuda/exec.cuh"
#include "csp/cuda/sampler_backend.hpp"
#include "csp/kernel_backend.hpp"

namespace dsp::cuda {

SamplerBackendFactory cuda_sampler_backend(CudaSamplerOptions opts) {
  return [opts](const LocalTopology& topo, const SamplerOptions& so) -> std::unique_ptr<SamplerBackend> {
    KernelBackendOptions ko;
    ko.index_budget = opts.index_budget;
    return std::make_unique<KernelSamplerBackend<CudaExec>>(CudaExec(opts.device), "cuda",
                                                            Device::cuda(opts.device), topo, so, ko);
  };
}

}  // namespace dsp::cuda
