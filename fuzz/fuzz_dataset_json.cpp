// dataset.json: arbitrary text is either a valid DatasetMeta or a FormatError / JSON parse error.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "graph/dataset.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  try {
    dsp::DatasetMeta m = dsp::DatasetMeta::from_json(j, "fuzz/dataset.json");
    if (m.num_nodes < 0 || m.num_edges < 0 || m.feature_dim < 0) __builtin_trap();
    // What was accepted must survive a round trip unchanged.
    dsp::DatasetMeta m2 = dsp::DatasetMeta::from_json(m.to_json(), "roundtrip");
    if (m2.to_json() != m.to_json()) __builtin_trap();
  } catch (const dsp::Error&) {
  }
  return 0;
}
