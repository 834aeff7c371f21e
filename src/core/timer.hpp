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

// CPU seconds (user + system) of the calling thread (getrusage RUSAGE_THREAD) and of the whole
// process (RUSAGE_SELF). A thread's CPU time beside its wall time tells computing from waiting:
// a wait that burns CPU shows up as CPU seconds of a thread that did no work.
double thread_cpu_seconds();
double process_cpu_seconds();

// Adds the wall seconds of the scope to `*wall` and its CPU seconds, by `clock` (the calling
// thread's by default), to `*cpu`.
class StageTimer {
 public:
  StageTimer(double* wall, double* cpu, double (*clock)() = thread_cpu_seconds)
      : wall_(wall), cpu_(cpu), clock_(clock), cpu0_(clock()) {}
  ~StageTimer() {
    *wall_ += sw_.seconds();
    *cpu_ += clock_() - cpu0_;
  }
  StageTimer(const StageTimer&) = delete;
  StageTimer& operator=(const StageTimer&) = delete;

 private:
  double* wall_;
  double* cpu_;
  double (*clock_)();
  double cpu0_;
  Stopwatch sw_;
};

// Peak resident set size of this process in bytes (from getrusage), for memory reports.
long long peak_rss_bytes();

}  // namespace dsp
