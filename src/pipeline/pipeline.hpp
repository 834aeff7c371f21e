#pragma once
// DSP's training pipeline (PPoPP'23 section 4.2): per rank three workers, one thread each,
//   sampler -> [bounded queue] -> loader -> [bounded queue] -> trainer
// so that at steady state the sampler works on batch t+2, the loader on t+1 and the trainer on t.
// Full queues block their producer (capacity 2 by default, as in the paper).
//
// Workers never touch MPI/NCCL: each stage function does its collectives through its coordinated
// channel, coordinator.channel(WorkerKind::kSampler / kLoader / kTrainer), and the pipeline sets
// that channel's step (epoch, batch) before every call, so op ids agree on all ranks.
//
// With read_ahead = K (`dsp train --read-ahead`), the loader takes the sampled batches K at a time:
// it waits for K of them and has stage `read_ahead` read their rows from disk in one sweep before
// it loads the first (superbatches, Ginex VLDB'22).
//
// kSequential (`--pipeline off`, DSP-Seq in the paper's ablation) runs the same stages one after
// another on the calling thread, batch by batch, with all of the rank's threads.
//
// kAuto (`--pipeline auto`) profiles the first batches of the job sequentially, plans per-stage
// core shares (plan.hpp: BGL's min-max rule), runs a short pipelined trial with them when the plan
// predicts a gain, and then keeps whichever mode was faster, on every rank the same (the profile
// is all-reduced). Profile and trial batches are ordinary training batches: every mode trains the
// same batches in the same order, so the choice changes the speed, never the result.
//
// Threads: every thread that runs a stage gets its stage's OpenMP team size (an OpenMP setting is
// per thread: a new worker thread would otherwise start with one thread per machine core) and,
// with shares that name cpus, is bound to them; the trainer's thread also sizes BLAS and, through
// PipelineStages::set_threads, LibTorch.
//
// Failures: the first exception of any worker aborts both queues (no worker stays blocked) and
//  * with a world of one, run_epoch joins the workers and rethrows it;
//  * with more ranks, the job ends: Coordinator::abort_job prints "dsp: error on rank r in the
//    <worker> (epoch e, batch b): <what>" once and aborts every rank with exit code 1. Peers are
//    blocked in collectives this rank will not join, so this is the only bounded way out.
// An epoch that ends with fewer trained batches than agreed steps is an error, never silent.
#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ccc/coordinator.hpp"
#include "csp/block.hpp"
#include "pipeline/plan.hpp"
#include "pipeline/scheduler.hpp"

namespace dsp {

// Pointers to `batches`, in order: a read-ahead group as PipelineStages::read_ahead takes it.
std::vector<const SampledBatch*> batch_pointers(const std::vector<SampledBatch>& batches);

struct PipelineStages {
  // Samples batch `batch` of `epoch` from this rank's `seeds` (may be empty: the rank still joins
  // the collectives). The pipeline stamps epoch/batch on the result.
  std::function<SampledBatch(int64_t epoch, int64_t batch, const std::vector<int64_t>& seeds)>
      sample;
  // Loads features and labels; the result's `sample` is the input (moved in).
  std::function<LoadedBatch(SampledBatch&&)> load;
  // One training step (forward, backward, gradient all-reduce, optimizer step).
  std::function<void(LoadedBatch&&)> train;
  // Optional (PipelineOptions::read_ahead): given the batches the loader is about to load, in
  // order, reads what their loads will read from disk, so that they find it in memory (Ginex's
  // superbatches: the union of their rows read in file order, not each batch's at random). Local:
  // no collectives. Called with no batches once the group's loads are done.
  std::function<void(const std::vector<const SampledBatch*>&)> read_ahead;
  // Optional: sizes the pools of a library the stage uses (LibTorch's intra-op threads for the
  // trainer) on the calling thread, which is about to run stage `k` with `threads` threads. The
  // pipeline itself sets OpenMP's team size on every thread that runs a stage, and BLAS's for the
  // trainer.
  std::function<void(WorkerKind k, int threads)> set_threads;
};

enum class OnWorkerError {
  kAuto,      // kThrow with a world of one, kAbortJob otherwise
  kThrow,     // run_epoch rethrows (only safe when no peer can be waiting on this rank)
  kAbortJob,  // Coordinator::abort_job
};

struct PipelineOptions {
  PipelineMode mode = PipelineMode::kPipelined;
  size_t queue_capacity = 2;
  OnWorkerError on_error = OnWorkerError::kAuto;
  // The rank's threads (sequential stages use them all; 0: OpenMP's count on the constructing
  // thread) and cpus (RankRuntime::cores().cpus when the process is bound to them; empty: the
  // threads are not bound, and auto plans over `threads` virtual cores without binding).
  int threads = 0;
  std::vector<int> cpus;
  // kPipelined: each worker's threads and cpus; a stage with 0 threads gets `threads`, unbound
  // (the default: StageShares::shared).
  StageShares shares = StageShares::shared(0);
  AutoOptions auto_opts;
  bool pace = true;  // TurboGNN's pace control of the sampler's lead (pace.hpp)
  int pace_window = 5;
  // Batches loaded as one group (needs stages.read_ahead; 0 or 1: none): the loader waits until
  // the sampler is this many batches ahead, hands them to stages.read_ahead, then loads them one
  // by one. The sampler's queue then holds a group (pace control off: it needs the lead), and
  // sequential segments sample a group before loading it. The batches and their order do not
  // change.
  int read_ahead = 0;
};

struct StageMetrics {
  double busy_s = 0;  // inside the stage function (its collectives included)
  double idle_s = 0;  // blocked on a queue (pipelined) / running other stages (sequential)
  double comm_s = 0;  // of busy_s: inside coordinated collectives (launch wait + run)
  // CPU seconds of the stage: pipelined, of the worker thread inside the stage function;
  // sequential, of the whole process while the stage ran (its pools and collectives included).
  double cpu_s = 0;
  int64_t batches = 0;
  nlohmann::json to_json() const;
};

struct EpochMetrics {
  int64_t epoch = 0;
  int64_t steps = 0;
  PipelineMode mode = PipelineMode::kPipelined;  // as configured
  std::string ran;  // "on", "off", or "profile" for an epoch auto spent (partly) profiling
  double wall_s = 0;
  StageMetrics sampler, loader, trainer;
  double load_queue_occupancy = 0;   // mean batches waiting for the loader
  double train_queue_occupancy = 0;  // mean batches waiting for the trainer
  int64_t ahead_max = 0;             // most batches sampled and not yet trained
  int64_t pace_throttles = 0;        // times pace control lowered the sampler's limit
  double batches_per_s = 0;
  // Where the CPU went during the epoch: the whole process, and the communication executor (the
  // thread that runs every collective, waits included). What the stage threads and the executor
  // do not account for ran on pool threads (OpenMP, BLAS) or the main thread.
  double cpu_s = 0;
  double comm_cpu_s = 0;
  // {"epoch", "steps", "mode", "ran", "wall_s", "batches_per_s",
  //  "stages": {"sampler": {...}, ...}, "queues": {"load", "train", "ahead_max", "pace_throttles"},
  //  "cpu": {"process_s", "comm_thread_s"}}
  nlohmann::json to_json() const;
};

class Pipeline {
 public:
  // coord and sched must outlive the pipeline.
  Pipeline(Coordinator& coord, EpochScheduler& sched, PipelineStages stages,
           PipelineOptions opts = {});

  // Runs every step of `epoch` (the step count is agreed with all ranks first, through the
  // coordinator's kMain channel). Every rank must call it with the same epochs in the same order.
  EpochMetrics run_epoch(int64_t epoch);

  const PipelineOptions& options() const { return opts_; }
  void set_mode(PipelineMode m);
  // kAuto: what was chosen and why, once the profile is complete (every rank the same); null
  // before.
  const StagePlan* plan() const { return decided_ ? &plan_ : nullptr; }
  // kAuto: the plan, the all-reduced profile and the epoch/batch where it was decided, as JSON
  // (null before the decision).
  nlohmann::json auto_json() const;

 private:
  // Steps [t0, t1) of `epoch`.
  EpochMetrics run_pipelined(int64_t epoch, const std::vector<int64_t>& order, int64_t t0,
                             int64_t t1, const StageShares& shares);
  EpochMetrics run_sequential(int64_t epoch, const std::vector<int64_t>& order, int64_t t0,
                              int64_t t1);
  void run_group(int64_t epoch, const std::vector<int64_t>& order, int64_t g0, int64_t g1,
                 EpochMetrics* m, const char** worker, int64_t* step);
  // kAuto: the mode and length of the next segment from step t of an epoch of `steps`.
  PipelineMode next_segment(int64_t t, int64_t steps, int64_t* n) const;
  void profile_segment(int64_t epoch, const EpochMetrics& seg, int64_t n);
  void enter_stage(WorkerKind k, int threads, const std::vector<int>& cpus);
  bool abort_on_error() const;

  Coordinator& coord_;
  EpochScheduler& sched_;
  PipelineStages stages_;
  PipelineOptions opts_;
  // kAuto. Phases: 0 warm-up batch, 1 sequential profile, 2 pipelined trial, 3 decided.
  int phase_ = 0;
  int64_t phase_done_ = 0;  // batches of the current phase so far
  std::array<StageCost, 3> cost_sum_{};
  double seq_sum_ = 0, trial_sum_ = 0;
  PipelineProfile profile_;
  StagePlan plan_;
  bool decided_ = false;
  int64_t decided_epoch_ = -1, decided_batch_ = -1;
};

}  // namespace dsp
