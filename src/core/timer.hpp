#pragma once
#include <chrono>

namespace dsp {

// Wall-clock stopwatch (steady clock).
class Stopwatch {
 public:
  Stopwatch() : start_(clock::now()) {}
  void reset() { start_ = clock::now(); }
  double seconds() const { return std::chrono::duration<double>(clock::now() - start_).count(); }
  double millis() const { return seconds() * 1e3; }

 private:
  using clock = std::chrono::steady_clock;
  clock::time_point start_;
};

// Adds the lifetime of the scope, in seconds, to `*sink`.
class ScopedTimer {
 public:
  explicit ScopedTimer(double* sink) : sink_(sink) {}
  ~ScopedTimer() { *sink_ += sw_.seconds(); }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  double* sink_;
  Stopwatch sw_;
};

// Peak resident set size of this process in bytes (from getrusage), for memory reports.
long long peak_rss_bytes();

}  // namespace dsp
