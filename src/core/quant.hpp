#pragma once
// Low-precision feature rows (dsp partition --feature-dtype): what the partition writes and what
// every gather backend decodes. The encoders are the definition the tests check against; the
// decoders are DSP_HOST_DEVICE and shared by the host gather, the kernel backend on HostExec and
// its CUDA kernel, so the three produce the same float32 bits.
//
//   bfloat16  the upper half of a binary32, rounded to nearest even (NaN stays NaN);
//   float16   IEEE binary16, rounded to nearest even (core/half.hpp);
//   int8      symmetric, with a float32 scale s per column or per row: s = absmax / 127 (0 for an
//             all-zero column or row), q = x / s (a float32 division) rounded to nearest, ties to
//             even, clamped to [-127, 127] (-128 is never written, so the range is symmetric);
//             decoded as float(q) * s.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/dtype.hpp"
#include "core/half.hpp"
#include "core/host_device.hpp"

namespace dsp {

DSP_HOST_DEVICE inline float bf16_to_float(uint16_t h) {
  const uint32_t x = static_cast<uint32_t>(h) << 16;
  float f;
  memcpy(&f, &x, sizeof(f));
  return f;
}

// bfloat16 bits of `f`, rounding to nearest even; a NaN stays a quiet NaN of the same sign.
DSP_HOST_DEVICE inline uint16_t float_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof(x));
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);  // carries into the exponent when rounding up (to inf too)
  return static_cast<uint16_t>(x >> 16);
}

constexpr float kInt8Levels = 127.0f;  // |q| <= 127

// The int8 scale of a column or row whose largest magnitude is `absmax` (0: all zeros).
inline float int8_scale(float absmax) { return absmax / kInt8Levels; }

// q of x under scale s (host: the partition encodes); 0 when s is 0.
inline int8_t quantize_int8(float x, float s) {
  if (!(s > 0.0f)) return 0;
  const float q = std::nearbyint(x / s);  // the default rounding mode: nearest, ties to even
  return static_cast<int8_t>(q > kInt8Levels ? kInt8Levels : q < -kInt8Levels ? -kInt8Levels : q);
}

DSP_HOST_DEVICE inline float dequantize_int8(int8_t q, float s) {
  return static_cast<float>(q) * s;
}

// How a stored feature row decodes to float32. float32 and float16 stores are not decoded by the
// gather (their rows are copied as they are); bfloat16 and int8 are.
struct FeatureCodec {
  DType dtype = DType::kFloat32;
  int64_t dim = 0;
  // int8 with one scale per column: [dim] (in the memory of whoever decodes); null otherwise
  // (per-row scales are passed per row).
  const float* column_scale = nullptr;
};

inline bool codec_decodes(DType t) { return t == DType::kInt8 || t == DType::kBFloat16; }

// Element j of a stored row; `row_scale`: the row's int8 scale when there is no column scale.
DSP_HOST_DEVICE inline float decode_feature(const FeatureCodec& c, const void* row, int64_t j,
                                            float row_scale) {
  if (c.dtype == DType::kInt8) {
    const float s = c.column_scale ? c.column_scale[j] : row_scale;
    return dequantize_int8(static_cast<const int8_t*>(row)[j], s);
  }
  if (c.dtype == DType::kBFloat16) return bf16_to_float(static_cast<const uint16_t*>(row)[j]);
  if (c.dtype == DType::kFloat16) return half_to_float(static_cast<const uint16_t*>(row)[j]);
  return static_cast<const float*>(row)[j];
}

// A whole row into out[0, dim): the dtype is dispatched once, then a plain loop per dtype.
DSP_HOST_DEVICE inline void decode_row(const FeatureCodec& c, const void* row, float row_scale,
                                       float* out) {
  const int64_t f = c.dim;
  if (c.dtype == DType::kInt8) {
    const auto* q = static_cast<const int8_t*>(row);
    if (c.column_scale) {
      for (int64_t j = 0; j < f; ++j) out[j] = dequantize_int8(q[j], c.column_scale[j]);
    } else {
      for (int64_t j = 0; j < f; ++j) out[j] = dequantize_int8(q[j], row_scale);
    }
  } else if (c.dtype == DType::kBFloat16) {
    const auto* h = static_cast<const uint16_t*>(row);
    for (int64_t j = 0; j < f; ++j) out[j] = bf16_to_float(h[j]);
  } else {
    for (int64_t j = 0; j < f; ++j) out[j] = decode_feature(c, row, j, row_scale);
  }
}

}  // namespace dsp
