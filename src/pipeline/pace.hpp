#pragma once
// TurboGNN's pace control (runtime monitoring and dynamic scheduling, TC'23 section 4.3): when the
// batches the sampler has produced pile up in front of the trainer, the stages after it cannot
// keep up, and a sampler that runs further ahead only holds memory and takes cores from them.
//
// The controller counts the batches the sampler is ahead of the trainer (sampled, not yet
// trained). When that lead has risen `window` batches above the lowest it was since the last
// throttle, the sampler is outpacing the stages after it: the controller lowers the sampler's
// limit to half the lead reached (at least 1), and the sampler then waits until its lead falls
// below the limit before it samples the next batch. Measuring the rise from the lowest lead, not
// over consecutive batches, catches a sampler that is only a little faster than the trainer: its
// lead creeps up with the trainer's steps in between and would never rise `window` times in a
// row. Each time the trainer finds nothing to train (the limit was too tight) the limit rises by
// one, up to `ceiling` (what the queues can hold). So the lead stays bounded near what keeps the
// trainer busy, whatever the queues' sizes: at most the larger of `window` above its low and
// the limit.
//
// The batches and their order do not change: pacing only delays the sampler. In a job of several
// ranks only the leader (rank 0) paces: the coordinator runs every rank's collectives in the
// order the leader's workers register them, so a paced leader paces them all, while a follower
// pacing on its own lead could withhold an op the leader's order needs next (pipeline.cpp).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace dsp {

class PaceController {
 public:
  PaceController(size_t ceiling, int window, bool enabled = true)
      : ceiling_(std::max<size_t>(1, ceiling)),
        window_(std::max(1, window)),
        enabled_(enabled),
        limit_(ceiling_) {}

  // Sampler, before sampling a batch: waits while `limit` batches are ahead of the trainer.
  // False once aborted.
  bool wait_turn() {
    std::unique_lock<std::mutex> lock(mu_);
    if (enabled_ && ahead() >= limit_ && !aborted_) {
      auto t0 = std::chrono::steady_clock::now();
      cv_.wait(lock, [this] { return ahead() < limit_ || aborted_; });
      wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    return !aborted_;
  }
  // Sampler, once it has sampled a batch (before the batch is queued, so that the trainer can
  // never have consumed more batches than this has counted).
  void produced() {
    std::lock_guard<std::mutex> lock(mu_);
    ++produced_;
    const size_t lead = ahead();
    max_ahead_ = std::max(max_ahead_, lead);
    low_ = std::min(low_, lead);
    if (enabled_ && lead >= low_ + static_cast<size_t>(window_)) {
      limit_ = std::max<size_t>(1, lead / 2);
      low_ = lead;
      ++throttles_;
    }
  }
  // Trainer, after a batch; `starved`: it had to wait for that batch.
  void consumed(bool starved) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++consumed_;
      if (enabled_ && starved && limit_ < ceiling_) ++limit_;
    }
    cv_.notify_all();
  }
  void abort() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      aborted_ = true;
    }
    cv_.notify_all();
  }

  // The lead the sampler may reach now.
  size_t limit() const {
    std::lock_guard<std::mutex> lock(mu_);
    return limit_;
  }
  size_t max_ahead() const {
    std::lock_guard<std::mutex> lock(mu_);
    return max_ahead_;
  }
  int64_t throttles() const {
    std::lock_guard<std::mutex> lock(mu_);
    return throttles_;
  }
  double wait_seconds() const {
    std::lock_guard<std::mutex> lock(mu_);
    return wait_s_;
  }

 private:
  size_t ahead() const { return static_cast<size_t>(produced_ - consumed_); }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  const size_t ceiling_;
  const int window_;
  const bool enabled_;
  size_t limit_;
  int64_t produced_ = 0, consumed_ = 0;
  size_t low_ = 0, max_ahead_ = 0;  // low_: the lowest lead since the last throttle
  int64_t throttles_ = 0;
  double wait_s_ = 0;
  bool aborted_ = false;
};

}  // namespace dsp
