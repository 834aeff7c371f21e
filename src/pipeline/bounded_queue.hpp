#pragma once
// A blocking FIFO of fixed capacity between two pipeline workers. A full queue blocks its producer
// (back-pressure: the sampler runs at most `capacity` batches ahead of the loader). close() ends
// the stream normally; abort() wakes every waiter on both sides at once, so a failure in any
// worker cannot leave another blocked here.
//
// It also measures itself: time-weighted mean occupancy, and the time its producer and consumer
// spent blocked, which are the pipeline's idle times.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace dsp {

template <class T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity)
      : capacity_(capacity), start_(Clock::now()), last_(start_) {
    DSP_CHECK_ARG(capacity >= 1, "queue capacity must be >= 1, got {}", capacity);
  }

  // Blocks while full. Returns false (dropping v) once the queue was aborted.
  bool push(T v) {
    std::unique_lock<std::mutex> lock(mu_);
    if (items_.size() >= capacity_ && !aborted_) {
      auto t0 = Clock::now();
      not_full_.wait(lock, [this] { return items_.size() < capacity_ || aborted_; });
      push_wait_ += seconds(Clock::now() - t0);
    }
    if (aborted_) return false;
    DSP_CHECK(!closed_, "push on a closed queue");
    account_locked();
    items_.push_back(std::move(v));
    not_empty_.notify_one();
    return true;
  }

  // Blocks while empty. Returns false when closed and drained, or aborted.
  bool pop(T* out) {
    std::unique_lock<std::mutex> lock(mu_);
    if (items_.empty() && !closed_ && !aborted_) {
      auto t0 = Clock::now();
      not_empty_.wait(lock, [this] { return !items_.empty() || closed_ || aborted_; });
      pop_wait_ += seconds(Clock::now() - t0);
    }
    if (aborted_ || items_.empty()) return false;
    account_locked();
    *out = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    return true;
  }

  // Blocks until n items are queued (or the queue is closed or aborted) and returns the first
  // min(n, queued) of them in order, leaving them queued: they stay valid until popped (pushes
  // move no queued item), so only the queue's one consumer may call this. Waiting counts as the
  // consumer's.
  std::vector<const T*> peek(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    if (items_.size() < n && !closed_ && !aborted_) {
      auto t0 = Clock::now();
      not_empty_.wait(lock, [&] { return items_.size() >= n || closed_ || aborted_; });
      pop_wait_ += seconds(Clock::now() - t0);
    }
    std::vector<const T*> out;
    if (aborted_) return out;
    for (size_t i = 0; i < n && i < items_.size(); ++i) out.push_back(&items_[i]);
    return out;
  }

  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    not_empty_.notify_all();
  }
  void abort() {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
    not_empty_.notify_all();
    not_full_.notify_all();
  }

  size_t capacity() const { return capacity_; }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return items_.size();
  }
  // Mean number of queued items over the queue's lifetime so far.
  double mean_occupancy() const {
    std::lock_guard<std::mutex> lock(mu_);
    auto now = Clock::now();
    double total = seconds(now - start_);
    if (total <= 0) return 0;
    return (area_ + static_cast<double>(items_.size()) * seconds(now - last_)) / total;
  }
  double push_wait_seconds() const {
    std::lock_guard<std::mutex> lock(mu_);
    return push_wait_;
  }
  double pop_wait_seconds() const {
    std::lock_guard<std::mutex> lock(mu_);
    return pop_wait_;
  }

 private:
  using Clock = std::chrono::steady_clock;
  static double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
  void account_locked() {
    auto now = Clock::now();
    area_ += static_cast<double>(items_.size()) * seconds(now - last_);
    last_ = now;
  }

  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable not_full_, not_empty_;
  std::deque<T> items_;
  bool closed_ = false, aborted_ = false;
  Clock::time_point start_, last_;
  double area_ = 0, push_wait_ = 0, pop_wait_ = 0;
};

}  // namespace dsp
