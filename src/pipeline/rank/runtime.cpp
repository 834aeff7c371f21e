#include "pipeline/rank/runtime.hpp"

#include "core/console.hpp"
#include "core/error.hpp"
#include "core/huge_pages.hpp"
#include "core/logging.hpp"
#include "graph/npy.hpp"
#include "layout/store/cache_sizing.hpp"
#include "layout/store/embedding_table.hpp"
#include "layout/partition/hotness.hpp"
#include "pipeline/load_batch.hpp"

namespace dsp {

RankRuntime::RankRuntime(RankOptions opts) : opts_(std::move(opts)) {
  opts_.validate();
  if (!opts_.log_file.empty()) console_set_log_file(opts_.log_file);
  {
    // Where this rank runs decides its trainer's data channel, so find the node place first, on
    // a communicator of its own.
    auto boot = make_communicator(opts_.backend, opts_.coord.comm);
    const NodePlace node = node_place(*boot);
    place_ = place_rank(opts_.device, opts_.transport, node.rank, node.size);
    backends_ = make_backends(place_, opts_.emulate_device, opts_.topology_memory);
  }
  coord_ = make_coordinator(opts_.backend, opts_.coord, device_channels());
  CoordinatedCommunicator& ch = channel(WorkerKind::kMain);
  ch.set_step(-1, 0);
  cores_ = share_cores(ch, place_.device, opts_.threads, opts_.bind);
  set_thread_pools(cores_.threads);
  part_dir_ = on_the_fly_.resolve(opts_, ch);
  part_ = load_partition(part_dir_, rank(), size());
  // The sampler's neighbour array and the feature rows share the page cache: beyond memory
  // together, each is read as from disk (core/huge_pages.hpp).
  note_random_reads(part_.patch.indices.nbytes() + part_.features.nbytes());
  // PaGraph's PP: the store gathers [x_v | a_v] rows instead of x_v (the meta keeps F).
  if (opts_.preaggregate) {
    part_.features = load_preaggregated(part_, *opts_.preaggregate);
    part_.feature_rows = Array();  // pre-aggregated rows are in new id order
  }
  if (!opts_.cache_policy.empty() || opts_.cache_ratio >= 0) {
    if (!partitioned_on_the_fly()) override_cache();  // on the fly: the partition used them
  }
  log_startup();
}

RankRuntime::~RankRuntime() {
  note_random_reads(0);  // this rank's arrays are no longer read
  store_.reset();
  type_stores_.clear();
}

// A GPU rank's sampler, loader and trainer channels are device-space (CSP's tasks and picks, the
// feature rows and the gradient bucket stay on the device): NCCL bootstrapped over the control
// communicator with the nccl transport (one communicator and stream per worker), else the
// control backend staged through pinned host memory (ranks sharing a GPU; host memory with
// emulate_device). The main channel keeps the control backend.
DataCommFactory RankRuntime::device_channels() const {
  const auto make = backends_.device_channel;  // pipeline/rank/backends.hpp
  if (!make) return {};
  const CommOptions comm = opts_.coord.comm;
  const bool trains = opts_.trains;
  return [=](WorkerKind kind, Communicator& control) -> std::unique_ptr<Communicator> {
    if (kind == WorkerKind::kMain || (kind == WorkerKind::kTrainer && !trains)) return nullptr;
    return make(control, comm);
  };
}

// The cache lists of every part under another policy or ratio (layout/partition/hotness.hpp), computed
// identically on every rank from replicated data, so the feature position lists agree.
void RankRuntime::override_cache() {
  const PartitionMeta& m = part_.meta;
  all_cached_ =
      train_time_cache_lists(opts_.cache_policy.empty() ? m.cache_policy : opts_.cache_policy,
                             opts_.cache_ratio < 0 ? m.cache_ratio : opts_.cache_ratio, m.offsets,
                             part_.in_degree.data<int64_t>(), m.num_nodes, opts_.seed);
  part_.cached = all_cached_[part_.part];
}

MemorySpace RankRuntime::embedding_memory() const {
  return backends_.embedding && device().is_cuda() ? MemorySpace::kDevice : MemorySpace::kHost;
}

void RankRuntime::check_embedding_fits(int64_t rows, int64_t dim, EmbeddingOptimizer optimizer,
                                       uint64_t budget) const {
  const MemorySpace space = embedding_memory();
  const uint64_t free_bytes =
      space == MemorySpace::kDevice ? static_cast<uint64_t>(free_device_memory(device())) : 0;
  check_embedding_memory(rows, dim, optimizer, budget, space, free_bytes);
}

double RankRuntime::size_cache_for_batch(int64_t batch_feature_bytes, int64_t prefetch_batches) {
  DSP_CHECK_FORMAT(has_features(), "{}: the partition has no features to cache", part_dir_);
  CacheSizing cs;
  cs.memory_left = opts_.cache_memory > 0 ? opts_.cache_memory : host_available_memory();
  if (device().is_cuda()) cs.memory_left = free_device_memory(device());
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
  std::string line =
      fmt::format("rank {}: {}{}, {}", rank(), device().str(),
                  opts_.emulate_device       ? " (device path emulated, " + channels + " channels)"
                  : place_.device_channels() ? " (" + channels + " channels)"
                                             : "",
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

const std::vector<FeatureStore*>& RankRuntime::type_stores() {
  DSP_CHECK_ARG(hetero(), "{}: not a heterogeneous partition", part_dir_);
  if (!type_store_ptrs_.empty()) return type_store_ptrs_;
  const int T = part_.meta.hetero->num_types();
  type_views_.reserve(T);  // the stores keep references to their views
  for (int t = 0; t < T; ++t) {
    type_views_.push_back(hetero_type_view(part_, t));
    std::unique_ptr<FeatureStore> s;
    if (type_views_.back().features.defined()) {
      s = std::make_unique<FeatureStore>(type_views_.back(), channel(WorkerKind::kLoader),
                                         hetero_type_cache_lists(part_, all_cached_, t),
                                         backends_.features);
    }
    type_store_ptrs_.push_back(s.get());
    type_stores_.push_back(std::move(s));
  }
  return type_store_ptrs_;
}

LoadedBatch RankRuntime::load(SampledBatch&& sb) {
  if (hetero()) {
    return load_hetero_batch(std::move(sb), *part_.meta.hetero, type_stores(), part_.labels);
  }
  return load_batch(std::move(sb), has_features() ? &store() : nullptr, part_.labels);
}

bool RankRuntime::reads_ahead() { return !hetero() && has_features() && store().reads_ahead(); }

void RankRuntime::read_ahead(const std::vector<const SampledBatch*>& batches) {
  if (!reads_ahead()) return;
  std::vector<int64_t> ids;
  for (const SampledBatch* sb : batches) {
    const std::vector<int64_t>& in = sb->input_nodes();
    ids.insert(ids.end(), in.begin(), in.end());
  }
  store().read_ahead(ids.data(), static_cast<int64_t>(ids.size()));
}

PipelineOptions RankRuntime::pipeline_options(PipelineMode mode) const {
  PipelineOptions po;
  po.mode = mode;
  po.threads = cores_.threads;
  if (cores_.bound && static_cast<int>(cores_.cpus.size()) == po.threads) po.cpus = cores_.cpus;
  return po;
}

const Names<Split>& names_of(Split) {
  static const Names<Split> n("split", {{Split::kTrain, "train"},
                                        {Split::kValid, "valid"},
                                        {Split::kTest, "test"},
                                        {Split::kAll, "all"}});
  return n;
}

std::vector<int64_t> RankRuntime::local_ids(Split split) const {
  const Array* ids = split == Split::kTrain   ? &part_.seeds
                     : split == Split::kValid ? &part_.valid_idx
                     : split == Split::kTest  ? &part_.test_idx
                                              : nullptr;
  DSP_CHECK(ids != nullptr, "local_ids: split {} is not one of the dataset's", split);
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
