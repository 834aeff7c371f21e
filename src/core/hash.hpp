#pragma once
// A fast non-cryptographic 64-bit digest (8 bytes per step through mix64), for checksums that tie
// a partition directory to the dataset it was made from. Not for security.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/rng.hpp"

namespace dsp {

class Hasher {
 public:
  explicit Hasher(uint64_t seed = 0x243f6a8885a308d3ULL) : h_(seed) {}
  void update(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    const size_t blocks = n / 32 * 32;
    mix_blocks(p, blocks);
    finish(p + blocks, n - blocks, n);
  }
  // update(data, n) a piece of about `piece` bytes at a time, calling done(offset, bytes) after
  // each piece (to drop a mapped range once it is hashed); the digest is update(data, n)'s.
  template <class F>
  void update_pieces(const void* data, size_t n, size_t piece, F&& done) {
    const auto* p = static_cast<const unsigned char*>(data);
    const size_t blocks = n / 32 * 32;
    piece = std::max<size_t>(32, piece / 32 * 32);
    for (size_t b = 0; b < blocks; b += piece) {
      const size_t len = std::min(piece, blocks - b);
      mix_blocks(p + b, len);
      done(b, len);
    }
    finish(p + blocks, n - blocks, n);
    if (n > blocks) done(blocks, n - blocks);
  }
  uint64_t digest() const {
    uint64_t h = h_;
    for (uint64_t l : lanes_) h = mix64(h ^ l);
    return mix64(h ^ total_);
  }

 private:
  // Four independent lanes keep the multiplier pipeline busy; folded in at the end. n % 32 == 0.
  void mix_blocks(const unsigned char* p, size_t n) {
    for (size_t i = 0; i < n; i += 32) {
      uint64_t w[4];
      std::memcpy(w, p + i, 32);
      for (int k = 0; k < 4; ++k) lanes_[k] = mix64(lanes_[k] ^ w[k]);
    }
  }
  // The last n < 32 bytes of an update of `total` bytes.
  void finish(const unsigned char* p, size_t n, size_t total) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      h_ = mix64(h_ ^ w);
    }
    uint64_t tail = 0;
    std::memcpy(&tail, p + i, n - i);
    h_ = mix64(h_ ^ tail ^ (static_cast<uint64_t>(n - i) << 56));
    total_ += total;
  }

  uint64_t h_;
  uint64_t lanes_[4] = {1, 2, 3, 4};
  uint64_t total_ = 0;
};

}  // namespace dsp
