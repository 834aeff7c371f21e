#include "pipeline/bench.hpp"

#include "core/error.hpp"

namespace dsp {

EpochMetrics reduce_metrics(Coordinator& coord, const EpochMetrics& local) {
  CoordinatedCommunicator& ch = coord.channel(WorkerKind::kMain);
  ch.set_step(local.epoch, -2);  // -1 is the step agreement of run_epoch
  const StageMetrics* st[3] = {&local.sampler, &local.loader, &local.trainer};
  std::vector<double> sums;
  for (const StageMetrics* s : st) sums.insert(sums.end(), {s->busy_s, s->idle_s, s->comm_s});
  sums.push_back(local.load_queue_occupancy);
  sums.push_back(local.train_queue_occupancy);
  OpOptions o;
  o.label = "pipeline metrics";
  ch.all_reduce(sums.data(), static_cast<int64_t>(sums.size()), DType::kFloat64, ReduceOp::kSum, o);
  double wall = local.wall_s;
  ch.all_reduce(&wall, 1, DType::kFloat64, ReduceOp::kMax, o);
  EpochMetrics g = local;
  const double P = coord.size();
  StageMetrics* gs[3] = {&g.sampler, &g.loader, &g.trainer};
  for (int i = 0; i < 3; ++i) {
    gs[i]->busy_s = sums[3 * i] / P;
    gs[i]->idle_s = sums[3 * i + 1] / P;
    gs[i]->comm_s = sums[3 * i + 2] / P;
  }
  g.load_queue_occupancy = sums[9] / P;
  g.train_queue_occupancy = sums[10] / P;
  g.wall_s = wall;
  g.batches_per_s = wall > 0 ? static_cast<double>(g.steps) / wall : 0;
  return g;
}

nlohmann::json bench_pipeline(Coordinator& coord, EpochScheduler& sched,
                              const PipelineStages& stages, const PipelineBenchOptions& opts) {
  DSP_CHECK_ARG(opts.epochs >= 1 && opts.warmup_epochs >= 0,
                "bench pipeline: need epochs >= 1 and warmup_epochs >= 0 (got {} and {})",
                opts.epochs, opts.warmup_epochs);
  nlohmann::json out = {{"ranks", coord.size()},
                        {"backend", coord.backend()},
                        {"queue_capacity", opts.queue_capacity}};
  double epoch_s[2] = {0, 0};
  const PipelineMode modes[2] = {PipelineMode::kPipelined, PipelineMode::kSequential};
  for (int k = 0; k < 2; ++k) {
    PipelineOptions po;
    po.mode = modes[k];
    po.queue_capacity = opts.queue_capacity;
    Pipeline p(coord, sched, stages, po);
    nlohmann::json epochs = nlohmann::json::array();
    int64_t steps = 0;
    for (int e = 0; e < opts.warmup_epochs + opts.epochs; ++e) {
      EpochMetrics g = reduce_metrics(coord, p.run_epoch(e));
      steps = g.steps;
      if (e < opts.warmup_epochs) continue;
      epoch_s[k] += g.wall_s / opts.epochs;
      epochs.push_back(g.to_json());
    }
    out["steps_per_epoch"] = steps;
    out[pipeline_mode_name(modes[k])] = {
        {"epoch_s", epoch_s[k]},
        {"batches_per_s", epoch_s[k] > 0 ? steps / epoch_s[k] : 0.0},
        {"epochs", epochs}};
  }
  out["speedup"] = epoch_s[0] > 0 ? epoch_s[1] / epoch_s[0] : 0.0;
  return out;
}

}  // namespace dsp
