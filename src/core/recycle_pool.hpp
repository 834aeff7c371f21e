#pragma once
// Objects reused across hand-outs (device buffers a batch carries away): lend() gives one, a
// recycled one when any was returned, and its last holder returns it. The pool lives as long as
// any lent object, so they may outlive whoever owns the pool. A returned object is handed out
// again as it is: whoever lends must be sure its last holder's work on it has completed.
#include <memory>
#include <mutex>
#include <vector>

namespace dsp {

template <class T>
class RecyclePool {
 public:
  static std::shared_ptr<T> lend(const std::shared_ptr<RecyclePool>& pool) {
    std::unique_ptr<T> obj;
    {
      std::lock_guard<std::mutex> lock(pool->mu_);
      if (!pool->free_.empty()) {
        obj = std::move(pool->free_.back());
        pool->free_.pop_back();
      }
    }
    if (!obj) obj = std::make_unique<T>();
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
