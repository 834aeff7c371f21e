#include "bench/pipeline_bench.hpp"

#include <algorithm>
#include <memory>

#include "core/error.hpp"
#include "core/lists.hpp"
#include "csp/presample.hpp"

namespace dsp {

EpochMetrics reduce_metrics(Coordinator& coord, const EpochMetrics& local) {
  CoordinatedCommunicator& ch = coord.channel(WorkerKind::kMain);
  ch.set_step(local.epoch, -2);  // -1 is the step agreement of run_epoch
  const StageMetrics* st[3] = {&local.sampler, &local.loader, &local.trainer};
  std::vector<double> sums;
  for (const StageMetrics* s : st) {
    sums.insert(sums.end(), {s->busy_s, s->idle_s, s->comm_s, s->cpu_s});
  }
  sums.insert(sums.end(), {local.load_queue_occupancy, local.train_queue_occupancy, local.cpu_s,
                           local.comm_cpu_s, static_cast<double>(local.pace_throttles)});
  double qmax = static_cast<double>(local.ahead_max);
  OpOptions o;
  o.label = "pipeline metrics";
  ch.all_reduce(sums.data(), static_cast<int64_t>(sums.size()), DType::kFloat64, ReduceOp::kSum, o);
  double wall = local.wall_s;
  ch.all_reduce(&wall, 1, DType::kFloat64, ReduceOp::kMax, o);
  ch.all_reduce(&qmax, 1, DType::kFloat64, ReduceOp::kMax, o);
  EpochMetrics g = local;
  const double P = coord.size();
  StageMetrics* gs[3] = {&g.sampler, &g.loader, &g.trainer};
  for (int i = 0; i < 3; ++i) {
    gs[i]->busy_s = sums[4 * i] / P;
    gs[i]->idle_s = sums[4 * i + 1] / P;
    gs[i]->comm_s = sums[4 * i + 2] / P;
    gs[i]->cpu_s = sums[4 * i + 3] / P;
  }
  g.load_queue_occupancy = sums[12] / P;
  g.train_queue_occupancy = sums[13] / P;
  g.cpu_s = sums[14] / P;
  g.comm_cpu_s = sums[15] / P;
  g.pace_throttles = static_cast<int64_t>(sums[16]);  // over all ranks
  g.ahead_max = static_cast<int64_t>(qmax);
  g.wall_s = wall;
  g.batches_per_s = wall > 0 ? static_cast<double>(g.steps) / wall : 0;
  return g;
}

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

nlohmann::json bench_modes(Coordinator& coord, const std::vector<BenchMode>& modes,
                           const PipelineBenchOptions& opts) {
  DSP_CHECK_ARG(opts.epochs >= 1 && opts.warmup_epochs >= 0 && opts.repeats >= 1,
                "bench pipeline: need epochs >= 1, warmup_epochs >= 0 and repeats >= 1 (got {}, "
                "{} and {})",
                opts.epochs, opts.warmup_epochs, opts.repeats);
  DSP_CHECK_ARG(!modes.empty(), "bench pipeline: no modes to run");
  nlohmann::json out = {{"ranks", coord.size()},
                        {"backend", coord.backend()},
                        {"repeats", opts.repeats},
                        {"modes", nlohmann::json::array()}};
  std::vector<std::vector<double>> runs(modes.size());
  std::vector<nlohmann::json> epochs(modes.size(), nlohmann::json::array());
  // Per mode: roles trains the seeds in batches of the trainers only, so its epoch has more steps.
  std::vector<int64_t> steps(modes.size(), 0);
  for (int r = 0; r < opts.repeats; ++r) {
    for (size_t k = 0; k < modes.size(); ++k) {
      double sum = 0;
      for (int e = 0; e < opts.warmup_epochs + opts.epochs; ++e) {
        EpochMetrics g = reduce_metrics(coord, modes[k].run_epoch(e));
        steps[k] = g.steps;
        if (e < opts.warmup_epochs) continue;
        sum += g.wall_s;
        nlohmann::json ej = g.to_json();
        ej["repeat"] = r;
        epochs[k].push_back(std::move(ej));
      }
      runs[k].push_back(sum / opts.epochs);
    }
  }
  out["steps_per_epoch"] = steps[0];
  for (size_t k = 0; k < modes.size(); ++k) {
    const double epoch_s = median(runs[k]);
    nlohmann::json mj = {{"epoch_s", epoch_s},
                         {"epoch_s_runs", runs[k]},
                         {"steps_per_epoch", steps[k]},
                         {"batches_per_s", epoch_s > 0 ? steps[k] / epoch_s : 0.0},
                         {"epochs", epochs[k]}};
    if (modes[k].describe) mj["chose"] = modes[k].describe();
    out["modes"].push_back(modes[k].name);
    out[modes[k].name] = std::move(mj);
  }
  auto epoch_s = [&](const char* m) { return out[m]["epoch_s"].get<double>(); };
  if (out.contains("off")) {
    out["vs_off"] = nlohmann::json::object();
    for (const BenchMode& m : modes) {
      out["vs_off"][m.name] =
          epoch_s(m.name.c_str()) > 0 ? epoch_s("off") / epoch_s(m.name.c_str()) : 0.0;
    }
    if (out.contains("on")) out["speedup"] = out["vs_off"]["on"];
  }
  return out;
}

nlohmann::json bench_pipeline(Coordinator& coord, EpochScheduler& sched,
                              const PipelineStages& stages, const PipelineBenchOptions& opts) {
  return bench_pipeline(coord, sched, stages, PipelineOptions{}, opts);
}

nlohmann::json bench_pipeline(Coordinator& coord, EpochScheduler& sched,
                              const PipelineStages& stages, const PipelineOptions& base,
                              const PipelineBenchOptions& opts,
                              const std::vector<BenchMode>& extra) {
  std::vector<std::unique_ptr<Pipeline>> pipes;
  std::vector<BenchMode> modes;
  for (const std::string& name : opts.modes) {
    auto it = std::find_if(extra.begin(), extra.end(),
                           [&](const BenchMode& m) { return m.name == name; });
    if (it != extra.end()) {
      modes.push_back(*it);
      continue;
    }
    PipelineOptions po = base;
    po.mode = parse_choice<PipelineMode>(name);
    po.queue_capacity = opts.queue_capacity;
    pipes.push_back(std::make_unique<Pipeline>(coord, sched, stages, po));
    Pipeline* p = pipes.back().get();
    BenchMode m{name_of(po.mode), [p](int64_t e) { return p->run_epoch(e); }, {}};
    if (po.mode == PipelineMode::kAuto) m.describe = [p] { return p->auto_json(); };
    modes.push_back(std::move(m));
  }
  nlohmann::json out = bench_modes(coord, modes, opts);
  out["queue_capacity"] = opts.queue_capacity;
  return out;
}

namespace {

using Cmd = PipelineBenchCommand;

// clang-format off
#define DSP_FIELD(member) [](Cmd& c) -> auto& { return c.member; }
// clang-format on

template <class Get>
Option<Cmd> value(std::string flag, std::string key, std::string help, Get get,
                  const std::string& choices = "") {
  return options::value<Cmd>(std::move(flag), std::move(key), std::move(help), get, choices);
}

OptionTable<Cmd> model_and_mode_options() {
  return {
      value("--model", "model", "sage (default), gcn or gat", DSP_FIELD(model)),
      value("--hidden", "hidden", "hidden width (default 256)", DSP_FIELD(hidden)),
      value("--fanouts", "fanouts", "fanouts from the seeds out (default 15,10,5)",
            DSP_FIELD(fanouts)),
      value("--batch-size", "batch_size", "seeds per rank and step (default 1024)",
            DSP_FIELD(batch_size)),
      value("--modes", "modes",
            "modes to compare, in this order: off, on, auto, roles, roles-switch (GNNLab's "
            "factored layout without and with dynamic switching; default on,off)",
            DSP_FIELD(modes)),
      value("--roles-switch", "roles_switch",
            "roles-switch: on (a sampler trains while its queue is full; default), always or "
            "never",
            DSP_FIELD(roles_switch), "on,always,never"),  // off is the mode roles
      value("--samplers", "samplers",
            "roles: sampler-only ranks (default 0: GNNLab's rule over a few profiled "
            "batches)",
            DSP_FIELD(samplers)),
  };
}

OptionTable<Cmd> run_options() {
  return {
      value("--repeats", "repeats",
            "run the modes in turn this many times; epoch_s is the median (default 1)",
            DSP_FIELD(repeats)),
      value("--epochs", "epochs", "measured epochs per mode (default 2)", DSP_FIELD(epochs)),
      value("--warmup", "warmup", "discarded epochs per mode (default 1)", DSP_FIELD(warmup)),
      value("--max-steps", "max_steps",
            "steps per epoch at most (a random subset of the seeds; 0: all)", DSP_FIELD(max_steps)),
      value("--threads", "threads", "threads per rank (default cores / ranks)", DSP_FIELD(threads)),
      value("--backend", "backend", "auto (default), self or mpi", DSP_FIELD(backend)),
      value("--seed", "seed", "seed of sampling, model and schedule", DSP_FIELD(seed)),
      value("--json", "json", "write the figures to this file", DSP_FIELD(json)),
  };
}

#undef DSP_FIELD

}  // namespace

const OptionTable<PipelineBenchCommand>& pipeline_bench_options() {
  static const OptionTable<Cmd> table = [] {
    OptionTable<Cmd> t = model_and_mode_options();
    for (auto& o : run_options()) t.push_back(std::move(o));
    return t;
  }();
  return table;
}

void PipelineBenchCommand::validate() const {
  DSP_CHECK_ARG(roles_switch != RoleSwitch::kOff,
                "--roles-switch off: mode roles-switch switches (on, always or never)");
  DSP_CHECK_ARG(batch_size > 0 && hidden > 0 && epochs > 0 && warmup >= 0 && max_steps >= 0 &&
                    threads >= 0 && repeats > 0 && samplers >= 0,
                "--batch-size, --hidden, --epochs, --repeats must be positive; --warmup, "
                "--max-steps, --threads, --samplers >= 0");
}

PipelineBenchOptions PipelineBenchCommand::bench() const {
  PipelineBenchOptions bo;
  bo.epochs = epochs;
  bo.warmup_epochs = warmup;
  bo.repeats = repeats;
  bo.modes = split_list(modes);
  return bo;
}

std::vector<int64_t> PipelineBenchCommand::step_seeds(std::vector<int64_t> seeds) const {
  if (max_steps > 0 && static_cast<int64_t>(seeds.size()) > max_steps * batch_size) {
    seeds = shuffle_ids(seeds, seed ^ 0x737562ULL, 0);
    seeds.resize(max_steps * batch_size);
  }
  return seeds;
}

}  // namespace dsp
