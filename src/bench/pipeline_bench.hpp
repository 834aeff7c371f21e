#pragma once
// What `dsp bench pipeline` reports: epoch time and per-stage breakdown of each way to run the
// stages (`--modes`: off = DSP-Seq, on = the three-worker pipeline, auto = chosen from a profile,
// roles = sampler-only and trainer-only ranks, roles-switch = the same with dynamic switching), as
// JSON. The CLI (tools/bench_pipeline.cpp) builds the real stages and scheduler from a partition
// directory and calls bench_pipeline on every rank; its options are declared once here
// (pipeline_bench_options: flags, keys, help, defaults) and checked once (validate).
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/options.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/roles.hpp"

namespace dsp {

// The job-wide view of one epoch, on every rank: wall_s and batches_per_s of the slowest rank
// (max wall), stage times, CPU seconds and queue occupancies averaged over ranks. Collective
// (kMain channel).
EpochMetrics reduce_metrics(Coordinator& coord, const EpochMetrics& local);

struct PipelineBenchOptions {
  int warmup_epochs = 1;  // run and discarded, per mode and repeat
  int epochs = 2;         // measured, per mode and repeat
  int repeats = 1;        // the modes run in turn this many times (alternating: off, on, off, on)
  size_t queue_capacity = 2;
  std::vector<std::string> modes = {"on", "off"};
};

// `dsp bench pipeline`'s options (the model's are the trainer's: the CLI builds it).
struct PipelineBenchCommand {
  std::string partition;  // the CLI's PARTITION
  std::string model = "sage";
  int64_t hidden = 256;
  std::string fanouts = "15,10,5";
  int64_t batch_size = 1024;     // seeds per rank and step
  std::string modes = "on,off";  // off, on, auto, roles, roles-switch, in this order
  RoleSwitch roles_switch = RoleSwitch::kQueueFull;  // mode roles-switch's: on, always, never
  int samplers = 0;                                  // roles: sampler-only ranks; 0: GNNLab's rule
  int repeats = 1;
  int epochs = 2;         // measured, per mode
  int warmup = 1;         // discarded, per mode
  int64_t max_steps = 0;  // steps per epoch at most; 0: all
  int threads = 0;        // per rank; 0: cores / ranks
  std::string backend = "auto";
  uint64_t seed = 0;
  std::string json;

  // InvalidArgument: "--roles-switch: x not in {on,always,never}", or "--batch-size, --hidden,
  // --epochs, --repeats must be positive; --warmup, --max-steps, --threads, --samplers >= 0".
  void validate() const;
  PipelineBenchOptions bench() const;  // epochs, warm-up, repeats, modes
  // At most max_steps batches of `seeds`: a random subset, not the lowest ids (METIS parts are
  // contiguous id ranges, so a prefix of the sorted seeds would sample one corner of the part).
  std::vector<int64_t> step_seeds(std::vector<int64_t> seeds) const;
};

const OptionTable<PipelineBenchCommand>& pipeline_bench_options();

// One way to run an epoch.
struct BenchMode {
  std::string name;
  // Runs one epoch on every rank (collective) and returns this rank's metrics.
  std::function<EpochMetrics(int64_t epoch)> run_epoch;
  // What the mode chose and why (auto, roles); null when there is nothing to say.
  std::function<nlohmann::json()> describe;
};

// Runs, `repeats` times, every mode in turn: warm-up epochs then measured ones, numbered 0.. the
// same way in every mode, so all modes see the same batches. Returns, identically on every rank:
//   {"ranks": P, "backend": "mpi", "repeats": R, "modes": [...], "steps_per_epoch": n (the first
//    mode's),
//    "<mode>": {"epoch_s": median over repeats of the mean measured epoch, "epoch_s_runs": [...],
//               "steps_per_epoch": .., "batches_per_s": ..,
//               "epochs": [reduce_metrics(..).to_json(), ...],
//               "chose": describe() (auto, roles)},
//    "speedup": off.epoch_s / on.epoch_s (when both ran),
//    "vs_off": {"<mode>": off.epoch_s / mode.epoch_s, ...} (when off ran)}
nlohmann::json bench_modes(Coordinator& coord, const std::vector<BenchMode>& modes,
                           const PipelineBenchOptions& opts);

// bench_modes over the given stages for the modes off, on and auto of `opts.modes` (InvalidArgument
// for any other name). Adds "queue_capacity".
nlohmann::json bench_pipeline(Coordinator& coord, EpochScheduler& sched,
                              const PipelineStages& stages, const PipelineBenchOptions& opts = {});
// The same, every mode's Pipeline built from `base` (threads, cpus, auto options) with its mode
// and the bench's queue capacity. A name of `opts.modes` that is one of `extra` runs that mode
// (roles: the caller builds it, it needs the partition).
nlohmann::json bench_pipeline(Coordinator& coord, EpochScheduler& sched,
                              const PipelineStages& stages, const PipelineOptions& base,
                              const PipelineBenchOptions& opts,
                              const std::vector<BenchMode>& extra = {});

}  // namespace dsp
