#include "python/loader.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/logging.hpp"

namespace dsp::pyext {

void LoaderOptions::validate() const {
  // The checks of `dsp train`'s options, from the same functions (same messages).
  rank_options().validate();  // the rank's own options: RankOptions' own checks
  sampler.validate();
  DSP_CHECK_ARG(batch_size > 0, "batch sizes must be > 0");
  DSP_CHECK_ARG(split == "train" || split == "valid" || split == "test",
                "split must be train, valid or test, got '{}'", split);
  DSP_CHECK_ARG(prefetch >= 0, "prefetch must be >= 0, got {}", prefetch);
  seed_order.validate();
}

RankOptions LoaderOptions::rank_options() const {
  RankOptions ro = rank;
  ro.seed = seed;
  ro.bind = false;    // the user's process: its other threads are not ours to bind
  ro.trains = false;  // the user's model trains, not ours: no device trainer channel
  ro.log_name = "loader";
  return ro;
}

Loader::Loader(LoaderOptions opts) : opts_(std::move(opts)) {
  opts_.validate();
  rt_ = std::make_unique<RankRuntime>(opts_.rank_options());
  rt_->enable_fifo();  // no-op without fifo_rows
  seeds_ = rt_->local_ids(opts_.split);
  std::sort(seeds_.begin(), seeds_.end());

  SamplerOptions so = opts_.sampler;
  so.seed = opts_.seed;
  sampler_ = rt_->make_sampler(so);
  sched_ = std::make_unique<EpochScheduler>(seeds_, opts_.batch_size, opts_.seed);
  opts_.seed_order.apply(*sched_, rt_->part().patch, rt_->part().meta.offsets[rt_->rank()]);
  CoordinatedCommunicator& main_ch = rt_->channel(WorkerKind::kMain);
  main_ch.set_step(-1, 1);
  if (opts_.shuffle) {
    steps_ = sched_->agree_steps(main_ch);
  } else {
    steps_ = (num_local_seeds() + opts_.batch_size - 1) / opts_.batch_size;
    main_ch.all_reduce(&steps_, 1, DType::kInt64, ReduceOp::kMax);
  }
}

Loader::~Loader() {
  try {
    finish_epoch();
  } catch (const std::exception& e) {
    DSP_WARN("python", "loader: error while finishing the epoch: {}", e.what());
  }
  sampler_.reset();
}

std::vector<int64_t> Loader::step_seeds(int64_t step) const {
  if (opts_.shuffle) return sched_->batch_seeds(order_, step);
  int64_t n = num_local_seeds();
  int64_t b = std::min(n, step * opts_.batch_size), e = std::min(n, b + opts_.batch_size);
  return std::vector<int64_t>(seeds_.begin() + b, seeds_.begin() + e);
}

LoadedBatch Loader::run_step(int64_t step) {
  std::vector<int64_t> seeds = step_seeds(step);
  rt_->channel(WorkerKind::kSampler).set_step(epoch_, step);
  SampledBatch sb = sampler_->sample(seeds, epoch_, step);
  sb.epoch = epoch_;
  sb.batch = step;
  rt_->channel(WorkerKind::kLoader).set_step(epoch_, step);
  return rt_->load(std::move(sb));
}

void Loader::start_epoch(int64_t epoch) {
  finish_epoch();
  epoch_ = epoch;
  step_ = 0;
  if (opts_.shuffle) order_ = sched_->epoch_order(epoch);
  active_ = true;
  if (opts_.prefetch > 0) {
    queue_.clear();
    stop_ = false;
    worker_ = std::thread([this] { produce(); });
  }
}

void Loader::produce() {
  Item last;
  last.end = true;
  try {
    for (int64_t t = 0; t < steps_; ++t) {
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (stop_ && size() == 1) break;  // nobody else waits for the remaining steps
      }
      LoadedBatch lb = run_step(t);
      if (lb.sample.seeds.empty()) continue;
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || queue_.size() < static_cast<size_t>(opts_.prefetch); });
      if (stop_) continue;  // abandoned: keep serving peers, drop the batch
      queue_.push_back(Item{std::move(lb), nullptr, false});
      cv_.notify_all();
    }
  } catch (...) {
    last.error = std::current_exception();
  }
  std::lock_guard<std::mutex> lk(mu_);
  queue_.push_back(std::move(last));
  cv_.notify_all();
}

bool Loader::next(LoadedBatch& out) {
  if (!active_) return false;
  if (opts_.prefetch == 0) {
    while (step_ < steps_) {
      LoadedBatch lb = run_step(step_++);
      if (!lb.sample.seeds.empty()) {
        out = std::move(lb);
        return true;
      }
    }
    active_ = false;
    return false;
  }
  Item item;
  {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return !queue_.empty(); });
    item = std::move(queue_.front());
    queue_.pop_front();
    cv_.notify_all();
  }
  if (item.end) {
    worker_.join();
    active_ = false;
    if (item.error) std::rethrow_exception(item.error);
    return false;
  }
  out = std::move(item.batch);
  return true;
}

void Loader::finish_epoch() {
  if (opts_.prefetch == 0) {
    if (active_ && size() > 1) {
      while (step_ < steps_) run_step(step_++);
    }
    active_ = false;
    return;
  }
  if (worker_.joinable()) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
      cv_.notify_all();
    }
    worker_.join();
  }
  queue_.clear();
  active_ = false;
}

}  // namespace dsp::pyext
