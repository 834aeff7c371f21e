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
// Dynamic switching (GNNLab section 5.3), `Switch` other than kOff. A step no longer has one batch
// per trainer but one per *slot*, P slots in all: slot v holds the batches that rank v of a P-rank
// symmetric job trains (seeds of the parts p % P == v, its scheduler, its dropout stream). Slot v
// is sampled by sampler T + v % S and trained by trainer v % T, so without switching the trainers
// of slots v >= T train two slots a step; each sampler samples exactly one such extra slot. With
// switching, a sampler whose global queue is full (its sampler worker has `full_at` or more
// batches ready behind the one being sent) keeps its extra slot of that step and trains it itself
// instead of sending it. Who trains a slot is decided at run time and told to the trainers in the
// step's all-to-all; what is trained is not:
//
//   Contract. Every step trains exactly the P batches of the P-rank symmetric job, each with the
//   blocks, features, labels and dropout mask that job's rank v uses (keyed by the slot, not by
//   the rank that runs it). Each slot's gradient (and loss and seed count) lands in its own row of
//   a P-row buffer; the all-reduce of that buffer adds exact zeros to each row (exactly one rank
//   fills it), and every rank then sums the rows in slot order 0, 1, ..., P-1 (Trainer::
//   train_slots). So the update is a function of the step's batches only, bit-identical whoever
//   trains which slot (never, always or dynamically switching), and bit-identical to a symmetric
//   job that reduces the same way (train_slots with slot = rank). Against a symmetric job that
//   uses the plain gradient all-reduce it is bit-identical for P <= 2 (a sum of two terms does not
//   depend on the order); for P >= 3 MPI's reduction order is its own, and the two agree up to
//   the rounding of a differently ordered float sum of the same P gradients. All ranks must run
//   the train step on the same number of threads (LibTorch's reductions depend on it).
//
// Switching costs one P-row gradient all-reduce instead of a one-row one, and only pays where a
// sampler idles: on a rank whose sampling and loading for its slots take less than a train step.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ccc/coordinator.hpp"
#include "core/choice.hpp"
#include "csp/block.hpp"
#include "csp/sampler.hpp"
#include "layout/partition/partition.hpp"
#include "layout/store/feature_store.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/scheduler.hpp"

namespace dsp {

// GNNLab's allocation rule over measured per-batch stage times: K = train_s / sample_s, N_s =
// ceil(ranks / (K + 1)) samplers, kept within [1, ranks - 1] (the formula asks for every rank
// when sampling costs far more than training: one rank must train). One rank: no roles (0
// samplers, the symmetric layout). InvalidArgument for ranks < 1 or non-positive times. Pure.
struct RoleAllocation {
  int ranks = 1;
  double sample_s = 0, train_s = 0;  // per batch, as measured
  double k = 0;                      // train_s / sample_s
  double formula = 0;                // ranks / (K + 1), before rounding up
  int samplers = 0;                  // chosen
  std::string why;                   // one line: the times, K, the formula and the choice
  nlohmann::json to_json() const;
};
RoleAllocation gnnlab_allocation(int ranks, double sample_s, double train_s);
// gnnlab_allocation(..).samplers; InvalidArgument for fewer than 2 ranks (roles need both kinds).
int gnnlab_samplers(int ranks, double sample_s, double train_s);

// The measured side of GNNLab's rule, for `--roles auto`: one warm-up batch and then `batches`
// batches of `epoch` through the symmetric `stages` (sample, load) sequentially on every rank,
// each loaded batch also passed to `train_probe`, which must time a train step of it without
// changing the model (Trainer::time_backward: forward and backward, no update) and return its
// seconds. Per-batch means of sample+load and train, max over ranks (all-reduced on the kMain
// channel), into gnnlab_allocation. `sched` is the rank's symmetric scheduler (its steps need not
// be agreed). Collective: every rank calls it at the same point.
RoleAllocation profile_roles(Coordinator& coord, const EpochScheduler& sched,
                             const PipelineStages& stages,
                             const std::function<double(const LoadedBatch&)>& train_probe,
                             int64_t epoch, int batches = 4);

// Dynamic switching of sampler ranks to training (header comment).
enum class RoleSwitch {
  kOff,        // one slot per trainer (the T-rank symmetric job's batches)
  kNever,      // P slots, never switch: trainers of the extra slots train two a step
  kQueueFull,  // P slots, a sampler trains its extra slot while its queue is full
  kAlways,     // P slots, every sampler trains its extra slot every step (tests)
};
const Names<RoleSwitch>& names_of(RoleSwitch);  // off, on (kQueueFull), always, never

struct RoleLayout {
  int ranks = 2;
  int samplers = 1;
  RoleSwitch switching = RoleSwitch::kOff;
  // kQueueFull: the queue counts as full when the sampler has this many steps' batches ready
  // behind the one being sent (1: it is a step ahead, so it would only wait).
  int full_at = 1;
  int trainers() const { return ranks - samplers; }
  bool is_sampler(int rank) const { return rank >= trainers(); }
  // Batches per step: one per trainer without switching, one per rank with it.
  int slots() const { return switching == RoleSwitch::kOff ? trainers() : ranks; }
  // The sampler rank that produces slot v's batches, and the trainer that trains them unless a
  // sampler switches.
  int sampler_for(int slot) const { return trainers() + slot % samplers; }
  int owner(int slot) const { return slot % trainers(); }
  // The slots whose batches sampler rank `rank` produces, ascending.
  std::vector<int> slots_of(int rank) const;
  // The one slot of sampler rank `rank` that it may train itself (its slot >= T); -1 without
  // switching.
  int extra_slot(int rank) const;
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

// A rank's batches of one step with switching: (slot, batch), ascending slots, possibly none.
using SlotBatches = std::vector<std::pair<int, LoadedBatch>>;
// Trains one step of `slots` slots from this rank's share (collective: every rank calls it every
// step; Trainer::train_slots).
using SlotTrain = std::function<void(SlotBatches&& mine, int slots)>;

// The stages of one rank of a role layout, for a Pipeline built over scheduler(). Without
// switching `train` runs on every rank: trainers get their batch, samplers an empty one (no
// seeds, the model's block count) so that they join the gradient all-reduce. With switching
// `train_slots` runs instead, with the slots the rank trains this step. `local` is needed on
// sampler ranks only.
class RoleStages {
 public:
  // `seeds[v]`: slot v's seeds (trainer_seeds(dir, v, layout.slots())), for every slot.
  // `batch_size` and `seed` as the symmetric run's scheduler.
  RoleStages(Coordinator& coord, RoleLayout layout, const std::vector<std::vector<int64_t>>& seeds,
             int64_t batch_size, uint64_t seed, LocalStages local,
             std::function<void(LoadedBatch&&)> train, SlotTrain train_slots = {});
  ~RoleStages();

  const RoleLayout& layout() const { return layout_; }
  bool sampler() const { return layout_.is_sampler(rank_); }
  // The scheduler the Pipeline runs over: without switching a trainer's own seeds, none on a
  // sampler (the step agreement then takes the trainers' steps); with switching, on every rank,
  // the seeds of the largest slot (the steps of the P-rank symmetric job).
  EpochScheduler& scheduler() { return *own_; }
  PipelineStages stages();
  // Batches this rank trained itself after switching (sampler ranks), since construction.
  int64_t switched() const { return switched_; }

 private:
  SampledBatch sample(int64_t epoch, int64_t batch);
  LoadedBatch exchange(SampledBatch&& sb);
  void train(LoadedBatch&& lb);
  // The batches this rank received in a step's all-to-all, checked against the layout.
  SlotBatches received(const std::vector<uint8_t>& recv, const std::vector<int64_t>& counts,
                       int64_t epoch, int64_t batch) const;
  const std::vector<int64_t>& order(int trainer, int64_t epoch);

  struct Pending;
  Coordinator& coord_;
  RoleLayout layout_;
  int rank_;
  std::vector<EpochScheduler> scheds_;  // per slot (sampler ranks)
  std::unique_ptr<EpochScheduler> own_;
  LocalStages local_;
  std::function<void(LoadedBatch&&)> train_;
  SlotTrain train_slots_;
  std::vector<std::vector<int64_t>> orders_;  // per slot, of epoch order_epoch_[v]
  std::vector<int64_t> order_epoch_;
  std::unique_ptr<Pending> pending_;
  std::atomic<int64_t> switched_{0};
};

// One rank of a role layout over the partition in `dir`, built the same way for `dsp train
// --roles` and `dsp bench pipeline --modes roles`: slot seeds from trainer_seeds (with
// `filter`), a WholeGraphStages on sampler ranks. `train`, `train_slots` as RoleStages'.
struct RoleRank {
  std::unique_ptr<WholeGraphStages> whole;  // sampler ranks
  std::unique_ptr<RoleStages> roles;
};
RoleRank make_role_rank(Coordinator& coord, const std::string& dir, RoleLayout layout,
                        int64_t batch_size, uint64_t seed, const SamplerOptions& so,
                        std::function<void(LoadedBatch&&)> train, const SeedFilter& filter = {},
                        SlotTrain train_slots = {});

}  // namespace dsp
