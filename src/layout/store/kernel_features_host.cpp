// The device feature backend executed on the host (feature_backend.hpp:
// make_emulated_feature_backend).
#include "core/host_exec.hpp"
#include "layout/store/kernel_features.hpp"

namespace dsp {

std::unique_ptr<FeatureBackend> make_emulated_feature_backend(const FeatureSource& src) {
  return std::make_unique<KernelFeatureBackend<HostExec>>(HostExec{}, "emulated-device",
                                                          Device::cpu(), src);
}

}  // namespace dsp
