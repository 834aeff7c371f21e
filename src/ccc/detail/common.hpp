#pragma once
// Argument checks, timeout resolution and byte accounting shared by every backend, so that all of
// them reject the same inputs with the same messages and count bytes by the same rules.
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "ccc/communicator.hpp"

namespace dsp::detail {

// Checks counts.size() == size and every count >= 0; returns the sum. `what` names the argument.
int64_t check_counts(const std::vector<int64_t>& counts, int size, const char* op,
                     const char* what);
void check_count(int64_t count, const char* op);
void check_root(int root, int size, const char* op);
// float32, float64, int32 and int64 only; otherwise NotSupported naming the backend.
void check_reduce_dtype(DType dtype, const std::string& backend);

// The communicator default: opts.timeout, replaced by DSP_COMM_TIMEOUT (seconds, may be
// fractional; 0 disables) when that is set. Malformed values throw InvalidArgument.
std::chrono::milliseconds default_timeout(const CommOptions& opts);
// Per-op timeout wins over the default when non-zero.
inline std::chrono::milliseconds op_timeout(const OpOptions& o, std::chrono::milliseconds dflt) {
  return o.timeout.count() > 0 ? o.timeout : dflt;
}

// Time spent waiting, not counting gaps longer than `stall` between consecutive calls of
// elapsed(): a process that was stopped (SIGSTOP, a debugger) or starved for that long must not
// blame its peers for the time it lost itself, so timeouts measure only the time it was awake.
// Call elapsed() at least every stall / 2 while waiting.
class AwakeTimer {
 public:
  using Clock = std::chrono::steady_clock;
  explicit AwakeTimer(std::chrono::milliseconds stall = std::chrono::seconds(1))
      : stall_(stall), last_(Clock::now()) {}
  std::chrono::milliseconds elapsed() {
    const auto now = Clock::now();
    const auto step = now - last_;
    last_ = now;
    if (step > stall_) {
      ++stalls_;
    } else {
      awake_ += step;
    }
    return std::chrono::duration_cast<std::chrono::milliseconds>(awake_);
  }
  int stalls() const { return stalls_; }  // gaps skipped so far

 private:
  std::chrono::milliseconds stall_;
  Clock::time_point last_;
  Clock::duration awake_{0};
  int stalls_ = 0;
};

// Thread-safe counters, updated when an op completes. The accounting rules are documented on
// Communicator::counters().
class CounterBook {
 public:
  explicit CounterBook(int size) { reset_locked(size); }
  void add_all_to_all(const std::vector<int64_t>& send_counts,
                      const std::vector<int64_t>& recv_counts, size_t elem);
  // Every rank sends `bytes` to every rank (itself included) and receives `bytes` from each.
  void add_symmetric(uint64_t bytes);
  void add_broadcast(uint64_t bytes, int root, int rank);
  void add_empty();  // barrier: an op, no bytes
  CommCounters get() const;
  void reset();

 private:
  void reset_locked(int size);
  mutable std::mutex mu_;
  CommCounters c_;
};

}  // namespace dsp::detail
