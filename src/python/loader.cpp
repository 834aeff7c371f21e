#include "python/loader.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/logging.hpp"
#include "graph/dataset.hpp"
#include "pipeline/load_batch.hpp"

namespace dsp::pyext {
namespace fs = std::filesystem;

void LoaderOptions::validate() const {
  // Same checks and messages as JobConfig::validate (`dsp train`).
  DSP_CHECK_ARG(!path.empty(), "no partition or dataset directory given");
  DSP_CHECK_ARG(!fanouts.empty(), "--fanouts must list one fanout per layer");
  for (int f : fanouts) DSP_CHECK_ARG(f > 0, "fanouts must be > 0, got {}", f);
  DSP_CHECK_ARG(batch_size > 0, "batch sizes must be > 0");
  DSP_CHECK_ARG(split == "train" || split == "valid" || split == "test",
                "split must be train, valid or test, got '{}'", split);
  DSP_CHECK_ARG(prefetch >= 0, "prefetch must be >= 0, got {}", prefetch);
  DSP_CHECK_ARG(order == "random" || order == "bfs", "--order must be random or bfs, got '{}'",
                order);
  DSP_CHECK_ARG(bfs_sequences >= 1, "--bfs-sequences must be >= 1, got {}", bfs_sequences);
}


namespace {

std::vector<int64_t> owned(const Array& ids, int64_t begin, int64_t end) {
  std::vector<int64_t> out;
  if (!ids.defined()) return out;
  const int64_t* p = ids.data<int64_t>();
  for (int64_t i = 0; i < ids.dim(0); ++i) {
    if (p[i] >= begin && p[i] < end) out.push_back(p[i]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

Loader::Loader(LoaderOptions opts) : opts_(std::move(opts)) {
  opts_.validate();
  coord_ = make_coordinator(opts_.backend);
  rank_ = coord_->rank();
  size_ = coord_->size();
  CoordinatedCommunicator& main_ch = coord_->channel(WorkerKind::kMain);
  main_ch.set_step(-1, 0);

  // A dataset directory is partitioned by rank 0 into a temporary directory, as `dsp train` does.
  std::string part_dir = opts_.path;
  if (!path_exists(opts_.path + "/partition.json")) {
    DSP_CHECK_T(IoError, path_exists(opts_.path + "/dataset.json"),
                "{}: neither a partition directory (partition.json) nor a dataset directory "
                "(dataset.json)",
                opts_.path);
    int64_t pid = ::getpid();
    main_ch.broadcast(&pid, 1, DType::kInt64, 0);
    static int counter = 0;  // several loaders in one process get distinct directories
    tmp_part_ =
        (fs::temp_directory_path() / fmt::format("dsp-loader-{}-{}-{}", pid, size_, counter++))
            .string();
    int64_t ok = 1;
    std::string err;
    if (rank_ == 0) {
      try {
        Dataset ds = load_dataset(opts_.path);
        PartitionOptions po;
        po.parts = size_;
        po.seed = opts_.seed;
        po.method = opts_.partition_method;
        po.overwrite = true;
        po.verbose = log_level() <= LogLevel::kDebug;
        partition_dataset(ds, po, tmp_part_);
      } catch (const Error& e) {
        ok = 0;
        err = e.what();
      }
    }
    main_ch.broadcast(&ok, 1, DType::kInt64, 0);
    if (!ok) {
      if (rank_ == 0) throw FormatError(err);
      DSP_THROW("rank 0 failed to partition the dataset");
    }
    part_dir = tmp_part_;
  }

  part_ = load_partition(part_dir, rank_, size_);
  const PartitionMeta& meta = part_.meta;
  const int64_t begin = meta.offsets[rank_], end = meta.offsets[rank_ + 1];
  if (opts_.split == "train") {
    seeds_.assign(part_.seeds.data<int64_t>(), part_.seeds.data<int64_t>() + part_.seeds.dim(0));
    std::sort(seeds_.begin(), seeds_.end());
  } else {
    seeds_ = owned(opts_.split == "valid" ? part_.valid_idx : part_.test_idx, begin, end);
  }

  SamplerOptions so;
  so.fanouts = opts_.fanouts;
  so.seed = opts_.seed;
  sampler_ = std::make_unique<CollectiveSampler>(part_, coord_->channel(WorkerKind::kSampler), so);
  if (meta.feature_dim > 0) {
    store_ = std::make_unique<FeatureStore>(part_, coord_->channel(WorkerKind::kLoader));
  }
  sched_ = std::make_unique<EpochScheduler>(seeds_, opts_.batch_size, opts_.seed);
  if (opts_.order == "bfs") sched_->use_bfs_order(part_.patch, begin, {opts_.bfs_sequences, 0});
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
  if (rank_ == 0 && !tmp_part_.empty()) {
    std::error_code ec;
    fs::remove_all(tmp_part_, ec);
  }
}

std::vector<int64_t> Loader::step_seeds(int64_t step) const {
  if (opts_.shuffle) return sched_->batch_seeds(order_, step);
  int64_t n = num_local_seeds();
  int64_t b = std::min(n, step * opts_.batch_size), e = std::min(n, b + opts_.batch_size);
  return std::vector<int64_t>(seeds_.begin() + b, seeds_.begin() + e);
}

LoadedBatch Loader::run_step(int64_t step) {
  std::vector<int64_t> seeds = step_seeds(step);
  coord_->channel(WorkerKind::kSampler).set_step(epoch_, step);
  SampledBatch sb = sampler_->sample(seeds, epoch_, step);
  sb.epoch = epoch_;
  sb.batch = step;
  coord_->channel(WorkerKind::kLoader).set_step(epoch_, step);
  return dsp::load_batch(std::move(sb), store_.get(), part_.labels);
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
        if (stop_ && size_ == 1) break;  // nobody else waits for the remaining steps
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
    if (active_ && size_ > 1) {
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
