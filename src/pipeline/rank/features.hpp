#pragma once
// A rank's features: its feature store (homogeneous) or one per node type (heterogeneous), built
// on first use on the loader channel and the rank's device; their cache lists (the train-time
// override, PaGraph's sizing after the first batch, BGL's FIFO levels: fifo.cpp); and the loader
// stage and read-ahead over them. Part of its RankRuntime (RankRuntime::features()), which owns
// the partition and the channels it uses and outlives it.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graph/array.hpp"
#include "layout/partition/partition.hpp"
#include "layout/store/feature_store.hpp"
#include "pipeline/pipeline.hpp"

namespace dsp {

class RankRuntime;

class RankFeatures {
 public:
  // `part` is the runtime's partition (the cache override rewrites its cache list, which the
  // sampler reads too) and `backend` its feature backend, both read when first used.
  RankFeatures(RankRuntime& rt, PartitionData& part, const FeatureBackendFactory& backend);
  ~RankFeatures();
  RankFeatures(const RankFeatures&) = delete;
  RankFeatures& operator=(const RankFeatures&) = delete;

  bool has_features() const { return part_.meta.feature_dim > 0; }
  // The feature store (homogeneous), built on first use. The partition must have features.
  FeatureStore& store();
  // A heterogeneous partition's stores, built on first use: one per node type with features,
  // over hetero_type_view (its rows by type id), null for a type without; every part's cache
  // list of the type (the train-time override's too) in type ids.
  const std::vector<FeatureStore*>& type_stores();
  // The loader stage: features of the input nodes (in the store's memory) and labels of the seeds.
  LoadedBatch load(SampledBatch&& sb);
  // Superbatches (FeatureStore::read_ahead): the input rows of `batches`, about to be loaded, read
  // from disk in file order when the store reads its rows from there; none: frees them. Whether
  // the store reads ahead (a homogeneous partition with features, rows beyond memory).
  void read_ahead(const std::vector<const SampledBatch*>& batches);
  bool reads_ahead();
  // The cache lists of every part under the options' policy or ratio
  // (layout/partition/hotness.hpp), computed identically on every rank from replicated data, so
  // the feature position lists agree; the part's own replaces the partition's.
  void override_cache();
  // PaGraph's cache sizing (layout/store/cache_sizing.hpp), collective, before the first load:
  // every rank computes the rows its memory left affords after reserving `prefetch_batches` + 1
  // batches of `batch_feature_bytes`, the job takes the smallest share of a part any rank affords
  // (one ratio, so the position lists agree) and rebuilds the cache lists with it (the policy must
  // be recomputable: in-degree, random or none). Returns that ratio.
  double size_cache_for_batch(int64_t batch_feature_bytes, int64_t prefetch_batches);
  // Adds the FIFO levels of `fifo_rows`/`fifo_shared_rows` (capped at the node count) to the
  // store, building it: collective, before the first load. The shared level's object exists only
  // while the ranks open it (its name is unlinked before this returns), so none is left in
  // /dev/shm however the job ends. size_cache_for_batch keeps the levels (empty again).
  void enable_fifo();
  bool fifo_requested() const;

 private:
  RankRuntime& rt_;
  PartitionData& part_;
  const FeatureBackendFactory& backend_;  // the runtime's (set before the first store)
  double cache_ratio_;             // < 0: the partition's (RankOptions::cache_ratio, then sized)
  std::vector<Array> all_cached_;  // overridden cache lists of every part, or empty
  std::unique_ptr<FeatureStore> store_;
  // Heterogeneous: the per-type views the stores read, the stores, and their pointers.
  std::vector<PartitionData> type_views_;
  std::vector<std::unique_ptr<FeatureStore>> type_stores_;
  std::vector<FeatureStore*> type_store_ptrs_;
  std::string fifo_name_;  // the shared level's name, the same on every rank of the job
  bool fifo_on_ = false;
};

}  // namespace dsp
