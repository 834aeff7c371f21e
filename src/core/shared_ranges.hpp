#pragma once
// Host ranges made visible to a device, shared by every holder in the process and counted by
// base address: the first holder of a range makes it visible (registers it, or copies it), a
// later holder of the same range or of one inside it borrows that, and the last holder to let go
// undoes it. The CUDA build keeps one for the process (cuda::HostRegistration): cudaHostRegister
// refuses a range registered twice, and unregistering it under another holder that still reads
// it through the device would leave that holder dangling. Written here, without CUDA, so the
// counting is tested on the host (tests/core/test_shared_ranges.cpp).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

#include "core/error.hpp"

namespace dsp {

class SharedRanges {
 public:
  // What making a range visible produced: its device address, whether it is a private copy
  // (writes through it do not reach the host range), and how to undo it (empty: nothing to undo,
  // e.g. a range someone outside this registry registered).
  struct Visible {
    void* device = nullptr;
    bool copy = false;
    std::function<void()> undo;
  };
  using MakeVisible = std::function<Visible(void* base, size_t bytes, bool read_only)>;

  explicit SharedRanges(MakeVisible make) : make_(std::move(make)) {}
  ~SharedRanges() {
    for (auto& kv : ranges_)
      if (kv.second.v.undo) kv.second.v.undo();
  }
  SharedRanges(const SharedRanges&) = delete;
  SharedRanges& operator=(const SharedRanges&) = delete;

  // The device address of p, [p, p + bytes) visible until release(p). A writable holder is
  // refused a range that was copied for a read-only one (its writes would be lost).
  void* acquire(void* p, size_t bytes, bool read_only) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto a = reinterpret_cast<uintptr_t>(p);
    auto it = ranges_.upper_bound(a);
    if (it != ranges_.begin()) {
      auto& [base, e] = *std::prev(it);
      if (a < base + e.bytes) {
        DSP_CHECK(a + bytes <= base + e.bytes,
                  "host range [{:#x}, +{}) overlaps the registered range [{:#x}, +{}) without "
                  "lying inside it",
                  a, bytes, base, e.bytes);
        DSP_CHECK(read_only || !e.v.copy,
                  "host range [{:#x}, +{}) is visible to the device as a read-only copy and "
                  "cannot be mapped writable",
                  a, bytes);
        ++e.holders;
        ++borrowed_[a];
        return static_cast<char*>(e.v.device) + (a - base);
      }
    }
    DSP_CHECK(it == ranges_.end() || a + bytes <= it->first,
              "host range [{:#x}, +{}) overlaps the registered range at {:#x}", a, bytes,
              it->first);
    Entry e{bytes, make_(p, bytes, read_only), 1};
    void* dev = e.v.device;
    ranges_.emplace(a, std::move(e));
    ++borrowed_[a];
    return dev;
  }

  // Lets go of what acquire(p, ...) gave; the last holder of a range undoes it.
  void release(void* p) {
    std::function<void()> undo;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto a = reinterpret_cast<uintptr_t>(p);
      auto b = borrowed_.find(a);
      DSP_CHECK(b != borrowed_.end(), "release of host range {:#x}, which is not held", a);
      if (--b->second == 0) borrowed_.erase(b);
      auto it = std::prev(ranges_.upper_bound(a));
      if (--it->second.holders > 0) return;
      undo = std::move(it->second.v.undo);
      ranges_.erase(it);
    }
    if (undo) undo();
  }

  // Holders of the range whose base is p (0: none), for tests and logs.
  int64_t holders(const void* p) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = ranges_.find(reinterpret_cast<uintptr_t>(p));
    return it == ranges_.end() ? 0 : it->second.holders;
  }

 private:
  struct Entry {
    size_t bytes;
    Visible v;
    int64_t holders;
  };
  MakeVisible make_;
  mutable std::mutex mu_;
  std::map<uintptr_t, Entry> ranges_;      // by base address
  std::map<uintptr_t, int64_t> borrowed_;  // acquire()d addresses and how often
};

}  // namespace dsp
