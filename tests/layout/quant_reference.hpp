#pragma once
// Reference encoders for the low-precision feature tests, written independently of
// core/quant.hpp: bfloat16 by comparing the dropped half against the halfway point, float16 by the
// compiler's _Float16 conversion (IEEE round to nearest even), int8 by floor and an explicit tie
// rule. `decoded_reference` is the float32 a partition's gather must return for source row x.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace dsp::testing {

inline float ref_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if (std::isnan(f)) return f;
  uint32_t upper = x >> 16;
  const uint32_t rest = x & 0xffffu;
  if (rest > 0x8000u || (rest == 0x8000u && (upper & 1u))) ++upper;
  const uint32_t y = upper << 16;
  float out;
  std::memcpy(&out, &y, 4);
  return out;
}

inline float ref_f16(float f) { return static_cast<float>(static_cast<_Float16>(f)); }

inline float ref_int8_scale(const std::vector<float>& xs) {
  float m = 0;
  for (float x : xs) m = std::max(m, std::fabs(x));
  return m / 127.0f;
}

inline int ref_int8(float x, float s) {
  if (s == 0.0f) return 0;
  const float q = x / s;
  float r = std::floor(q);
  const float d = q - r;
  if (d > 0.5f || (d == 0.5f && std::fmod(r, 2.0f) != 0.0f)) r += 1.0f;
  return static_cast<int>(std::max(-127.0f, std::min(127.0f, r)));
}

// x[v][j] of the source (float32), and the scales of int8 ("column": per column over all rows,
// "row": per row): element (v, j) as the partition stores and the gather decodes it.
struct QuantReference {
  std::string dtype, scale;
  std::vector<std::vector<float>> x;
  std::vector<float> column_scale;
  QuantReference(std::string dt, std::string sc, std::vector<std::vector<float>> rows)
      : dtype(std::move(dt)), scale(std::move(sc)), x(std::move(rows)) {
    if (dtype == "int8" && scale == "column" && !x.empty()) {
      for (size_t j = 0; j < x[0].size(); ++j) {
        std::vector<float> col;
        for (const auto& r : x) col.push_back(r[j]);
        column_scale.push_back(ref_int8_scale(col));
      }
    }
  }
  float scale_of(size_t v, size_t j) const {
    return scale == "row" ? ref_int8_scale(x[v]) : column_scale[j];
  }
  float value(size_t v, size_t j) const {
    const float f = x[v][j];
    if (dtype == "bfloat16") return ref_bf16(f);
    if (dtype == "float16") return ref_f16(f);
    if (dtype == "int8") {
      const float s = scale_of(v, j);
      return static_cast<float>(ref_int8(f, s)) * s;
    }
    return f;
  }
};

}  // namespace dsp::testing
