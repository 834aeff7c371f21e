#include "ccc/executor.hpp"

#include <pthread.h>
#include <time.h>

#include "core/error.hpp"
#include "core/logging.hpp"

namespace dsp {

CommExecutor::CommExecutor(std::string name) : CommExecutor(std::move(name), Hooks()) {}

CommExecutor::CommExecutor(std::string name, Hooks hooks)
    : name_(std::move(name)), hooks_(std::move(hooks)) {
  std::promise<void> started;
  std::future<void> started_f = started.get_future();
  thread_ = std::thread([this, &started] {
    try {
      if (hooks_.on_start) hooks_.on_start();
    } catch (...) {
      started.set_exception(std::current_exception());
      return;
    }
    started.set_value();
    loop();
  });
  thread_id_ = thread_.get_id();
  try {
    started_f.get();
  } catch (...) {
    thread_.join();
    stopped_ = true;
    throw;
  }
}

CommExecutor::~CommExecutor() {
  try {
    stop();
  } catch (const std::exception& e) {
    DSP_ERROR("ccc", "executor '{}': {}", name_, e.what());
  }
}

void CommExecutor::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (on_executor_thread()) {
    // Joining ourselves is impossible; the loop exits after this task and the destructor of the
    // owner (on another thread) joins.
    return;
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
}

void CommExecutor::push(std::string label, std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    DSP_CHECK(!stopping_, "executor '{}' is stopped; cannot run '{}'", name_, label);
    queue_.push_back(Item{std::move(label), std::move(fn)});
  }
  cv_.notify_one();
}

size_t CommExecutor::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

uint64_t CommExecutor::completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_;
}

double CommExecutor::cpu_seconds() const {
  // Under the lock: stop() cannot begin joining the thread while its clock is read.
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_ || stopping_) return 0;
  clockid_t cid;
  std::thread& t = const_cast<std::thread&>(thread_);
  if (pthread_getcpuclockid(t.native_handle(), &cid) != 0) return 0;
  timespec ts{};
  if (clock_gettime(cid, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void CommExecutor::loop() {
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      while (queue_.empty() && !stopping_) {
        if (hooks_.on_idle) {
          if (cv_.wait_for(lock, hooks_.idle_period) == std::cv_status::timeout && queue_.empty() &&
              !stopping_) {
            lock.unlock();
            hooks_.on_idle();
            lock.lock();
          }
        } else {
          cv_.wait(lock);
        }
      }
      if (queue_.empty()) break;  // stopping and drained
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    // packaged_task stores exceptions in the future; anything escaping here is a bug in a raw
    // task, and must not kill the only thread that talks to MPI.
    try {
      item.fn();
    } catch (const std::exception& e) {
      DSP_ERROR("ccc", "executor '{}': task '{}' threw: {}", name_, item.label, e.what());
    }
    std::lock_guard<std::mutex> lock(mu_);
    ++completed_;
  }
  if (hooks_.on_stop) {
    try {
      hooks_.on_stop();
    } catch (const std::exception& e) {
      DSP_ERROR("ccc", "executor '{}': stop hook threw: {}", name_, e.what());
    }
  }
}

}  // namespace dsp
