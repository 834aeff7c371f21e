// RankFeatures' FIFO levels (BGL's dynamic cache of the rows other ranks serve): the shared
// level's name and the agreement around creating it.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <random>

#include "core/error.hpp"
#include "core/logging.hpp"
#include "pipeline/rank/features.hpp"
#include "pipeline/rank/runtime.hpp"

namespace dsp {

// BGL's FIFO levels on the store, collective. The shared level's name is drawn by rank 0 (random
// bits, its pid and the time) and broadcast, so the ranks of a machine open one object per job
// and two jobs on a machine never meet. The name lives only while the ranks open it: once every
// rank has (the all_reduce), every rank unlinks it, so no object outlives the job however the job
// ends later (the mappings stay until the stores go). Failures from the store on are agreed
// before anyone creates the object, and failures while creating or attaching after, so every
// rank reaches the unlink before one ends the job.
void RankFeatures::enable_fifo() {
  if (!fifo_requested()) return;
  // Old levels go first: a level's creator unlinks its name when destroyed, which must not hit
  // the object another rank creates again under the same name (the agreement orders the two).
  if (store_) store_->enable_fifo({});
  CoordinatedCommunicator& ch = rt_.channel(WorkerKind::kMain);
  const RankOptions& opts = rt_.options();
  OpOptions o;
  o.label = "runtime.fifo";
  if (opts.fifo_shared_rows > 0 && fifo_name_.empty()) {
    int64_t token = 0;
    if (rt_.leader()) {
      std::random_device rd;
      const uint64_t t =
          static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
      token = static_cast<int64_t>(((uint64_t{rd()} << 32) | rd()) ^ (t * 0x9e3779b97f4a7c15ULL) ^
                                   static_cast<uint64_t>(::getpid()));
    }
    ch.broadcast(&token, 1, DType::kInt64, 0, o);
    fifo_name_ = fmt::format("/dsp-fifo-{:016x}", static_cast<uint64_t>(token));
  }
  auto agree = [&](const std::function<void()>& step) {
    std::exception_ptr err;
    try {
      step();
    } catch (...) {
      err = std::current_exception();
    }
    int64_t failed = err ? rt_.rank() : rt_.size();  // the lowest failing rank, or size() if none
    ch.all_reduce(&failed, 1, DType::kInt64, ReduceOp::kMin, o);
    return std::make_pair(err, failed);
  };
  auto [store_err, store_failed] = agree([&] { store(); });
  if (store_err) std::rethrow_exception(store_err);
  DSP_CHECK(store_failed == rt_.size(), "rank {} failed to build its feature store", store_failed);
  // More rows than nodes hold nothing more.
  const int64_t n = store_->format().num_nodes;
  const FifoCacheOptions fo{std::min(opts.fifo_rows, n), std::min(opts.fifo_shared_rows, n),
                            fifo_name_};
  auto [fifo_err, fifo_failed] = agree([&] { store_->enable_fifo(fo); });
  if (!fifo_name_.empty()) ::shm_unlink(fifo_name_.c_str());  // ENOENT on all but one rank
  if (fifo_err) std::rethrow_exception(fifo_err);
  DSP_CHECK(fifo_failed == rt_.size(), "rank {} failed to set up its FIFO feature cache",
            fifo_failed);
  fifo_on_ = true;
  if (rt_.leader()) {
    const double mb = static_cast<double>(store_->format().row_bytes) / 1e6;
    DSP_INFO("runtime",
             "FIFO feature cache (BGL) of rows other ranks serve: {} rows per rank ({:.1f} MB){}",
             fo.rows, fo.rows * mb,
             fo.shared_rows > 0
                 ? fmt::format(", {} rows shared by the ranks of each machine ({:.1f} MB)",
                               fo.shared_rows, fo.shared_rows * mb)
                 : "");
  }
}

}  // namespace dsp
