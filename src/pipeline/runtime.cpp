#include "pipeline/runtime.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <filesystem>
#include <functional>
#include <random>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/half.hpp"
#include "core/logging.hpp"
#include "graph/dataset.hpp"
#include "layout/cache_sizing.hpp"
#include "layout/hotness.hpp"
#include "pipeline/load_batch.hpp"

namespace dsp {
namespace fs = std::filesystem;

void RankOptions::validate() const {
  DSP_CHECK_ARG(!path.empty(), "no partition or dataset directory given");
  DSP_CHECK_ARG(fifo_rows >= 0, "--fifo-rows must be >= 0, got {}", fifo_rows);
  DSP_CHECK_ARG(topology_memory >= -1, "--topology-memory must be >= 0, got {}", topology_memory);
  DSP_CHECK_ARG(fifo_shared_rows >= 0, "--fifo-shared-rows must be >= 0, got {}", fifo_shared_rows);
  DSP_CHECK_ARG(fifo_shared_rows == 0 || fifo_rows > 0,
                "--fifo-shared-rows needs --fifo-rows: the machine's shared level backs each "
                "rank's own FIFO level");
}

RankRuntime::RankRuntime(RankOptions opts) : opts_(std::move(opts)) {
  opts_.validate();
  {
    // Where this rank runs decides its trainer's data channel, so find the node place first, on
    // a communicator of its own.
    auto boot = make_communicator(opts_.backend, opts_.coord.comm);
    const NodePlace place = node_place(*boot);
    transport_ = opts_.transport;
    device_ = rank_device(opts_.device, place.rank, place.size, &transport_);
    DSP_CHECK_ARG(!opts_.emulate_device || !device_.is_cuda(),
                  "the emulated device path runs on a CPU rank, not on {}", device_.str());
    backends_ = make_backends(device_, transport_, opts_.emulate_device, opts_.topology_memory);
  }
  coord_ = make_coordinator(opts_.backend, opts_.coord, device_channels());
  CoordinatedCommunicator& ch = channel(WorkerKind::kMain);
  ch.set_step(-1, 0);
  cores_ = share_cores(ch, device_, opts_.threads, opts_.bind);
  set_thread_pools(cores_.threads);
  partition_if_needed();
  part_ = load_partition(part_dir_, rank(), size());
  // PaGraph's PP: the store gathers [x_v | a_v] rows instead of x_v (the meta keeps F).
  if (!opts_.preaggregate.empty()) part_.features = load_preaggregated(part_, opts_.preaggregate);
  if (!opts_.cache_policy.empty() || opts_.cache_ratio >= 0) {
    if (!partitioned_on_the_fly()) override_cache();  // on the fly: the partition used them
  }
  log_startup();
}

RankRuntime::~RankRuntime() {
  store_.reset();
  if (leader() && !tmp_part_.empty()) {
    std::error_code ec;
    fs::remove_all(tmp_part_, ec);
  }
}

// A GPU rank's sampler, loader and trainer channels are device-space (CSP's tasks and picks, the
// feature rows and the gradient bucket stay on the device): NCCL bootstrapped over the control
// communicator with the nccl transport (one communicator and stream per worker), else the
// control backend staged through pinned host memory (ranks sharing a GPU; host memory with
// emulate_device). The main channel keeps the control backend.
DataCommFactory RankRuntime::device_channels() const {
  const auto make = backends_.device_channel;  // pipeline/backends.hpp
  if (!make) return {};
  const CommOptions comm = opts_.coord.comm;
  const bool trains = opts_.trains;
  return [=](WorkerKind kind, Communicator& control) -> std::unique_ptr<Communicator> {
    if (kind == WorkerKind::kMain || (kind == WorkerKind::kTrainer && !trains)) return nullptr;
    return make(control, comm);
  };
}

// A dataset directory is partitioned on the fly by rank 0, into a temporary directory, with one
// part per rank; every rank learns whether it worked.
void RankRuntime::partition_if_needed() {
  part_dir_ = opts_.path;
  if (path_exists(opts_.path + "/partition.json")) return;
  DSP_CHECK_T(IoError, path_exists(opts_.path + "/dataset.json"),
              "{}: neither a partition directory (partition.json) nor a dataset directory "
              "(dataset.json)",
              opts_.path);
  CoordinatedCommunicator& ch = channel(WorkerKind::kMain);
  int64_t pid = ::getpid();
  ch.broadcast(&pid, 1, DType::kInt64, 0);
  static std::atomic<int> counter{0};  // several runtimes in one process get distinct directories
  tmp_part_ = (fs::temp_directory_path() /
               fmt::format("dsp-{}-{}-{}-{}", opts_.log_name, pid, size(), counter++))
                  .string();
  int64_t ok = 1;
  std::string err;
  if (leader()) {
    try {
      Dataset ds = load_dataset(opts_.path);
      PartitionOptions po;
      po.parts = size();
      po.seed = opts_.seed;
      po.method = opts_.partition_method;
      po.overwrite = true;
      po.verbose = log_level() <= LogLevel::kDebug;
      if (!opts_.cache_policy.empty()) po.cache_policy = opts_.cache_policy;
      if (opts_.cache_ratio >= 0) po.cache_ratio = opts_.cache_ratio;
      if (!opts_.preaggregate.empty()) po.preaggregate = {opts_.preaggregate};
      DSP_INFO("runtime", "partitioning {} into {} part(s) ...", opts_.path, size());
      partition_dataset(ds, po, tmp_part_);
    } catch (const Error& e) {
      ok = 0;
      err = e.what();
    }
  }
  ch.broadcast(&ok, 1, DType::kInt64, 0);
  if (!ok) {
    if (leader()) throw FormatError(err);
    DSP_THROW("rank 0 failed to partition the dataset");
  }
  part_dir_ = tmp_part_;
}

// The cache lists of every part under another policy or ratio, computed identically on every rank
// from replicated data (the in-degree array, or a seeded random score), so the feature position
// lists agree.
void RankRuntime::override_cache() {
  const PartitionMeta& m = part_.meta;
  const double ratio = opts_.cache_ratio < 0 ? m.cache_ratio : opts_.cache_ratio;
  const std::string name = opts_.cache_policy.empty() ? m.cache_policy : opts_.cache_policy;
  check_train_time_cache_policy(name);
  const StaticCachePolicy& policy = static_cache_policy(name);
  CacheScoreInputs in;
  in.num_nodes = m.num_nodes;
  in.in_degree = part_.in_degree.data<int64_t>();
  in.seed = opts_.seed;
  const std::vector<int64_t> score = policy.scores(in);
  all_cached_.clear();
  for (int p = 0; p < m.parts; ++p) {
    const int64_t b = m.offsets[p], e = m.offsets[p + 1];
    const int64_t k = !policy.caches() ? 0 : static_cast<int64_t>(ratio * (e - b));
    all_cached_.push_back(Array::from_vector(top_k_by_score(score, b, e, k)));
  }
  part_.cached = all_cached_[part_.part];
}

double RankRuntime::size_cache_for_batch(int64_t batch_feature_bytes, int64_t prefetch_batches) {
  DSP_CHECK_FORMAT(has_features(), "{}: the partition has no features to cache", part_dir_);
  CacheSizing cs;
  cs.memory_left = opts_.cache_memory > 0 ? opts_.cache_memory : host_available_memory();
  if (device_.is_cuda()) cs.memory_left = free_device_memory(device_);
  cs.batch_feature_bytes = batch_feature_bytes;
  cs.prefetch_batches = prefetch_batches;
  const PartitionMeta& m = part_.meta;
  cs.row_bytes = static_cast<size_t>(part_.features.dim(1)) * dtype_size(part_.features.dtype());
  const int64_t own = m.offsets[rank() + 1] - m.offsets[rank()];
  cs.max_rows = own;
  double ratio = own > 0 ? static_cast<double>(cache_rows_for_memory(cs)) / own : 1.0;
  OpOptions o;
  o.label = "runtime.cache_size";
  channel(WorkerKind::kMain).all_reduce(&ratio, 1, DType::kFloat64, ReduceOp::kMin, o);
  opts_.cache_ratio = ratio;
  override_cache();
  store_.reset();
  if (fifo_on_) enable_fifo();
  if (leader()) {
    DSP_INFO("runtime",
             "cache sized after the first batch: {:.4f} of each part ({} MB left on rank 0, "
             "{:.1f} MB per batch, {} prefetched)",
             ratio, cs.memory_left >> 20, batch_feature_bytes / 1e6, prefetch_batches);
  }
  return ratio;
}

// Rank 0 prints what every rank got: device, cores, threads.
void RankRuntime::log_startup() {
  constexpr int kLine = 160;
  const std::string channels = channel(WorkerKind::kLoader).backend();
  std::string line = fmt::format(
      "rank {}: {}{}, {}", rank(), device_.str(),
      opts_.emulate_device ? " (device path emulated, " + channels + " channels)"
      : transport_.empty() ? ""
                           : " (" + channels + " channels)",
      cores_.describe());
  line.resize(kLine, ' ');
  std::vector<char> all(static_cast<size_t>(size()) * kLine);
  OpOptions o;
  o.label = "runtime.startup";
  channel(WorkerKind::kMain).all_gather(line.data(), all.data(), kLine, DType::kUInt8, o);
  if (!leader()) return;
  for (int r = 0; r < size(); ++r) {
    std::string l(all.data() + static_cast<size_t>(r) * kLine, kLine);
    l.erase(l.find_last_not_of(' ') + 1);
    DSP_INFO("runtime", "{}", l);
  }
}

std::unique_ptr<CollectiveSampler> RankRuntime::make_sampler(const SamplerOptions& so,
                                                             bool self_reliant) {
  const SamplerBackendFactory& backend = backends_.sampler;
  if (self_reliant && part_.meta.hops > 0) {
    DSP_CHECK_ARG(static_cast<int>(so.fanouts.size()) <= part_.meta.hops,
                  "{}: the parts replicate {}-hop neighbourhoods (dsp partition --hops {}) but "
                  "the sampler has {} layers",
                  part_dir_, part_.meta.hops, part_.meta.hops, so.fanouts.size());
    if (!self_comm_) {
      local_ = replicated_view(part_);
      self_comm_ = make_communicator("self");
    }
    return std::make_unique<CollectiveSampler>(local_, *self_comm_, so, backend);
  }
  return std::make_unique<CollectiveSampler>(part_, channel(WorkerKind::kSampler), so, backend);
}

FeatureStore& RankRuntime::store() {
  if (!store_) {
    DSP_CHECK_FORMAT(has_features(), "{}: the partition has no features to gather", part_dir_);
    store_ = std::make_unique<FeatureStore>(part_, channel(WorkerKind::kLoader), all_cached_,
                                            backends_.features);
  }
  return *store_;
}

// BGL's FIFO levels on the store, collective. The shared level's name is drawn by rank 0 (random
// bits, its pid and the time) and broadcast, so the ranks of a machine open one object per job
// and two jobs on a machine never meet. The name lives only while the ranks open it: once every
// rank has (the all_reduce), every rank unlinks it, so no object outlives the job however the job
// ends later (the mappings stay until the stores go). Failures from the store on are agreed
// before anyone creates the object, and failures while creating or attaching after, so every
// rank reaches the unlink before one ends the job.
void RankRuntime::enable_fifo() {
  if (!fifo_requested()) return;
  // Old levels go first: a level's creator unlinks its name when destroyed, which must not hit
  // the object another rank creates again under the same name (the agreement orders the two).
  if (store_) store_->enable_fifo({});
  CoordinatedCommunicator& ch = channel(WorkerKind::kMain);
  OpOptions o;
  o.label = "runtime.fifo";
  if (opts_.fifo_shared_rows > 0 && fifo_name_.empty()) {
    int64_t token = 0;
    if (leader()) {
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
    int64_t failed = err ? rank() : size();  // the lowest failing rank, or size() if none
    ch.all_reduce(&failed, 1, DType::kInt64, ReduceOp::kMin, o);
    return std::make_pair(err, failed);
  };
  auto [store_err, store_failed] = agree([&] { store(); });
  if (store_err) std::rethrow_exception(store_err);
  DSP_CHECK(store_failed == size(), "rank {} failed to build its feature store", store_failed);
  // More rows than nodes hold nothing more.
  const int64_t n = store_->num_nodes();
  const FifoCacheOptions fo{std::min(opts_.fifo_rows, n), std::min(opts_.fifo_shared_rows, n),
                            fifo_name_};
  auto [fifo_err, fifo_failed] = agree([&] { store_->enable_fifo(fo); });
  if (!fifo_name_.empty()) ::shm_unlink(fifo_name_.c_str());  // ENOENT on all but one rank
  if (fifo_err) std::rethrow_exception(fifo_err);
  DSP_CHECK(fifo_failed == size(), "rank {} failed to set up its FIFO feature cache", fifo_failed);
  fifo_on_ = true;
  if (leader()) {
    const double mb = static_cast<double>(store_->row_bytes()) / 1e6;
    DSP_INFO("runtime",
             "FIFO feature cache (BGL) of rows other ranks serve: {} rows per rank ({:.1f} MB){}",
             fo.rows, fo.rows * mb,
             fo.shared_rows > 0
                 ? fmt::format(", {} rows shared by the ranks of each machine ({:.1f} MB)",
                               fo.shared_rows, fo.shared_rows * mb)
                 : "");
  }
}

LoadedBatch RankRuntime::load(SampledBatch&& sb) {
  return load_batch(std::move(sb), has_features() ? &store() : nullptr, part_.labels);
}

PipelineOptions RankRuntime::pipeline_options(PipelineMode mode) const {
  PipelineOptions po;
  po.mode = mode;
  po.threads = cores_.threads;
  if (cores_.bound && static_cast<int>(cores_.cpus.size()) == po.threads) po.cpus = cores_.cpus;
  return po;
}

std::vector<int64_t> RankRuntime::local_ids(const std::string& split) const {
  const Array* ids = split == "train"   ? &part_.seeds
                     : split == "valid" ? &part_.valid_idx
                     : split == "test"  ? &part_.test_idx
                                        : nullptr;
  DSP_CHECK_ARG(ids != nullptr, "split must be train, valid or test, got '{}'", split);
  std::vector<int64_t> out;
  if (!ids->defined()) return out;
  const int64_t b = part_.meta.offsets[rank()], e = part_.meta.offsets[rank() + 1];
  const int64_t* p = ids->data<int64_t>();
  for (int64_t i = 0; i < ids->dim(0); ++i) {
    if (p[i] >= b && p[i] < e) out.push_back(p[i]);
  }
  return out;
}

}  // namespace dsp
