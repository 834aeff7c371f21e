// `dsp bench pipeline PARTITION`: epoch time of training with the pipeline on vs off and the
// per-stage breakdown (bench/pipeline_bench.hpp runs the modes; the trainer is here, in the CLI, as
// in `dsp train`). Only in a build with the trainer (LibTorch).
#ifdef DSP_HAVE_TRAIN
#include "bench/pipeline_bench.hpp"
#include "bench_common.hpp"
#include "ccc/coordinator.hpp"
#include "core/error.hpp"
#include "core/lists.hpp"
#include "core/logging.hpp"
#include "pipeline/roles.hpp"
#include "pipeline/scheduler.hpp"
#include "train/trainer.hpp"

namespace dsp::cli {
namespace {

using PipeArgs = PipelineBenchCommand;

// `--modes roles` and `roles-switch`: GNNLab's factored layout (pipeline/roles.hpp) over the same
// partition, model and trainer, without and with dynamic switching. Built on the mode's first
// epoch; with --samplers 0, GNNLab's allocation rule over profile_roles (a few symmetric batches,
// timed without training them) chooses the samplers first. That epoch is a warm-up one.
class RolesBenchMode {
 public:
  RolesBenchMode(const PipeArgs& a, RankRuntime& rt, EpochScheduler& sched,
                 const PipelineStages& symmetric, const PipelineOptions& base,
                 const SamplerOptions& so, Trainer& trainer, RoleSwitch switching)
      : a_(a),
        rt_(rt),
        sched_(sched),
        sym_(symmetric),
        base_(base),
        so_(so),
        trainer_(trainer),
        switching_(switching) {}

  BenchMode mode() {
    return {switching_ == RoleSwitch::kOff ? "roles" : "roles-switch",
            [this](int64_t e) { return run_epoch(e); }, [this] { return chose_; }};
  }

 private:
  EpochMetrics run_epoch(int64_t epoch) {
    if (pipe_) return count_switched(pipe_->run_epoch(epoch));
    Coordinator& coord = rt_.coord();
    int samplers = a_.samplers;
    chose_ = nlohmann::json::object();
    if (samplers == 0) {
      const RoleAllocation al = profile_roles(
          coord, sched_, sym_, [this](const LoadedBatch& lb) { return trainer_.time_backward(lb); },
          epoch);
      samplers = al.samplers;
      chose_["profile"] = al.to_json();
      chose_["why"] = al.why;
    } else {
      chose_["why"] = "--samplers";
    }
    DSP_CHECK_ARG(samplers >= 1, "bench pipeline --modes {}: needs at least 2 ranks", mode().name);
    build(samplers);
    chose_["layout"] = roles_->layout().to_json();
    chose_["mode"] = fmt::format("{} sampler(s), {} trainer(s), switching {}", samplers,
                                 coord.size() - samplers, name_of(switching_));
    if (rt_.leader())
      DSP_INFO("bench", "{}: {} ({})", mode().name, chose_["mode"].get<std::string>(),
               chose_["why"].get<std::string>());
    return count_switched(pipe_->run_epoch(epoch));
  }

  // With switching: how many extra-slot batches the samplers trained themselves so far, of how
  // many (collective, on every rank after every epoch).
  EpochMetrics count_switched(EpochMetrics m) {
    if (switching_ == RoleSwitch::kOff) return m;
    const RoleLayout& l = roles_->layout();
    double n = static_cast<double>(roles_->switched());
    CoordinatedCommunicator& main = rt_.coord().channel(WorkerKind::kMain);
    main.set_step(m.epoch, -20);
    main.all_reduce(&n, 1, DType::kFloat64, ReduceOp::kSum);
    offered_ += m.steps * l.samplers;
    chose_["switched"] = {{"trained_by_samplers", static_cast<int64_t>(n)},
                          {"extra_slot_batches", offered_}};
    chose_["mode"] = fmt::format(
        "{} sampler(s), {} trainer(s), switching {}: samplers trained {} of their {} extra-slot "
        "batches",
        l.samplers, l.trainers(), name_of(switching_), static_cast<int64_t>(n), offered_);
    return m;
  }

  void build(int samplers) {
    Coordinator& coord = rt_.coord();
    RoleLayout layout{coord.size(), samplers};
    layout.switching = switching_;
    SlotTrain train_slots = [this](SlotBatches&& mine, int slots) {
      std::vector<Trainer::SlotBatch> sb;
      for (const auto& [slot, lb] : mine) sb.push_back({slot, &lb});
      trainer_.step_slots(sb, slots);
    };
    rank_ = make_role_rank(
        coord, rt_.partition_dir(), layout, a_.batch_size, a_.seed, so_, sym_.train,
        [this](std::vector<int64_t> s) { return a_.step_seeds(std::move(s)); }, train_slots);
    roles_ = rank_.roles.get();
    PipelineOptions po = base_;
    po.mode = PipelineMode::kPipelined;
    PipelineStages st = roles_->stages();
    st.set_threads = sym_.set_threads;
    pipe_ = std::make_unique<Pipeline>(coord, roles_->scheduler(), st, po);
  }

  const PipeArgs& a_;
  RankRuntime& rt_;
  EpochScheduler& sched_;
  const PipelineStages& sym_;
  PipelineOptions base_;
  SamplerOptions so_;
  Trainer& trainer_;
  RoleSwitch switching_;
  int64_t offered_ = 0;
  nlohmann::json chose_;
  RoleRank rank_;
  RoleStages* roles_ = nullptr;
  std::unique_ptr<Pipeline> pipe_;
};

// One line per mode: epoch time, batches/s, and per-stage busy, comm and CPU seconds per epoch
// (means over the measured epochs of every repeat).
void print_pipeline_table(const nlohmann::json& j) {
  fmt::print(
      "  {:<12} {:>8} {:>7} | busy s: {:>6} {:>6} {:>6} | comm s: {:>6} {:>6} {:>6} | cpu s: "
      "{:>6} {:>6} {:>6} {:>6} {:>6}\n",
      "mode", "epoch s", "batch/s", "sample", "load", "train", "sample", "load", "train", "sample",
      "load", "train", "comm", "all");
  const char* names[3] = {"sampler", "loader", "trainer"};
  for (const auto& mode : j["modes"]) {
    const auto& r = j[mode.get<std::string>()];
    double busy[3] = {0, 0, 0}, comm[3] = {0, 0, 0}, cpu[5] = {0, 0, 0, 0, 0};
    const double ne = static_cast<double>(r["epochs"].size());
    for (const auto& e : r["epochs"]) {
      for (int k = 0; k < 3; ++k) {
        busy[k] += e["stages"][names[k]]["busy_s"].get<double>() / ne;
        comm[k] += e["stages"][names[k]]["comm_s"].get<double>() / ne;
        cpu[k] += e["stages"][names[k]]["cpu_s"].get<double>() / ne;
      }
      cpu[3] += e["cpu"]["comm_thread_s"].get<double>() / ne;
      cpu[4] += e["cpu"]["process_s"].get<double>() / ne;
    }
    fmt::print(
        "  {:<12} {:>8.3f} {:>7.2f} | {:>14.3f} {:>6.3f} {:>6.3f} | {:>14.3f} {:>6.3f} "
        "{:>6.3f} | {:>13.3f} {:>6.3f} {:>6.3f} {:>6.3f} {:>6.3f}\n",
        mode.get<std::string>(), r["epoch_s"].get<double>(), r["batches_per_s"].get<double>(),
        busy[0], busy[1], busy[2], comm[0], comm[1], comm[2], cpu[0], cpu[1], cpu[2], cpu[3],
        cpu[4]);
  }
  for (const auto& mode : j["modes"]) {
    const auto& r = j[mode.get<std::string>()];
    if (r.contains("chose") && r["chose"].is_object()) {
      fmt::print("  {} chose {}: {}\n", mode.get<std::string>(),
                 r["chose"]["mode"].get<std::string>(), r["chose"]["why"].get<std::string>());
    }
  }
  if (j.contains("vs_off")) {
    std::string line;
    for (auto it = j["vs_off"].begin(); it != j["vs_off"].end(); ++it) {
      if (it.key() != name_of(PipelineMode::kSequential))
        line += fmt::format(" {} {:.2f}x", it.key(), it.value().get<double>());
    }
    if (!line.empty()) fmt::print("  speedup over off (off / mode epoch time):{}\n", line);
  }
}

void print_train_step(const StepTimes& st) {
  const double n = static_cast<double>(std::max<int64_t>(1, st.steps));
  fmt::print(
      "  train step, ms (rank 0, mean of {} steps, every mode, after the first warm-up epoch): "
      "{:.1f} = "
      "forward "
      "{:.1f} "
      "(aggregation {:.1f}) + backward {:.1f} (aggregation {:.1f}) + all-reduce {:.1f} + "
      "optimizer {:.1f}; thread CPU {:.1f}\n",
      st.steps, 1e3 * st.total_s() / n, 1e3 * st.forward_s / n, 1e3 * st.aggregation_forward_s / n,
      1e3 * st.backward_s / n, 1e3 * st.aggregation_backward_s / n, 1e3 * st.all_reduce_s / n,
      1e3 * st.optimizer_s / n, 1e3 * st.thread_cpu_s / n);
}

}  // namespace

TrainConfig bench_train_config(const std::string& model, int hidden, uint64_t seed, RankRuntime& rt,
                               const std::vector<int>& fanouts) {
  const PartitionMeta& meta = rt.part().meta;
  TrainConfig tc;
  tc.model.model = parse_choice<ModelKind>(model);
  tc.model.hidden = hidden;
  tc.model.in_dim = meta.feature_dim;
  tc.model.out_dim = meta.num_classes;
  tc.model.layers = static_cast<int>(fanouts.size());
  tc.seed = seed;
  tc.num_threads = rt.cores().threads;
  tc.device = rt.device();
  tc.validate();
  check_fanout_count(fanouts, tc.model);
  return tc;
}

namespace {

// The three stages of a symmetric rank. The step-time breakdown leaves out the first warm-up
// epoch (allocator and cache warm-up): it restarts after `steps * warmup` train calls.
PipelineStages symmetric_stages(CollectiveSampler& sampler, RankRuntime& rt, Trainer& trainer,
                                int64_t restart_after, int64_t& train_calls) {
  PipelineStages stages;
  stages.sample = [&sampler](int64_t epoch, int64_t batch, const std::vector<int64_t>& s) {
    return sampler.sample(s, epoch, batch);
  };
  stages.load = [&rt](SampledBatch&& sb) { return rt.features().load(std::move(sb)); };
  stages.train = [&trainer, &train_calls, restart_after](LoadedBatch&& lb) {
    if (train_calls++ == restart_after) trainer.step_times() = {};
    trainer.step(lb);
  };
  stages.set_threads = [&trainer](WorkerKind k, int n) {
    if (k == WorkerKind::kTrainer) trainer.set_threads(n);
  };
  return stages;
}

void print_header(const PipeArgs& a, RankRuntime& rt, int64_t steps) {
  fmt::print(stderr,
             "pipeline bench: {} on {}, {} rank(s) x {} thread(s), {} steps of {} seeds per "
             "rank, fanouts {}; modes {}, {} repeat(s) of {} warm-up + {} measured epoch(s) per "
             "mode\n",
             a.model, rt.part().meta.dataset_name, rt.size(), rt.cores().threads, steps,
             a.batch_size, a.fanouts, a.modes, a.repeats, a.warmup, a.epochs);
}

// A device backend's host round trips per batch on rank 0 (core/host_traffic.hpp), sampling and
// gathering, over every mode's batches; printed when there are any.
void add_host_traffic(nlohmann::json& j, const SamplerStats& ss, const GatherStats& gs) {
  const auto per = [](int64_t v, int64_t n) { return n ? static_cast<double>(v) / n : 0.0; };
  j["host_round_trips_rank0"] = {{"sample_syncs_per_batch", per(ss.host.syncs, ss.batches)},
                                 {"sample_reads_per_batch", per(ss.host.reads, ss.batches)},
                                 {"gather_syncs_per_batch", per(gs.host.syncs, gs.calls)},
                                 {"gather_reads_per_batch", per(gs.host.reads, gs.calls)}};
  if (ss.host.syncs + gs.host.syncs == 0) return;
  fmt::print(
      "host round trips per batch (rank 0): sampling {:.1f} blocking syncs and {:.1f} "
      "device-to-host reads, gathering {:.1f} and {:.1f}\n",
      per(ss.host.syncs, ss.batches), per(ss.host.reads, ss.batches), per(gs.host.syncs, gs.calls),
      per(gs.host.reads, gs.calls));
}

void add_run_figures(nlohmann::json& j, const PipeArgs& a, RankRuntime& rt, Trainer& trainer) {
  const PartitionMeta& meta = rt.part().meta;
  j["device"] = rt.device().str();
  j["bench"] = "pipeline";
  j["partition"] = a.partition;
  j["dataset"] = meta.dataset_name;
  j["num_nodes"] = meta.num_nodes;
  j["num_edges"] = meta.num_edges;
  j["model"] = a.model;
  j["hidden"] = a.hidden;
  j["fanouts"] = a.fanouts;
  j["batch_size"] = a.batch_size;
  j["max_steps"] = a.max_steps;
  j["threads"] = rt.cores().threads;
  j["cache_hit_rate_rank0"] = rt.features().store().stats().hit_rate();
  j["train_step_rank0"] = trainer.step_times().to_json();
}

// What a rank of the bench holds at its peak: the store and the sampler's copies; the sampled
// batches in flight (two queues of --queue-capacity and one in each stage), of which the loader's
// output queue, the loader and the trainer hold input rows (decoded to float32); and the one batch
// being trained: per layer, its destination rows of the layer's input and output widths, four
// times (forward values, their gradients, the aggregation and its gradient).
uint64_t pipeline_bytes(const PipeArgs& a, const RankRuntime& rt, const SamplerOptions& so) {
  const PartitionData& part = rt.part();
  const int64_t n = part.meta.num_nodes;
  const uint64_t f = static_cast<uint64_t>(std::max<int64_t>(part.meta.feature_dim, 1));
  const uint64_t h = static_cast<uint64_t>(a.hidden);
  const uint64_t cap = a.bench().queue_capacity;
  const bool lw = so.layer() != nullptr;
  const uint64_t input = static_cast<uint64_t>(batch_nodes_bound(a.batch_size, so.fanouts, n, lw));
  uint64_t train = 0;
  for (size_t l = 0; l < so.fanouts.size(); ++l) {  // layer l's destinations: depth l
    const std::vector<int> inner(so.fanouts.begin(), so.fanouts.begin() + l);
    const uint64_t dst = static_cast<uint64_t>(batch_nodes_bound(a.batch_size, inner, n, lw));
    train += dst * ((l + 1 == so.fanouts.size() ? f : h) + h) * 4 * 4;
  }
  return bench_store_bytes(part, true, true, rt.cores().node_size) +
         (2 * cap + 3) * sampled_batch_bytes(a.batch_size, so.fanouts, n, part.meta.num_edges, lw) +
         (cap + 2) * input * 4 * f + train;
}

// The stages of `dsp train` (src/train/job.cpp, without evaluation, checkpoints and metrics),
// timed by bench_pipeline with the pipeline on and off.
void run_pipeline_bench(const PipeArgs& a, const RankOptions& rank) {
  RankOptions ro = bench_rank(a.partition, a.threads, rank);
  ro.backend = a.backend;
  RankRuntime rt(ro);
  Coordinator& coord = rt.coord();
  const PartitionData& part = rt.part();
  DSP_CHECK_FORMAT(part.meta.feature_dim > 0 && part.labels.defined() && part.meta.num_classes > 1,
                   "{}: bench pipeline needs features and labels", a.partition);
  SamplerOptions so;
  so.fanouts = parse_int_list(a.fanouts, "--fanouts");
  so.seed = a.seed;
  so.blocks_on_device = true;  // the trainer runs on the rank's device, as in dsp train
  so.ids_on_device = true;     // and the loader gathers the input ids there
  check_bench_memory("dsp bench pipeline", pipeline_bytes(a, rt, so), bench_budget(rt),
                     "--batch-size, --fanouts, --hidden");
  std::unique_ptr<CollectiveSampler> sampler = rt.make_sampler(so);
  FeatureStore& store = rt.features().store();
  Trainer trainer(bench_train_config(a.model, a.hidden, a.seed, rt, so.fanouts),
                  coord.channel(WorkerKind::kTrainer));

  EpochScheduler sched(
      a.step_seeds(std::vector<int64_t>(part.seeds.data<int64_t>(),
                                        part.seeds.data<int64_t>() + part.seeds.dim(0))),
      a.batch_size, a.seed);
  CoordinatedCommunicator& main_ch = coord.channel(WorkerKind::kMain);
  main_ch.set_step(-1, 0);
  const int64_t steps = sched.agree_steps(main_ch);
  int64_t train_calls = 0;
  const PipelineStages stages =
      symmetric_stages(*sampler, rt, trainer, steps * a.warmup, train_calls);
  if (rt.rank() == 0) print_header(a, rt, steps);
  const PipelineOptions base = rt.pipeline_options(PipelineMode::kAuto);
  sampler->reset_stats();
  store.reset_stats();
  RolesBenchMode roles(a, rt, sched, stages, base, so, trainer, RoleSwitch::kOff);
  RolesBenchMode roles_switch(a, rt, sched, stages, base, so, trainer, a.roles_switch);
  nlohmann::json j =
      bench_pipeline(coord, sched, stages, base, a.bench(), {roles.mode(), roles_switch.mode()});
  add_run_figures(j, a, rt, trainer);
  main_ch.set_step(1 << 20, 0);
  main_ch.barrier();
  if (rt.rank() != 0) return;
  print_pipeline_table(j);
  print_train_step(trainer.step_times());
  add_host_traffic(j, sampler->stats(), store.stats());
  write_figures(a.json, j);
}

}  // namespace

void add_bench_pipeline(CLI::App* bench) {
  add_bench_command<PipelineBenchCommand>(
      bench, "pipeline",
      "Epoch time of training with the pipeline on vs off, and the per-stage breakdown (run under "
      "mpirun -np P with a P-part partition)",
      "PARTITION", "partition directory (dsp partition)", &PipelineBenchCommand::partition,
      pipeline_bench_options(), {"device", "topology_memory", "memory_budget", "emulate_device"},
      run_pipeline_bench);
}

}  // namespace dsp::cli
#endif
