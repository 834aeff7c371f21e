#include "core/error.hpp"

namespace dsp {
std::string Error::where() const {
  if (!file_ || !*file_) return what();
  return fmt::format("{} (at {}:{})", what(), file_, line_);
}
}  // namespace dsp
