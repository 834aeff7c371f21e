// The ring an executor stages its uploads in (core/upload_ring.hpp): a region it hands out never
// overlaps bytes a copy issued earlier may still be reading, whatever the sizes and however far
// behind the device is; a chunk is reused only after waiting for the event recorded when it was
// finished; what exceeds a chunk is not staged.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/upload_ring.hpp"

namespace dsp {
namespace {

// A stream of copies from the ring: issued in order, completed in order when the device gets
// there or when the host waits for a chunk's event (everything issued before its record).
struct FakeDevice : UploadRing::Events {
  struct Copy {
    int64_t at, bytes, seq;
  };
  std::vector<Copy> pending;   // issued, not completed, in issue order
  std::vector<int64_t> event;  // per chunk: the sequence number its event was recorded after
  int64_t seq = 0, reuses = 0;
  std::string log;
  explicit FakeDevice(int chunks) : event(static_cast<size_t>(chunks), -1) {}
  void finished(int c) override {
    event[static_cast<size_t>(c)] = seq;
    log += "f" + std::to_string(c) + " ";
  }
  void reuse(int c) override {
    EXPECT_GE(event[static_cast<size_t>(c)], 0) << "chunk " << c << " reused before it finished";
    complete_through(event[static_cast<size_t>(c)]);
    reuses += 1;
    log += "r" + std::to_string(c) + " ";
  }
  void complete_through(int64_t s) {  // copies with seq < s are done
    size_t k = 0;
    while (k < pending.size() && pending[k].seq < s) ++k;
    pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(k));
  }
  void issue(int64_t at, int64_t bytes) { pending.push_back({at, bytes, seq++}); }
};

TEST(UploadRing, NeverHandsOutBytesACopyInFlightMayRead) {
  constexpr size_t kChunk = 256;
  constexpr int kChunks = 4;
  UploadRing ring(kChunk, kChunks);
  FakeDevice dev(kChunks);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    const auto bytes = static_cast<int64_t>(1 + rng() % (i % 50 == 0 ? kChunk : 64));
    const int64_t at = ring.take(static_cast<size_t>(bytes), dev);
    ASSERT_GE(at, 0);
    ASSERT_EQ(at % 16, 0);
    ASSERT_LE(at + bytes, static_cast<int64_t>(ring.bytes()));
    ASSERT_EQ(at / kChunk, (at + bytes - 1) / static_cast<int64_t>(kChunk)) << "straddles chunks";
    for (const auto& c : dev.pending) {
      ASSERT_TRUE(at + bytes <= c.at || c.at + c.bytes <= at)
          << "upload " << i << " at " << at << " overlaps copy " << c.seq << " in flight";
    }
    dev.issue(at, bytes);
    if (rng() % 8 == 0) dev.complete_through(dev.seq - static_cast<int64_t>(rng() % 40));
  }
  EXPECT_GT(dev.reuses, 100);  // the ring went round many times
}

TEST(UploadRing, ChunksAdvanceInOrderAndOversizeIsNotStaged) {
  UploadRing ring(64, 2);
  FakeDevice dev(2);
  EXPECT_EQ(ring.take(40, dev), 0);
  EXPECT_EQ(ring.take(16, dev), 48);  // after 40 rounded up to 48: chunk 0 is full
  EXPECT_EQ(ring.take(1, dev), 64);   // so chunk 1, never used, which needs no wait
  EXPECT_EQ(ring.take(65, dev), -1);  // more than a chunk: not staged, the ring stays
  EXPECT_EQ(ring.take(64, dev), 0);   // chunk 1 cannot hold it: back to chunk 0 after its event
  EXPECT_EQ(dev.log, "f0 f1 r0 ");
}

TEST(UploadRing, RefusesAShapeItCannotAlign) {
  try {
    UploadRing ring(40, 4);
    ADD_FAILURE() << "a 40-byte chunk was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "UploadRing: 4 chunks of 40 bytes (at least 2 of a multiple of 16)");
  }
}

}  // namespace
}  // namespace dsp
