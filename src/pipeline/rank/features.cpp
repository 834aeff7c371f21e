#include "pipeline/rank/features.hpp"

#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/memory.hpp"
#include "layout/partition/hotness.hpp"
#include "layout/store/cache_sizing.hpp"
#include "pipeline/load_batch.hpp"
#include "pipeline/rank/runtime.hpp"

namespace dsp {

RankFeatures::RankFeatures(RankRuntime& rt, PartitionData& part,
                           const FeatureBackendFactory& backend)
    : rt_(rt), part_(part), backend_(backend), cache_ratio_(rt.options().cache_ratio) {}

RankFeatures::~RankFeatures() = default;

bool RankFeatures::fifo_requested() const { return rt_.options().fifo_rows > 0; }

void RankFeatures::override_cache() {
  const PartitionMeta& m = part_.meta;
  const RankOptions& o = rt_.options();
  all_cached_ = train_time_cache_lists(o.cache_policy.empty() ? m.cache_policy : o.cache_policy,
                                       cache_ratio_ < 0 ? m.cache_ratio : cache_ratio_, m.offsets,
                                       part_.in_degree.data<int64_t>(), m.num_nodes, o.seed);
  part_.cached = all_cached_[part_.part];
}

double RankFeatures::size_cache_for_batch(int64_t batch_feature_bytes, int64_t prefetch_batches) {
  DSP_CHECK_FORMAT(has_features(), "{}: the partition has no features to cache",
                   rt_.partition_dir());
  CacheSizing cs;
  const int64_t memory = rt_.options().cache_memory;
  cs.memory_left = memory > 0 ? memory : host_available_memory();
  if (rt_.device().is_cuda()) cs.memory_left = free_device_memory(rt_.device());
  cs.batch_feature_bytes = batch_feature_bytes;
  cs.prefetch_batches = prefetch_batches;
  const PartitionMeta& m = part_.meta;
  cs.row_bytes = static_cast<size_t>(part_.features.dim(1)) * dtype_size(part_.features.dtype());
  const int64_t own = m.offsets[rt_.rank() + 1] - m.offsets[rt_.rank()];
  cs.max_rows = own;
  double ratio = own > 0 ? static_cast<double>(cache_rows_for_memory(cs)) / own : 1.0;
  OpOptions o;
  o.label = "runtime.cache_size";
  rt_.channel(WorkerKind::kMain).all_reduce(&ratio, 1, DType::kFloat64, ReduceOp::kMin, o);
  cache_ratio_ = ratio;
  override_cache();
  store_.reset();
  if (fifo_on_) enable_fifo();
  if (rt_.leader()) {
    DSP_INFO("runtime",
             "cache sized after the first batch: {:.4f} of each part ({} MB left on rank 0, "
             "{:.1f} MB per batch, {} prefetched)",
             ratio, cs.memory_left >> 20, batch_feature_bytes / 1e6, prefetch_batches);
  }
  return ratio;
}

FeatureStore& RankFeatures::store() {
  if (!store_) {
    DSP_CHECK_FORMAT(has_features(), "{}: the partition has no features to gather",
                     rt_.partition_dir());
    store_ = std::make_unique<FeatureStore>(part_, rt_.channel(WorkerKind::kLoader), all_cached_,
                                            backend_);
  }
  return *store_;
}

const std::vector<FeatureStore*>& RankFeatures::type_stores() {
  DSP_CHECK_ARG(part_.meta.hetero != nullptr, "{}: not a heterogeneous partition",
                rt_.partition_dir());
  if (!type_store_ptrs_.empty()) return type_store_ptrs_;
  const int T = part_.meta.hetero->num_types();
  type_views_.reserve(T);  // the stores keep references to their views
  for (int t = 0; t < T; ++t) {
    type_views_.push_back(hetero_type_view(part_, t));
    std::unique_ptr<FeatureStore> s;
    if (type_views_.back().features.defined()) {
      s = std::make_unique<FeatureStore>(type_views_.back(), rt_.channel(WorkerKind::kLoader),
                                         hetero_type_cache_lists(part_, all_cached_, t), backend_);
    }
    type_store_ptrs_.push_back(s.get());
    type_stores_.push_back(std::move(s));
  }
  return type_store_ptrs_;
}

LoadedBatch RankFeatures::load(SampledBatch&& sb) {
  if (part_.meta.hetero) {
    return load_hetero_batch(std::move(sb), *part_.meta.hetero, type_stores(), part_.labels);
  }
  return load_batch(std::move(sb), has_features() ? &store() : nullptr, part_.labels);
}

bool RankFeatures::reads_ahead() {
  return !part_.meta.hetero && has_features() && store().backend().reads_ahead();
}

void RankFeatures::read_ahead(const std::vector<const SampledBatch*>& batches) {
  if (!reads_ahead()) return;
  std::vector<int64_t> ids;
  for (const SampledBatch* sb : batches) {
    const std::vector<int64_t>& in = sb->input_nodes();
    ids.insert(ids.end(), in.begin(), in.end());
  }
  store().backend().read_ahead(ids.data(), static_cast<int64_t>(ids.size()));
}

}  // namespace dsp
