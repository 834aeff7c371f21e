// SharedRanges (core/shared_ranges.hpp): the counting behind the CUDA build's host registrations,
// with a fake "device" that records what was made visible and undone.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/shared_ranges.hpp"
#include "error_of.hpp"

namespace dsp {
namespace {
using test::error_of;

// A fake device: maps a host range to base + kOffset, records every registration and undo.
struct FakeDevice {
  static constexpr uintptr_t kOffset = 1 << 20;
  std::vector<std::string> log;
  bool copy_read_only = false;  // act as a device without read-only registration
  SharedRanges::MakeVisible make() {
    return [this](void* p, size_t bytes, bool read_only) {
      SharedRanges::Visible v;
      v.copy = read_only && copy_read_only;
      v.device = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) + kOffset);
      log.push_back((v.copy ? "copy " : "register ") + std::to_string(bytes));
      v.undo = [this, bytes] { log.push_back("undo " + std::to_string(bytes)); };
      return v;
    };
  }
};

TEST(SharedRanges, SecondHolderBorrowsAndTheLastUndoes) {
  FakeDevice dev;
  std::vector<char> host(4096);
  SharedRanges r(dev.make());
  void* a = r.acquire(host.data(), host.size(), false);
  void* b = r.acquire(host.data(), host.size(), true);
  EXPECT_EQ(a, b);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a),
            reinterpret_cast<uintptr_t>(host.data()) + FakeDevice::kOffset);
  EXPECT_EQ(r.holders(host.data()), 2);
  r.release(host.data());  // the first owner lets go: the borrower must still be served
  EXPECT_EQ(dev.log, std::vector<std::string>({"register 4096"}));
  EXPECT_EQ(r.holders(host.data()), 1);
  r.release(host.data());
  EXPECT_EQ(dev.log, std::vector<std::string>({"register 4096", "undo 4096"}));
  EXPECT_EQ(r.holders(host.data()), 0);
  // Registered again afterwards, from scratch.
  r.acquire(host.data(), host.size(), false);
  EXPECT_EQ(dev.log.size(), 3u);
  r.release(host.data());
}

TEST(SharedRanges, RangeInsideARegisteredOneBorrowsItAtItsOffset) {
  FakeDevice dev;
  std::vector<char> host(4096);
  SharedRanges r(dev.make());
  char* base = static_cast<char*>(r.acquire(host.data(), host.size(), false));
  EXPECT_EQ(r.acquire(host.data() + 100, 50, false), base + 100);
  EXPECT_EQ(r.holders(host.data()), 2);
  r.release(host.data());
  EXPECT_EQ(dev.log.size(), 1u);
  r.release(host.data() + 100);
  EXPECT_EQ(dev.log.back(), "undo 4096");
}

TEST(SharedRanges, PartialOverlapAndForeignReleaseAreRefused) {
  FakeDevice dev;
  std::vector<char> host(4096);
  SharedRanges r(dev.make());
  r.acquire(host.data() + 1024, 1024, false);
  EXPECT_NE(error_of([&] {
              r.acquire(host.data() + 1500, 1024, false);
            }).find("overlaps the registered range"),
            std::string::npos);
  EXPECT_NE(
      error_of([&] { r.acquire(host.data(), 2048, false); }).find("overlaps the registered range"),
      std::string::npos);
  EXPECT_NE(error_of([&] { r.release(host.data()); }).find("which is not held"), std::string::npos);
  // Adjacent ranges are separate registrations.
  r.acquire(host.data(), 1024, false);
  r.acquire(host.data() + 2048, 1024, false);
  EXPECT_EQ(dev.log.size(), 3u);
  r.release(host.data());
  r.release(host.data() + 1024);
  r.release(host.data() + 2048);
  EXPECT_EQ(dev.log.size(), 6u);
}

TEST(SharedRanges, ReadOnlyCopyIsNotLentWritable) {
  FakeDevice dev;
  dev.copy_read_only = true;
  std::vector<char> host(4096);
  SharedRanges r(dev.make());
  r.acquire(host.data(), host.size(), true);
  EXPECT_EQ(dev.log, std::vector<std::string>({"copy 4096"}));
  EXPECT_NE(r.acquire(host.data(), 10, true), nullptr);
  EXPECT_NE(error_of([&] {
              r.acquire(host.data(), 10, false);
            }).find("read-only copy and cannot be mapped writable"),
            std::string::npos);
  r.release(host.data());
  r.release(host.data());
  EXPECT_EQ(dev.log.back(), "undo 4096");
}

TEST(SharedRanges, ConcurrentHoldersUndoExactlyOnce) {
  FakeDevice dev;
  std::vector<char> host(4096);
  SharedRanges r(dev.make());
  r.acquire(host.data(), host.size(), false);  // held throughout: one registration in all
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        r.acquire(host.data(), host.size(), true);
        r.release(host.data());
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(r.holders(host.data()), 1);
  r.release(host.data());
  EXPECT_EQ(dev.log, std::vector<std::string>({"register 4096", "undo 4096"}));
}

}  // namespace
}  // namespace dsp
