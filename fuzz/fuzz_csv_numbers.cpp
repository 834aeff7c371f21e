// OGB raw CSV parsing (ints and floats, fixed column count): errors, never crashes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "graph/import.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  int64_t cols = 1 + data[0] % 4;
  std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string_view view(text);
  try {
    std::vector<int64_t> ints;
    dsp::parse_csv_numbers<int64_t>(view, cols, ints, "fuzz.csv");
    if (ints.size() % cols != 0) __builtin_trap();
  } catch (const dsp::Error&) {
  }
  try {
    std::vector<float> floats;
    dsp::parse_csv_numbers<float>(view, cols, floats, "fuzz.csv");
    if (floats.size() % cols != 0) __builtin_trap();
  } catch (const dsp::Error&) {
  }
  return 0;
}
