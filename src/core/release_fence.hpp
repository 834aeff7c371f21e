#pragma once
// The release point of an array lent to another stream's work (core/recycle_pool.hpp: a block's
// edges or gathered rows that LibTorch's kernels read): its consumer records the fence on the
// stream it issued that work to when it lets go, and the lender's executor, before handing the
// array out again, makes its own stream wait for that point (Exec::wait: a device-side wait, no
// host wait). Made by an executor (Exec::fence()): a CUDA event in the CUDA build; in the host
// emulation recording only marks it, and the wait is counted (HostTraffic::stream_waits).
#include <atomic>

namespace dsp {

class ReleaseFence {
 public:
  virtual ~ReleaseFence() = default;
  // The point after the work issued so far to `stream` (a cudaStream_t; null: the device's legacy
  // default stream). From any thread; a later record replaces an earlier one.
  void record(void* stream) {
    record_on(stream);
    recorded_.store(true, std::memory_order_release);
  }
  bool recorded() const { return recorded_.load(std::memory_order_acquire); }
  void clear() { recorded_.store(false, std::memory_order_release); }

 private:
  virtual void record_on(void* stream) = 0;
  std::atomic<bool> recorded_{false};
};

}  // namespace dsp
