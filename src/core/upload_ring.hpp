#pragma once
// UploadRing: where an executor stages its uploads (core/cuda/memory.hpp, StagedUploads), as
// offsets into a pinned area of `chunks` chunks of `chunk_bytes` each, taken in order as a ring.
// An upload of at most one chunk takes the next bytes of the current chunk (16-byte aligned);
// when it does not fit, the current chunk is finished (every copy from it is issued: the owner
// records an event after them) and the next chunk is taken, once the copies of its previous round
// have completed (the owner waits for that chunk's event; on a device a whole ring behind, this
// is a host wait). An upload larger than a chunk is not staged (take: -1). Host logic only, so
// that the CPU tests check it (tests/core/test_upload_ring.cpp).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.hpp"

namespace dsp {

class UploadRing {
 public:
  // What the owner does when the ring moves on: finished(c) once the last copy from chunk c is
  // issued; reuse(c) before chunk c, finished before, is written again.
  struct Events {
    virtual ~Events() = default;
    virtual void finished(int chunk) = 0;
    virtual void reuse(int chunk) = 0;
  };

  UploadRing(size_t chunk_bytes, int chunks)
      : chunk_bytes_(chunk_bytes), chunks_(chunks), was_finished_(static_cast<size_t>(chunks), 0) {
    DSP_CHECK(chunks >= 2 && chunk_bytes >= kAlign && chunk_bytes % kAlign == 0,
              "UploadRing: {} chunks of {} bytes (at least 2 of a multiple of {})", chunks,
              chunk_bytes, kAlign);
  }

  size_t bytes() const { return chunk_bytes_ * static_cast<size_t>(chunks_); }
  size_t chunk_bytes() const { return chunk_bytes_; }

  // The offset in the area of `bytes` bytes for one upload, or -1 when they exceed a chunk.
  int64_t take(size_t bytes, Events& ev) {
    if (bytes > chunk_bytes_) return -1;
    if (used_ + bytes > chunk_bytes_) {
      ev.finished(cur_);
      was_finished_[static_cast<size_t>(cur_)] = 1;
      cur_ = (cur_ + 1) % chunks_;
      used_ = 0;
      if (was_finished_[static_cast<size_t>(cur_)]) ev.reuse(cur_);
    }
    const size_t at = static_cast<size_t>(cur_) * chunk_bytes_ + used_;
    used_ = std::min(chunk_bytes_, used_ + (bytes + kAlign - 1) / kAlign * kAlign);
    return static_cast<int64_t>(at);
  }

 private:
  static constexpr size_t kAlign = 16;
  size_t chunk_bytes_;
  int chunks_;
  int cur_ = 0;
  size_t used_ = 0;
  std::vector<char> was_finished_;
};

}  // namespace dsp
