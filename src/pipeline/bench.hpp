#pragma once
// What `dsp bench pipeline` reports: epoch time and per-stage breakdown with the pipeline on and
// off (DSP vs DSP-Seq, the paper's Fig. 12 ablation), as JSON. The CLI builds the real stages and
// scheduler from a partition directory and calls bench_pipeline on every rank.
#include <nlohmann/json.hpp>

#include <cstddef>

#include "pipeline/pipeline.hpp"

namespace dsp {

// The job-wide view of one epoch, on every rank: wall_s and batches_per_s of the slowest rank
// (max wall), stage times and queue occupancies averaged over ranks. Collective (kMain channel).
EpochMetrics reduce_metrics(Coordinator& coord, const EpochMetrics& local);

struct PipelineBenchOptions {
  int warmup_epochs = 1;  // run and discarded, per mode
  int epochs = 2;         // measured, per mode
  size_t queue_capacity = 2;
};

// Runs warmup + measured epochs pipelined, then the same sequentially, on every rank (collective).
// Returns, identically on every rank:
//   {"ranks": P, "backend": "mpi", "queue_capacity": 2, "steps_per_epoch": n,
//    "on":  {"epoch_s": mean, "batches_per_s": .., "epochs": [reduce_metrics(..).to_json(), ...]},
//    "off": {...}, "speedup": off.epoch_s / on.epoch_s}
// Epoch numbers: warmups use 0.., measured epochs follow, the same for both modes, so both see
// the same batches.
nlohmann::json bench_pipeline(Coordinator& coord, EpochScheduler& sched,
                              const PipelineStages& stages, const PipelineBenchOptions& opts = {});

}  // namespace dsp
