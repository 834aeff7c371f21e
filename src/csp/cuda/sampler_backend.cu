// The CUDA sampler backend: the shared device path (csp/kernel_backend.hpp) on CudaExec.
#include <limits>
#include <string>

#include "core/cuda/exec.cuh"
#include "core/logging.hpp"
#include "core/memory.hpp"
#include "csp/cuda/sampler_backend.hpp"
#include "csp/kernel_backend.hpp"

namespace dsp::cuda {

SamplerBackendFactory cuda_sampler_backend(CudaSamplerOptions opts) {
  return [opts](const LocalTopology& topo, const SamplerOptions& so) -> std::unique_ptr<SamplerBackend> {
    KernelBackendOptions ko;
    ko.index_budget = opts.index_budget;
    if (ko.index_budget == std::numeric_limits<size_t>::max()) {
      CudaDeviceGuard g(opts.device);
      size_t free_bytes = 0, total = 0;
      device_memory(&free_bytes, &total);
      ko.index_budget = free_bytes / 2;
    }
    auto b = std::make_unique<KernelSamplerBackend<CudaExec>>(
        CudaExec(opts.device), "cuda", Device::cuda(opts.device), topo, so, ko);
    const std::string where =
        !b->topology().indices_on_host()
            ? std::string("in device memory")
            : fmt::format("through UVA from host memory, {} of {} rows on the device",
                          b->topology().hot_rows(), topo.num_rows);
    DSP_INFO("csp", "cuda:{} sampler: neighbour array of {} (budget {}) {}", opts.device,
             format_bytes(topo.indices_bytes()), format_bytes(ko.index_budget), where);
    return b;
  };
}

}  // namespace dsp::cuda
