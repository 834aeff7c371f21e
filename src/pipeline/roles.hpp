#pragma once
// GNNLab's factored design (EuroSys'22 section 4): instead of every rank running every stage on
// its own share of the work (DSP's symmetric layout), some ranks only sample (and load) and the
// others only train, joined by a global queue.
//
// Layout: of P ranks the last S are samplers, the first T = P - S trainers. Each sampler holds the
// whole topology (every part of the partition, concatenated: parts are contiguous id ranges) and
// maps the whole feature file, so it samples and gathers with no peer. Trainer j trains the
// batches of "virtual rank" j: the seeds of the parts p with p % T == j, scheduled exactly as a
// symmetric rank would (EpochScheduler over the same seeds, batch size and seed). Trainer j's
// batches are sampled by sampler T + j % S.
//
// The global queue: per step, the loader worker of every rank joins one all-to-all on the loader
// channel in which each sampler sends each of its trainers that trainer's loaded batch (blocks,
// features, labels, packed as bytes). The pipeline's bounded queues in front of it and behind it
// are the queue's depth: a sampler runs up to `queue_capacity` batches ahead of its trainers.
// Sampler ranks join the trainers' gradient all-reduce with an empty batch (their replica of the
// model stays identical, contributing nothing).
//
// Same result as the symmetric run: the blocks of a batch are a function of (seed, epoch, batch,
// seeds) only (csp/sampler.hpp), so trainer j receives exactly the batch that rank j of a T-rank
// symmetric job on a T-part partition loads, and trains it with the same dropout stream (rank j);
// the gradient all-reduce adds exact zeros from the samplers. With two trainers (any S) the
// summed gradients are bit-identical whatever the reduction order.
//
// Failures are the pipeline's: an exception in any worker of any rank, sampler-only ranks
// included, ends the job through Coordinator::abort_job.
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ccc/coordinator.hpp"
#include "csp/block.hpp"
#include "csp/sampler.hpp"
#include "layout/feature_store.hpp"
#include "layout/partition.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/scheduler.hpp"

namespace dsp {

// GNNLab's allocation rule: with K = train_s / sample_s (per batch, measured), N_s =
// ceil(ranks / (K + 1)) samplers, at least 1 and at most ranks - 1. InvalidArgument for fewer
// than 2 ranks or non-positive times.
int gnnlab_samplers(int ranks, double sample_s, double train_s);

struct RoleLayout {
  int ranks = 2;
  int samplers = 1;
  int trainers() const { return ranks - samplers; }
  bool is_sampler(int rank) const { return rank >= trainers(); }
  // The sampler rank that produces trainer j's batches.
  int sampler_for(int trainer) const { return trainers() + trainer % samplers; }
  // The trainers (ranks) whose batches sampler rank `rank` produces, ascending.
  std::vector<int> trainers_of(int rank) const;
  void validate() const;  // InvalidArgument unless 1 <= samplers < ranks
  nlohmann::json to_json() const;
};

// The whole graph of the partition in `dir` as one part (rows of every part concatenated, no
// cache list), for a rank that samples and gathers without peers. Errors are load_partition's.
PartitionData load_whole_partition(const std::string& dir);

// A part's training seeds -> the ones a job uses (bench: a random subset).
using SeedFilter = std::function<std::vector<int64_t>(std::vector<int64_t>)>;

// Trainer j's seeds of T trainers, ascending, each part's seeds passed through `filter` first:
// when T divides the parts, the seeds of the parts p with p % T == j (with as many parts as
// trainers: exactly what rank j of a symmetric job trains); otherwise every T-th of all seeds in
// id order from the j-th (so that the trainers get equal shares).
std::vector<int64_t> trainer_seeds(const std::string& dir, int trainer, int trainers,
                                   const SeedFilter& filter = {});

// The global queue's wire format for a loaded batch with host features.
std::vector<uint8_t> pack_batch(const LoadedBatch& b);
// FormatError naming the fault for a truncated or inconsistent buffer.
LoadedBatch unpack_batch(const uint8_t* data, size_t size);

// What a sampler rank runs locally, without peers: sample the seeds of (epoch, batch) on the
// whole graph, and load the result (features and labels).
struct LocalStages {
  std::function<SampledBatch(int64_t epoch, int64_t batch, const std::vector<int64_t>& seeds)>
      sample;
  std::function<LoadedBatch(SampledBatch&&)> load;
};

// A sampler rank's local stages: the whole graph of the partition in `dir`, sampled by the CPU
// backend over a communicator of one, features gathered from the mapped file.
class WholeGraphStages {
 public:
  WholeGraphStages(const std::string& dir, const SamplerOptions& so);
  ~WholeGraphStages();
  LocalStages stages();

 private:
  PartitionData part_;
  std::unique_ptr<Communicator> self_s_, self_l_;
  std::unique_ptr<CollectiveSampler> sampler_;
  std::unique_ptr<FeatureStore> store_;
};

// The stages of one rank of a role layout, for a Pipeline built over scheduler(). `train` runs on
// every rank: trainers get their batch, samplers an empty one (no seeds, the model's block count)
// so that they join the gradient all-reduce. `local` is needed on sampler ranks only.
class RoleStages {
 public:
  // `seeds[j]`: trainer j's seeds (trainer_seeds), for every trainer j (samplers need theirs;
  // a trainer uses its own). `batch_size` and `seed` as the symmetric run's scheduler.
  RoleStages(Coordinator& coord, RoleLayout layout, const std::vector<std::vector<int64_t>>& seeds,
             int64_t batch_size, uint64_t seed, LocalStages local,
             std::function<void(LoadedBatch&&)> train);
  ~RoleStages();

  const RoleLayout& layout() const { return layout_; }
  bool sampler() const { return layout_.is_sampler(rank_); }
  // The scheduler the Pipeline runs over: a trainer's own seeds; none on a sampler (the step
  // agreement then takes the trainers' steps).
  EpochScheduler& scheduler() { return *own_; }
  PipelineStages stages();

 private:
  SampledBatch sample(int64_t epoch, int64_t batch);
  LoadedBatch exchange(SampledBatch&& sb);
  const std::vector<int64_t>& order(int trainer, int64_t epoch);

  struct Pending;
  Coordinator& coord_;
  RoleLayout layout_;
  int rank_;
  std::vector<EpochScheduler> scheds_;  // per trainer (sampler ranks)
  std::unique_ptr<EpochScheduler> own_;
  LocalStages local_;
  std::function<void(LoadedBatch&&)> train_;
  std::vector<std::vector<int64_t>> orders_;  // per trainer, of epoch order_epoch_[j]
  std::vector<int64_t> order_epoch_;
  std::unique_ptr<Pending> pending_;
};

// One rank of a role layout over the partition in `dir`, built the same way for `dsp train
// --roles` and `dsp bench pipeline --modes roles`: trainer seeds from trainer_seeds (with
// `filter`), a WholeGraphStages on sampler ranks. `train` as RoleStages'.
struct RoleRank {
  std::unique_ptr<WholeGraphStages> whole;  // sampler ranks
  std::unique_ptr<RoleStages> roles;
};
RoleRank make_role_rank(Coordinator& coord, const std::string& dir, RoleLayout layout,
                        int64_t batch_size, uint64_t seed, const SamplerOptions& so,
                        std::function<void(LoadedBatch&&)> train, const SeedFilter& filter = {});

}  // namespace dsp
