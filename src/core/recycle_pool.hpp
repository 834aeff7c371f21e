#pragma once
// Objects reused across hand-outs (device buffers a batch carries away): lend() gives one, a
// recycled one when any was returned, and its last holder returns it. The pool lives as long as
// any lent object, so they may outlive whoever owns the pool. A returned object is handed out
// again as it is: whoever lends must order its new work after its last holder's (and a device
// buffer that grows or goes is freed in its own stream's order: that holder's work on another
// stream must come first too): the device backends lend objects carrying a release fence
// (core/release_fence.hpp) their holders record and the lender waits for on its stream.
#include <memory>
#include <mutex>
#include <vector>

namespace dsp {

template <class T>
class RecyclePool {
 public:
  static std::shared_ptr<T> lend(const std::shared_ptr<RecyclePool>& pool) {
    return lend(pool, [] { return T(); });
  }
  // `make()` builds a new object (a T) when none is free: e.g. buffers on an executor's stream.
  template <class Make>
  static std::shared_ptr<T> lend(const std::shared_ptr<RecyclePool>& pool, const Make& make) {
    std::unique_ptr<T> obj;
    {
      std::lock_guard<std::mutex> lock(pool->mu_);
      if (!pool->free_.empty()) {
        obj = std::move(pool->free_.back());
        pool->free_.pop_back();
      }
    }
    if (!obj) obj = std::make_unique<T>(make());
    return std::shared_ptr<T>(obj.release(), [pool](T* p) {
      std::lock_guard<std::mutex> lock(pool->mu_);
      pool->free_.emplace_back(p);
    });
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<T>> free_;
};

}  // namespace dsp
