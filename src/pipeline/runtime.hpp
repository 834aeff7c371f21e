#pragma once
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
#include "layout/feature_store.hpp"
#include "layout/partition.hpp"
#include "pipeline/backends.hpp"
#include "pipeline/cores.hpp"
#include "pipeline/pipeline.hpp"

namespace dsp {

struct RankOptions {
  // The one check of the rank options below that have one (FIFO levels, topology memory), with
  // the CLI's messages: RankRuntime, dsp train (JobConfig::validate, before any rank starts) and
  // the Python Loader call it. Transport and device are checked where they are resolved
  // (rank_device).
  void validate() const;

  std::string path;  // partition directory, or dataset directory (partitioned on the fly)
  std::string backend = "auto";  // coordinator backend: auto | self | mpi
  CoordinatorOptions coord;
  std::string device = "cpu";  // cpu | cuda | cuda:N (N: first GPU of this node's ranks)
  // How a GPU rank's trainer (gradients) and loader (feature rows) move device buffers: "nccl"
  // (one GPU per rank), "mpi" (staged through pinned host memory, ccc/staged_communicator.hpp, so
  // ranks may share a GPU: NCCL refuses two ranks on one device), or "auto": nccl when the node
  // has a GPU per rank, else mpi. Sampling uses host buffers over MPI either way. A CPU rank
  // takes only "auto" (rank_device refuses the others).
  std::string transport = "auto";
  // GPU ranks: bytes of device memory the sampler's neighbour array may take; beyond it the
  // array is read from pinned host memory through UVA, with the hottest rows that fit on the
  // device (DSP's adjacency position list). -1: half the device's free memory; 0: all through UVA.
  int64_t topology_memory = -1;
  // False when nothing trains on this rank's trainer channel (the Python Loader: the user's model
  // trains): it stays a host channel, so a GPU rank builds no NCCL communicator it never uses.
  bool trains = true;
  int threads = 0;             // per rank; 0: the rank's share of its cores
  bool bind = true;            // bind the process to its share of the cores
  uint64_t seed = 0;           // partitioning (on the fly) and random cache policy
  // On-the-fly partitioning, and the train-time cache override of a partition's lists.
  std::string partition_method = "metis";
  std::string cache_policy;  // empty: the partition's; in-degree | random | none
  double cache_ratio = -1;   // < 0: the partition's
  // PaGraph's sizing (size_cache_for_batch): the host memory the cache may take, bytes; 0: the
  // available memory (MemAvailable). Ignored on a GPU rank: its free device memory decides.
  int64_t cache_memory = 0;
  // PaGraph's PP: the kind (mean, gcn) of pre-aggregated rows the store gathers in place of the
  // features (layout/partition.hpp; on-the-fly partitioning writes them); empty: the features.
  std::string preaggregate;
  // BGL's dynamic cache of the rows other ranks serve (FeatureStore::enable_fifo): level 1 holds
  // `fifo_rows` per rank, level 2 `fifo_shared_rows` in a shared memory object of the machine
  // (needs level 1). 0: off. The entry point calls enable_fifo() once the store's cache is set.
  int64_t fifo_rows = 0;
  int64_t fifo_shared_rows = 0;
  std::string log_name = "dsp";  // names the job in the startup log
  // Tests: a CPU rank run as a GPU rank is, but for the kernels and LibTorch's device: the device
  // sampler and feature backends executed on the host (HostExec), and device-space trainer and
  // loader channels (MPI staged through host memory standing in for the device's). Every
  // protocol, channel and pipeline step of a GPU rank runs, and the job trains exactly what the
  // CPU job trains.
  bool emulate_device = false;
};

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
  const Device& device() const { return device_; }
  const std::string& transport() const { return transport_; }  // "nccl", "mpi" or "" (CPU)
  const CoreShare& cores() const { return cores_; }
  const PartitionData& part() const { return part_; }
  const std::string& partition_dir() const { return part_dir_; }
  bool partitioned_on_the_fly() const { return !tmp_part_.empty(); }
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
  // The loader stage: features of the input nodes (in the store's memory) and labels of the seeds.
  LoadedBatch load(SampledBatch&& sb);
  // Pipeline options over the rank's threads, and its cpus when the process is bound to them (so
  // that `--pipeline auto` binds each stage's share inside them).
  PipelineOptions pipeline_options(PipelineMode mode) const;
  // PaGraph's cache sizing (layout/cache_sizing.hpp), collective, before the first load: every
  // rank computes the rows its memory left affords after reserving `prefetch_batches` + 1 batches
  // of `batch_feature_bytes`, the job takes the smallest share of a part any rank affords (one
  // ratio, so the position lists agree) and rebuilds the cache lists with it (the policy must be
  // recomputable: in-degree, random or none). Returns that ratio.
  double size_cache_for_batch(int64_t batch_feature_bytes, int64_t prefetch_batches);
  // This rank's seeds of a split: "train" (its co-partitioned training seeds), "valid", "test".
  std::vector<int64_t> local_ids(const std::string& split) const;
  // Adds the FIFO levels of `fifo_rows`/`fifo_shared_rows` (capped at the node count) to the
  // store, building it: collective, before the first load. The shared level's object exists only
  // while the ranks open it (its name is unlinked before this returns), so none is left in
  // /dev/shm however the job ends. size_cache_for_batch keeps the levels (empty again).
  void enable_fifo();
  bool fifo_requested() const { return opts_.fifo_rows > 0; }

 private:
  DataCommFactory device_channels() const;
  void partition_if_needed();
  void override_cache();
  void log_startup();

  RankOptions opts_;
  std::unique_ptr<Coordinator> coord_;
  Device device_;
  std::string transport_;
  RankBackends backends_;  // chosen from the device (pipeline/backends.hpp)
  CoreShare cores_;
  std::string part_dir_, tmp_part_;
  PartitionData part_;
  std::vector<Array> all_cached_;  // overridden cache lists of every part, or empty
  // Self-reliant sampling: the replicated view of the part and the self communicator, built on
  // first use.
  PartitionData local_;
  std::unique_ptr<Communicator> self_comm_;
  std::unique_ptr<FeatureStore> store_;
  std::string fifo_name_;  // the shared level's name, the same on every rank of the job
  bool fifo_on_ = false;
};


}  // namespace dsp
