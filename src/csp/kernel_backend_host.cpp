// The device sampler backend executed on the host (backend.hpp: emulated_sampler_backend).
#include "core/host_exec.hpp"
#include "csp/kernel_backend.hpp"

namespace dsp {

SamplerBackendFactory emulated_sampler_backend(KernelBackendOptions opts) {
  return [opts](const LocalTopology& topo,
                const SamplerOptions& so) -> std::unique_ptr<SamplerBackend> {
    return std::make_unique<KernelSamplerBackend<HostExec>>(HostExec{}, "emulated-device",
                                                            Device::cpu(), topo, so, opts);
  };
}

}  // namespace dsp
