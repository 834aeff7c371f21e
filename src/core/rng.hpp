#pragma once
// Counter-based random numbers (Philox4x32-10 from Random123), usable on host and device.
//
// Every draw is a pure function of (key, counter). Sampling derives the key from
// (global seed, epoch, batch, layer) and the counter from (global node id, draw index, purpose),
// so the result never depends on the rank, thread or arrival order that computed it: the
// invariant that makes sampling with 1..P ranks, or on CPU vs GPU, bit-identical.
#include <Random123/philox.h>

#include <cstdint>

#include "core/host_device.hpp"

namespace dsp {

// SplitMix64 finalizer: a bijective 64-bit mix, used to fold several integers into one key.
DSP_HOST_DEVICE DSP_FORCEINLINE uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Key of one sampling step: distinct (seed, epoch, batch, layer) give independent streams.
DSP_HOST_DEVICE DSP_FORCEINLINE uint64_t rng_key(uint64_t seed, uint64_t epoch = 0,
                                                 uint64_t batch = 0, uint64_t layer = 0) {
  uint64_t k = mix64(seed);
  k = mix64(k ^ epoch);
  k = mix64(k ^ batch);
  return mix64(k ^ layer);
}

// One stream of 32-bit draws for one (key, subject, purpose): the subject is typically a global
// node id. Draw i of the stream is block i/4, lane i%4 of Philox(key, {i/4, subject lo, subject hi,
// purpose}), so any draw can also be computed directly with `at(i)`.
class RngStream {
 public:
  DSP_HOST_DEVICE RngStream(uint64_t key, uint64_t subject, uint32_t purpose = 0)
      : key_{{static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)}},
        subject_lo_(static_cast<uint32_t>(subject)),
        subject_hi_(static_cast<uint32_t>(subject >> 32)),
        purpose_(purpose) {}

  // The i-th 32-bit draw of this stream.
  DSP_HOST_DEVICE uint32_t at(uint32_t i) const {
    r123::Philox4x32 gen;
    r123::Philox4x32::ctr_type c = {{i >> 2, subject_lo_, subject_hi_, purpose_}};
    return gen(c, key_).v[i & 3];
  }

  // Sequential draws, computing one Philox block per four draws.
  DSP_HOST_DEVICE uint32_t next_u32() {
    if ((pos_ & 3) == 0) {
      r123::Philox4x32 gen;
      r123::Philox4x32::ctr_type c = {{pos_ >> 2, subject_lo_, subject_hi_, purpose_}};
      block_ = gen(c, key_);
    }
    return block_.v[pos_++ & 3];
  }
  DSP_HOST_DEVICE uint64_t next_u64() {
    uint64_t hi = next_u32();
    return (hi << 32) | next_u32();
  }
  // Uniform integer in [0, bound), bound >= 1. Lemire's multiply-shift on 64 bits: the bias is at
  // most bound / 2^64, far below anything a test can see, and it uses integer math only, so host
  // and device agree exactly.
  DSP_HOST_DEVICE uint64_t uniform_int(uint64_t bound) {
    if (bound <= 0xffffffffULL) {
      uint64_t r = next_u64();
      // high 64 bits of r * bound, with bound < 2^32: (r_hi*b) + ((r_lo*b) >> 32), both exact.
      uint64_t lo = (r & 0xffffffffULL) * bound;
      uint64_t hi = (r >> 32) * bound;
      return (hi + (lo >> 32)) >> 32;
    }
    return next_u64() % bound;
  }
  // Uniform double in [0, 1) with 53 random bits.
  DSP_HOST_DEVICE double uniform01() {
    return static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0);
  }
  // Uniform float in [0, 1) with 24 random bits.
  DSP_HOST_DEVICE float uniform01f() {
    return static_cast<float>(next_u32() >> 8) * (1.0f / 16777216.0f);
  }
  DSP_HOST_DEVICE uint32_t position() const { return pos_; }

  // Blocks b..b+N-1 of this stream (draws 4b..4b+4N-1) into out[0, 4N): the blocks next_u32
  // computes, here N at a time side by side, so that their independent multiply chains overlap
  // in the core (N = 4: about 3x the throughput of one block after another).
  template <int N>
  DSP_HOST_DEVICE void blocks(uint32_t b, uint32_t* out) const {
    r123::Philox4x32::ctr_type c[N];
    for (int l = 0; l < N; ++l) c[l] = {{b + l, subject_lo_, subject_hi_, purpose_}};
    r123::Philox4x32::key_type k = key_;
    for (int r = 0; r < 10; ++r) {  // Philox4x32-10: ten rounds, the key bumped between them
      if (r > 0) k = _philox4x32bumpkey(k);
      for (int l = 0; l < N; ++l) c[l] = _philox4x32round(c[l], k);
    }
    for (int l = 0; l < N; ++l) {
      for (int j = 0; j < 4; ++j) out[4 * l + j] = c[l].v[j];
    }
  }

 private:
  r123::Philox4x32::key_type key_;
  uint32_t subject_lo_, subject_hi_, purpose_;
  uint32_t pos_ = 0;
  r123::Philox4x32::ctr_type block_ = {{0, 0, 0, 0}};
};

}  // namespace dsp
