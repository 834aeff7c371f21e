#pragma once
// The rank room: pipeline/rank/ is the one place a rank is assembled from its options
// (options.hpp): its place and backends (backends.hpp), its partition (on_the_fly.hpp), its
// features and their caches (features.hpp; the FIFO levels: fifo.cpp) and this class, which holds
// them.
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
#include "pipeline/rank/features.hpp"
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
  const CoreShare& cores() const { return cores_; }
  const PartitionData& part() const { return part_; }
  const std::string& partition_dir() const { return part_dir_; }
  const RankOptions& options() const { return opts_; }

  // A sampler on the sampler channel and the rank's device. With `self_reliant` on a partition of
  // self-reliant parts (dsp partition --method pagraph: each part replicates its seeds' L-hop
  // in-neighbourhoods) the sampler reads the replicated rows on this rank alone (self
  // communicator) and draws the blocks CSP would draw; only for this rank's training seeds.
  std::unique_ptr<CollectiveSampler> make_sampler(const SamplerOptions& so,
                                                  bool self_reliant = false);
  // The rank's feature stores, their caches and the loader stage (pipeline/rank/features.hpp).
  RankFeatures& features() { return features_; }
  bool hetero() const { return part_.meta.hetero != nullptr; }
  // Pipeline options over the rank's threads, and its cpus when the process is bound to them (so
  // that `--pipeline auto` binds each stage's share inside them).
  PipelineOptions pipeline_options(PipelineMode mode) const;
  // This rank's seeds of a split: train (its co-partitioned training seeds), valid, test.
  std::vector<int64_t> local_ids(Split split) const;
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
  void log_startup();

  RankOptions opts_;
  std::unique_ptr<Coordinator> coord_;
  RankPlace place_;
  RankBackends backends_;  // chosen from the place (pipeline/rank/backends.hpp)
  CoreShare cores_;
  OnTheFlyPartition on_the_fly_;
  std::string part_dir_;
  PartitionData part_;
  // Self-reliant sampling: the replicated view of the part and the self communicator, built on
  // first use.
  PartitionData local_;
  std::unique_ptr<Communicator> self_comm_;
  RankFeatures features_;  // last: it uses the partition, the channels and the backend
};

}  // namespace dsp
