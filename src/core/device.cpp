#include "core/device.hpp"

#include "core/error.hpp"

namespace dsp {
std::string Device::str() const { return is_cuda() ? fmt::format("cuda:{}", index) : "cpu"; }

Device Device::parse(const std::string& s) {
  if (s == "cpu") return cpu();
  if (s == "cuda") return cuda(0);
  if (s.rfind("cuda:", 0) == 0 && s.size() > 5) {
    size_t pos = 0;
    int i = -1;
    try {
      i = std::stoi(s.substr(5), &pos);
    } catch (...) {
    }
    if (i >= 0 && pos == s.size() - 5) return cuda(i);
  }
  DSP_THROW_T(InvalidArgument, "unknown device '{}' (cpu, cuda, cuda:<index>)", s);
}
}  // namespace dsp
