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
// kSequential (`--pipeline off`, DSP-Seq in the paper's ablation) runs the same stages one after
// another on the calling thread, batch by batch.
//
// Failures: the first exception of any worker aborts both queues (no worker stays blocked) and
//  * with a world of one, run_epoch joins the workers and rethrows it;
//  * with more ranks, the job ends: Coordinator::abort_job prints "dsp: error on rank r in the
//    <worker> (epoch e, batch b): <what>" once and aborts every rank with exit code 1. Peers are
//    blocked in collectives this rank will not join, so this is the only bounded way out.
// An epoch that ends with fewer trained batches than agreed steps is an error, never silent.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ccc/coordinator.hpp"
#include "csp/block.hpp"
#include "pipeline/scheduler.hpp"

namespace dsp {

enum class PipelineMode { kPipelined, kSequential };
// "on" | "pipelined" -> kPipelined, "off" | "sequential" -> kSequential; else InvalidArgument.
PipelineMode parse_pipeline_mode(const std::string& s);
const char* pipeline_mode_name(PipelineMode m);  // "on" | "off"

struct PipelineStages {
  // Samples batch `batch` of `epoch` from this rank's `seeds` (may be empty: the rank still joins
  // the collectives). The pipeline stamps epoch/batch on the result.
  std::function<SampledBatch(int64_t epoch, int64_t batch, const std::vector<int64_t>& seeds)>
      sample;
  // Loads features and labels; the result's `sample` is the input (moved in).
  std::function<LoadedBatch(SampledBatch&&)> load;
  // One training step (forward, backward, gradient all-reduce, optimizer step).
  std::function<void(LoadedBatch&&)> train;
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
};

struct StageMetrics {
  double busy_s = 0;  // inside the stage function (its collectives included)
  double idle_s = 0;  // blocked on a queue (pipelined) / running other stages (sequential)
  double comm_s = 0;  // of busy_s: inside coordinated collectives (launch wait + run)
  int64_t batches = 0;
  nlohmann::json to_json() const;
};

struct EpochMetrics {
  int64_t epoch = 0;
  int64_t steps = 0;
  PipelineMode mode = PipelineMode::kPipelined;
  double wall_s = 0;
  StageMetrics sampler, loader, trainer;
  double load_queue_occupancy = 0;   // mean batches waiting for the loader
  double train_queue_occupancy = 0;  // mean batches waiting for the trainer
  double batches_per_s = 0;
  // {"epoch", "steps", "mode", "wall_s", "batches_per_s", "stages": {"sampler": {...}, ...},
  //  "queues": {"load": occupancy, "train": occupancy}}
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
  void set_mode(PipelineMode m) { opts_.mode = m; }

 private:
  EpochMetrics run_pipelined(int64_t epoch, const std::vector<int64_t>& order, int64_t steps);
  EpochMetrics run_sequential(int64_t epoch, const std::vector<int64_t>& order, int64_t steps);
  bool abort_on_error() const;

  Coordinator& coord_;
  EpochScheduler& sched_;
  PipelineStages stages_;
  PipelineOptions opts_;
};

}  // namespace dsp
