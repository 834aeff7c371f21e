#pragma once
// Per-element logic of the trainer's dropout, shared by the CPU loop (dropout.cpp) and the CUDA
// kernel (cuda/dropout_kernels.cu), so a key draws the same mask on either device.
//
// Element i of a tensor is kept iff its 16-bit draw is >= threshold, where the draws of elements
// [8b, 8b + 8) are the eight 16-bit halves of one Philox4x32-10 block (key, counter {b, 0,
// kDropoutPurpose}): a pure function of (key, i), so the mask depends neither on the thread count
// nor on the device. The keep probability is quantised to 1/65536 (p = 0.5 exactly).
#include <Random123/philox.h>

#include <cstdint>

#include "core/host_device.hpp"

namespace dsp::drop {

constexpr uint32_t kDropoutPurpose = 0x44524f50;  // "DROP"

// The threshold for drop probability p in [0, 1): round(p * 65536).
inline uint32_t threshold16(double p) { return static_cast<uint32_t>(p * 65536.0 + 0.5); }

// Bit k of the result: element 8 * block + k is kept.
DSP_HOST_DEVICE DSP_FORCEINLINE uint32_t keep_bits8(uint64_t key, uint64_t block,
                                                    uint32_t threshold) {
  r123::Philox4x32 gen;
  r123::Philox4x32::ctr_type c = {
      {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0, kDropoutPurpose}};
  r123::Philox4x32::key_type k = {{static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)}};
  const r123::Philox4x32::ctr_type r = gen(c, k);
  uint32_t bits = 0;
  for (int j = 0; j < 8; ++j) {
    const uint32_t half = (r.v[j / 2] >> (16 * (j % 2))) & 0xffffu;
    bits |= static_cast<uint32_t>(half >= threshold) << j;
  }
  return bits;
}

// Forward of elements [8 * block, min(8 * block + 8, n)):
//   mask[i] = kept && (!relu || x[i] > 0),  out[i] = mask[i] ? x[i] * scale : 0
struct DropoutArgs {
  const float* x = nullptr;
  float* out = nullptr;
  uint8_t* mask = nullptr;
  int64_t n = 0;
  uint64_t key = 0;
  uint32_t threshold = 0;
  float scale = 1.f;
  bool relu = false;
};

DSP_HOST_DEVICE DSP_FORCEINLINE void dropout_block(const DropoutArgs& a, int64_t block) {
  const uint32_t bits = keep_bits8(a.key, static_cast<uint64_t>(block), a.threshold);
  const int64_t i0 = block * 8;
  const int64_t m = a.n - i0 < 8 ? a.n - i0 : 8;
  for (int64_t j = 0; j < m; ++j) {
    const float v = a.x[i0 + j];
    const bool keep = ((bits >> j) & 1u) && (!a.relu || v > 0.f);
    a.mask[i0 + j] = keep ? 1 : 0;
    a.out[i0 + j] = keep ? v * a.scale : 0.f;
  }
}

}  // namespace dsp::drop
