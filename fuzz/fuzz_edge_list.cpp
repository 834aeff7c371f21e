// Text edge-list parsing: any input either parses into consistent arrays or throws dsp::Error.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.hpp"
#include "graph/import.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    dsp::EdgeListData out;
    dsp::parse_edge_list_text(std::string_view(text), out, "fuzz.txt");
    if (out.src.size() != out.dst.size()) __builtin_trap();
    if (!out.weight.empty() && out.weight.size() != out.src.size()) __builtin_trap();
    for (size_t i = 0; i < out.src.size(); ++i) {
      if (out.src[i] < 0 || out.dst[i] < 0 || out.src[i] > out.max_id || out.dst[i] > out.max_id) {
        __builtin_trap();
      }
    }
  } catch (const dsp::Error&) {
  }
  return 0;
}
