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

// Branch-free: the keep bits are random, so branching on them would mispredict every other
// element (x * 0 keeps torch's dropout semantics for non-finite x). The fields are read into
// locals once: the byte stores of the mask may alias anything, so the compiler would reload them.
DSP_HOST_DEVICE DSP_FORCEINLINE void dropout_block(const DropoutArgs& args, int64_t block) {
  const float* x = args.x;
  float* out = args.out;
  uint8_t* mask = args.mask;
  const float scale = args.scale;
  const bool relu = args.relu;
  const uint32_t bits = keep_bits8(args.key, static_cast<uint64_t>(block), args.threshold);
  const int64_t i0 = block * 8;
  const int m = args.n - i0 < 8 ? static_cast<int>(args.n - i0) : 8;
  for (int j = 0; j < m; ++j) {
    const float v = x[i0 + j];
    const uint32_t keep = ((bits >> j) & 1u) & (relu ? static_cast<uint32_t>(v > 0.f) : 1u);
    mask[i0 + j] = static_cast<uint8_t>(keep);
    out[i0 + j] = v * (scale * static_cast<float>(keep));
  }
}

}  // namespace dsp::drop
