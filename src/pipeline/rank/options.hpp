#pragma once
// What a rank is built from (RankRuntime, pipeline/rank/runtime.hpp): its options, their defaults
// and their one check. dsp train (JobConfig), dsp bench and the Python Loader fill a RankOptions;
// RankRuntime validates it, and dsp train validates it again before any rank starts so a bad flag
// ends the job once, with the same message.
#include <cstdint>
#include <optional>
#include <string>

#include "ccc/coordinator.hpp"
#include "core/device.hpp"
#include "core/options.hpp"
#include "layout/partition/partition.hpp"

namespace dsp {

// How a GPU rank's trainer (gradients) and loader (feature rows) move device buffers: kNccl (one
// GPU per rank), kMpi (staged through pinned host memory, ccc/staged_communicator.hpp, so ranks
// may share a GPU: NCCL refuses two ranks on one device), or kAuto: nccl when the node has a GPU
// per rank, else mpi. Sampling uses host buffers over MPI either way. A CPU rank takes only kAuto.
enum class Transport { kAuto, kNccl, kMpi };
const Names<Transport>& names_of(Transport);  // auto, nccl, mpi

struct RankOptions {
  // The one check of these options, with the CLI's messages: RankRuntime, dsp train
  // (JobConfig::validate, before any rank starts) and the Python Loader call it.
  void validate() const;
  // memory_budget when given, else `fallback` (each entry point's default share).
  uint64_t budget_or(uint64_t fallback) const {
    return memory_budget > 0 ? static_cast<uint64_t>(memory_budget) : fallback;
  }

  std::string path;  // partition directory, or dataset directory (partitioned on the fly)
  std::string backend = "auto";  // coordinator backend: auto | self | mpi
  CoordinatorOptions coord;
  // cpu, or the first GPU of this node's ranks (cuda = cuda:0): each rank takes the GPU of its
  // node rank past it (pipeline/rank/backends.hpp, place_rank).
  Device device = Device::cpu();
  Transport transport = Transport::kAuto;
  // GPU ranks: bytes of device memory the sampler's neighbour array may take; beyond it the
  // array is read from pinned host memory through UVA, with the hottest rows that fit on the
  // device (DSP's adjacency position list). -1: half the device's free memory; 0: all through UVA.
  int64_t topology_memory = -1;
  // False when nothing trains on this rank's trainer channel (the Python Loader: the user's model
  // trains): it stays a host channel, so a GPU rank builds no NCCL communicator it never uses.
  bool trains = true;
  int threads = 0;    // per rank; 0: the rank's share of its cores
  bool bind = true;   // bind the process to its share of the cores
  uint64_t seed = 0;  // partitioning (on the fly) and random cache policy
  // On-the-fly partitioning, and the train-time cache override of a partition's lists.
  PartitionMethod partition_method = PartitionMethod::kMetis;
  std::string cache_policy;  // empty: the partition's; in-degree | random | none
  double cache_ratio = -1;   // < 0: the partition's
  // PaGraph's sizing (size_cache_for_batch): the host memory the cache may take, bytes; 0: the
  // available memory (MemAvailable). Ignored on a GPU rank: its free device memory decides.
  int64_t cache_memory = 0;
  // Bytes of host memory this rank's process may use: its planned allocations (rank 0's
  // on-the-fly partition, a bench's feature store and batches, a learnable embedding table,
  // layer-wise inference) are estimated first and refused with one line naming --memory-budget
  // when they do not fit (core/memory.hpp). 0: each entry point's default (budget_or).
  int64_t memory_budget = 0;
  // PaGraph's PP: the kind (mean, gcn) of pre-aggregated rows the store gathers in place of the
  // features (layout/partition/partition.hpp; on-the-fly partitioning writes them); empty: the
  // features.
  std::optional<Preaggregation> preaggregate;
  // BGL's dynamic cache of the rows other ranks serve (FeatureStore::enable_fifo): level 1 holds
  // `fifo_rows` per rank, level 2 `fifo_shared_rows` in a shared memory object of the machine
  // (needs level 1). 0: off. The entry point calls enable_fifo() once the store's cache is set.
  int64_t fifo_rows = 0;
  int64_t fifo_shared_rows = 0;
  std::string log_name = "dsp";  // names the job in the startup log
  // Every rank appends its log lines, and rank 0 its results, to this file too (core/console.hpp).
  std::string log_file;
  // --emulate-device (tests, and the benches' host round-trip counts): a CPU rank run as a GPU
  // rank is, but for the kernels and LibTorch's device: the device
  // sampler and feature backends executed on the host (HostExec), and device-space trainer and
  // loader channels (MPI staged through host memory standing in for the device's). Every
  // protocol, channel and pipeline step of a GPU rank runs, and the job trains exactly what the
  // CPU job trains.
  bool emulate_device = false;
};

// The rank options a user sets (core/options.hpp): path and backend (keys only), device,
// transport, topology memory, the cache override and memory, the FIFO levels. dsp train's table
// embeds them (JobConfig::rank) and the Python Loader reads its keywords with them, so each has
// one flag, one key, one parser and, in validate(), one check.
const OptionTable<RankOptions>& rank_options_table();

}  // namespace dsp
