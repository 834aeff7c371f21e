#pragma once
// The rank room: pipeline/rank/ is the one place a rank is assembled from its options
// (options.hpp): its place and backends (backends.hpp), its partition (on_the_fly.hpp), its caches
// (the train-time override, the FIFO levels: fifo.cpp) and this class, which holds them.
//
// One rank of a dsp job, built one way for every entry point (`dsp train`, `dsp bench`, the Python
// Loader): the coordinator, the rank's device and share of the cores, its part of the partition
// (partitioned on the fly from a dataset directory), the cache lists, and factories for the
// sampler, the feature store and the loader stage on the rank's device.
//
// Construction is collective (every rank of the job builds its RankRuntime at the same point):
// it agrees the node's core split, and rank 0 partitions a dataset directory into a temporary
// directory that it removes when its runtime is destroyed. An error on one rank during
// construction is an error of that rank: entry points end the job with it (Coordinator::abort_job)
// unless every rank fails alike (a bad flag).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ccc/coordinator.hpp"
#include "core/device.hpp"
#include "csp/sampler.hpp"
#include "layout/partition/partition.hpp"
#include "layout/store/embedding_table.hpp"
#include "layout/store/feature_store.hpp"
#include "pipeline/cores.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/rank/backends.hpp"
#include "pipeline/rank/on_the_fly.hpp"
#include "pipeline/rank/options.hpp"

namespace dsp {

// A dataset's node split: train (a part's co-partitioned seeds), valid, test; all (every node of a
// part: dsp.Loader's split='all').
enum class Split { kTrain, kValid, kTest, kAll };
const Names<Split>& names_of(Split);  // train, valid, test, all

class RankRuntime {
 public:
  explicit RankRuntime(RankOptions opts);
  ~RankRuntime();
  RankRuntime(const RankRuntime&) = delete;
  RankRuntime& operator=(const RankRuntime&) = delete;

  int rank() const { return coord_->rank(); }
  int size() const { return coord_->size(); }
  bool leader() const { return rank() == 0; }
  Coordinator& coord() { return *coord_; }
  CoordinatedCommunicator& channel(WorkerKind k) { return coord_->channel(k); }
  const Device& device() const { return place_.device; }
  const RankPlace& place() const { return place_; }
  const CoreShare& cores() const { return cores_; }
  const PartitionData& part() const { return part_; }
  const std::string& partition_dir() const { return part_dir_; }
  bool partitioned_on_the_fly() const { return on_the_fly_.active(); }
  const RankOptions& options() const { return opts_; }

  // A sampler on the sampler channel and the rank's device. With `self_reliant` on a partition of
  // self-reliant parts (dsp partition --method pagraph: each part replicates its seeds' L-hop
  // in-neighbourhoods) the sampler reads the replicated rows on this rank alone (self
  // communicator) and draws the blocks CSP would draw; only for this rank's training seeds.
  std::unique_ptr<CollectiveSampler> make_sampler(const SamplerOptions& so,
                                                  bool self_reliant = false);
  // The feature store (on the loader channel, the rank's device), built on first use. The
  // partition must have features.
  FeatureStore& store();
  bool has_features() const { return part_.meta.feature_dim > 0; }
  // A heterogeneous partition's stores (on the loader channel, the rank's device), built on first
  // use: one per node type with features, over hetero_type_view (its rows by type id), null for a
  // type without; every part's cache list of the type (the train-time override's too) in type ids.
  const std::vector<FeatureStore*>& type_stores();
  bool hetero() const { return part_.meta.hetero != nullptr; }
  // The loader stage: features of the input nodes (in the store's memory) and labels of the seeds.
  LoadedBatch load(SampledBatch&& sb);
  // Superbatches (FeatureStore::read_ahead): the input rows of `batches`, about to be loaded, read
  // from disk in file order when the store reads its rows from there; none: frees them. Whether
  // the rank's store reads ahead (a homogeneous partition with features, rows beyond memory).
  void read_ahead(const std::vector<const SampledBatch*>& batches);
  bool reads_ahead();
  // Pipeline options over the rank's threads, and its cpus when the process is bound to them (so
  // that `--pipeline auto` binds each stage's share inside them).
  PipelineOptions pipeline_options(PipelineMode mode) const;
  // PaGraph's cache sizing (layout/store/cache_sizing.hpp), collective, before the first load:
  // every rank computes the rows its memory left affords after reserving `prefetch_batches` + 1
  // batches of `batch_feature_bytes`, the job takes the smallest share of a part any rank affords
  // (one ratio, so the position lists agree) and rebuilds the cache lists with it (the policy must
  // be recomputable: in-degree, random or none). Returns that ratio.
  double size_cache_for_batch(int64_t batch_feature_bytes, int64_t prefetch_batches);
  // This rank's seeds of a split: train (its co-partitioned training seeds), valid, test.
  std::vector<int64_t> local_ids(Split split) const;
  // Adds the FIFO levels of `fifo_rows`/`fifo_shared_rows` (capped at the node count) to the
  // store, building it: collective, before the first load. The shared level's object exists only
  // while the ranks open it (its name is unlinked before this returns), so none is left in
  // /dev/shm however the job ends. size_cache_for_batch keeps the levels (empty again).
  void enable_fifo();
  bool fifo_requested() const { return opts_.fifo_rows > 0; }
  // The embedding table's storage on this rank, for EmbeddingTable's `storage` argument: device
  // memory on a GPU rank (gather's out and apply_gradients' grads are then device pointers: see
  // EmbeddingTable::memory()), the device path on the host with emulate_device, empty (host)
  // otherwise.
  const EmbeddingStorageFactory& embedding_storage() const { return backends_.embedding; }
  MemorySpace embedding_memory() const;
  // check_embedding_memory for that storage: a device table's rows against the device's free
  // memory, its host part (and a host table) against `budget`.
  void check_embedding_fits(int64_t rows, int64_t dim, EmbeddingOptimizer optimizer,
                            uint64_t budget) const;

 private:
  DataCommFactory device_channels() const;
  void override_cache();
  void log_startup();

  RankOptions opts_;
  std::unique_ptr<Coordinator> coord_;
  RankPlace place_;
  RankBackends backends_;  // chosen from the place (pipeline/rank/backends.hpp)
  CoreShare cores_;
  OnTheFlyPartition on_the_fly_;
  std::string part_dir_;
  PartitionData part_;
  std::vector<Array> all_cached_;  // overridden cache lists of every part, or empty
  // Self-reliant sampling: the replicated view of the part and the self communicator, built on
  // first use.
  PartitionData local_;
  std::unique_ptr<Communicator> self_comm_;
  std::unique_ptr<FeatureStore> store_;
  // Heterogeneous: the per-type views the stores read, the stores, and their pointers.
  std::vector<PartitionData> type_views_;
  std::vector<std::unique_ptr<FeatureStore>> type_stores_;
  std::vector<FeatureStore*> type_store_ptrs_;
  std::string fifo_name_;  // the shared level's name, the same on every rank of the job
  bool fifo_on_ = false;
};

}  // namespace dsp
