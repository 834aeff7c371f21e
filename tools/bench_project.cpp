// `dsp bench volumes PARTITION` (under mpirun -np P) and `dsp bench project RUN.json...`: the
// per-rank communication volumes of a P-rank job, then the epoch time and speedup they project
// for P GPUs (the model: bench/projection.hpp). Two commands, because a projection needs runs
// at several P, each its own job over its own P-part partition: each run writes its figures, and
// the projection reads them (as it reads one-device stage times a GPU lease measured later).
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "bench/projection.hpp"
#include "bench_common.hpp"
#include "core/error.hpp"
#include "core/lists.hpp"
#ifdef DSP_HAVE_TRAIN
#include "ccc/coordinator.hpp"
#include "core/timer.hpp"
#include "csp/sampler.hpp"
#include "pipeline/scheduler.hpp"
#include "train/trainer.hpp"
#endif

namespace dsp::cli {
namespace {

using json = nlohmann::json;

// clang-format off
#define DSP_PROJECT_FIELD(C, member) [](C& c) -> auto& { return c.member; }
// clang-format on

struct ProjectCommand {
  std::vector<std::string> runs;  // the CLI's RUN... (dsp bench volumes --json files)
  std::string stages;             // one-device stage times: a volumes or pipeline JSON
  std::string stage_ms;           // "sample,load,train" ms per batch (over --stages)
  int64_t train_seeds = 0;        // 0: the runs' measured batches per rank
  int64_t batch_size = 1024;      // with --train-seeds
  double peer_gbps = ProjectionLinks{}.peer.gbps,
         peer_latency_us = ProjectionLinks{}.peer.latency_us;
  double host_gbps = ProjectionLinks{}.host.gbps,
         host_latency_us = ProjectionLinks{}.host.latency_us;
  double net_gbps = ProjectionLinks{}.net.gbps, net_latency_us = ProjectionLinks{}.net.latency_us;
  int gpus_per_node = ProjectionLinks{}.gpus_per_node;
  std::string published;  // "P:seconds,..." to compare with
  std::string json;

  void validate() const {
    DSP_CHECK_ARG(train_seeds >= 0 && batch_size >= 1,
                  "--train-seeds must be >= 0 and --batch-size >= 1");
  }
  ProjectionLinks links() const {
    ProjectionLinks l;
    l.peer = {peer_gbps, peer_latency_us};
    l.host = {host_gbps, host_latency_us};
    l.net = {net_gbps, net_latency_us};
    l.gpus_per_node = gpus_per_node;
    return l;
  }
};

OptionTable<ProjectCommand> project_options() {
  using C = ProjectCommand;
  auto v = [](std::string flag, std::string key, std::string help, auto get) {
    return options::value<C>(std::move(flag), std::move(key), std::move(help), get);
  };
  return {
      v("--stages", "stages",
        "one-device stage times: a `dsp bench volumes` or `dsp bench pipeline` JSON (default: "
        "the 1-rank run)",
        DSP_PROJECT_FIELD(C, stages)),
      v("--stage-ms", "stage_ms", "one-device ms per batch: sample,load,train (over --stages)",
        DSP_PROJECT_FIELD(C, stage_ms)),
      v("--train-seeds", "train_seeds",
        "training seeds of the epoch projected: batches per rank = ceil(seeds / (P batch)) "
        "(default: the runs' own)",
        DSP_PROJECT_FIELD(C, train_seeds)),
      v("--batch-size", "batch_size", "seeds per rank and batch, with --train-seeds (1024)",
        DSP_PROJECT_FIELD(C, batch_size)),
      v("--peer-gbps", "peer_gbps", "GPU-to-GPU link, GB/s per GPU (25: one NVLink-2 link)",
        DSP_PROJECT_FIELD(C, peer_gbps)),
      v("--peer-latency-us", "peer_latency_us", "per collective on it (20)",
        DSP_PROJECT_FIELD(C, peer_latency_us)),
      v("--host-gbps", "host_gbps", "host-to-GPU link, GB/s (12: PCIe 3.0 x16)",
        DSP_PROJECT_FIELD(C, host_gbps)),
      v("--host-latency-us", "host_latency_us", "per message on it (10)",
        DSP_PROJECT_FIELD(C, host_latency_us)),
      v("--net-gbps", "net_gbps", "node-to-node link, GB/s (12.5: 100 Gb/s)",
        DSP_PROJECT_FIELD(C, net_gbps)),
      v("--net-latency-us", "net_latency_us", "per message on it (5)",
        DSP_PROJECT_FIELD(C, net_latency_us)),
      v("--gpus-per-node", "gpus_per_node", "GPUs a node (8)", DSP_PROJECT_FIELD(C, gpus_per_node)),
      v("--published", "published", "epoch seconds to compare with, P:s,... (e.g. 1:3.11,8:0.613)",
        DSP_PROJECT_FIELD(C, published)),
      v("--json", "json", "write the projection to this file", DSP_PROJECT_FIELD(C, json)),
  };
}

json read_json(const std::string& path) {
  DSP_CHECK_T(IoError, !std::filesystem::is_directory(path),
              "{}: a directory; give the JSON files `dsp bench volumes --json` wrote", path);
  std::ifstream in(path);
  DSP_CHECK_T(IoError, in.good(), "{}: cannot be read", path);
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    DSP_THROW_T(FormatError, "{}: not JSON ({})", path, e.what());
  }
}

// "P:seconds,..." as a map.
std::map<int, double> parse_published(const std::string& text) {
  std::map<int, double> out;
  if (text.empty()) return out;
  for (const std::string& item : split_list(text)) {
    const size_t colon = item.find(':');
    DSP_CHECK_ARG(colon != std::string::npos, "--published: '{}' is not P:seconds", item);
    out[static_cast<int>(parse_int(item.substr(0, colon), "--published"))] =
        parse_double(item.substr(colon + 1), "--published");
  }
  return out;
}

// The one-device stage times: --stage-ms, else --stages, else the 1-rank run's; and where from.
StageTimes one_device_times(const ProjectCommand& a, const std::map<int, json>& files,
                            std::string& source) {
  if (!a.stage_ms.empty()) {
    const std::vector<double> ms = parse_double_list(a.stage_ms, "--stage-ms", 0, 1e12);
    DSP_CHECK_ARG(ms.size() == 3, "--stage-ms: sample,load,train, got {} value(s)", ms.size());
    source = "--stage-ms";
    return {ms[0] * 1e-3, ms[1] * 1e-3, ms[2] * 1e-3};
  }
  if (!a.stages.empty()) {
    source = a.stages;
    return stage_times_from_json(read_json(a.stages), a.stages);
  }
  const auto one = files.find(1);
  DSP_CHECK_ARG(one != files.end(), "bench project: no 1-rank run for the stage times");
  source = "the 1-rank run";
  return stage_times_from_json(one->second, "the 1-rank run");
}

void print_projection(const std::vector<Projection>& all, const std::map<int, double>& published,
                      json& out) {
  fmt::print("  {:>2} {:>7} | {:>16} {:>16} {:>16} | {:>8} {:>8} | {:>6} {:>6}", "P", "batches",
             "sample ms (comm)", "load ms (comm)", "train ms (comm)", "seq s", "pipe s", "seq x",
             "pipe x");
  fmt::print(published.empty() ? "\n" : " | {:>8} {:>6} | {:>8} {:>7}\n", "publ. s", "publ. x",
             "pipe/pub", "seq/pub");
  const double pub1 = published.count(1) ? published.at(1) : 0;
  for (const Projection& p : all) {
    auto st = [](const ProjectedStage& s) {
      return fmt::format("{:.2f} ({:.2f})", 1e3 * s.total_s(), 1e3 * s.comm_s);
    };
    fmt::print("  {:>2} {:>7} | {:>16} {:>16} {:>16} | {:>8.3f} {:>8.3f} | {:>6.2f} {:>6.2f}",
               p.ranks, p.steps, st(p.sample), st(p.load), st(p.train), p.epoch_sequential_s,
               p.epoch_pipelined_s, p.speedup_sequential, p.speedup_pipelined);
    json row = p.to_json();
    const auto it = published.find(p.ranks);
    if (it != published.end()) {
      const double sp = pub1 > 0 ? pub1 / it->second : 0;
      fmt::print(" | {:>8.3f} {:>6.2f} | {:>8.2f} {:>7.2f}", it->second, sp,
                 p.epoch_pipelined_s / it->second, p.epoch_sequential_s / it->second);
      row["published_epoch_s"] = it->second;
      if (pub1 > 0) row["published_speedup"] = sp;
    }
    fmt::print("\n");
    out["projection"].push_back(row);
  }
}

void run_project(const ProjectCommand& a) {
  std::map<int, json> files;
  std::vector<ProjectionRun> runs;
  for (const std::string& path : a.runs) {
    json j = read_json(path);
    ProjectionRun r = projection_run_from_json(j, path);
    if (a.train_seeds > 0) r.steps = steps_per_rank(a.train_seeds, r.ranks, a.batch_size);
    files[r.ranks] = std::move(j);
    runs.push_back(r);
  }
  std::string source;
  const StageTimes t = one_device_times(a, files, source);
  const ProjectionLinks links = a.links();
  const std::vector<Projection> all = project_all(runs, t, links);
  fmt::print(
      "projection: {} run(s); one-device ms per batch from {}: sample {:.3f}, load {:.3f}, "
      "train {:.3f}; batches per rank {}\n",
      runs.size(), source, 1e3 * t.sample_s, 1e3 * t.load_s, 1e3 * t.train_s,
      a.train_seeds > 0 ? fmt::format("ceil({} / (P x {}))", a.train_seeds, a.batch_size)
                        : std::string("as measured"));
  json out = {{"bench", "project"},
              {"runs", a.runs},
              {"stage_times_from", source},
              {"one_device_s", {{"sample", t.sample_s}, {"load", t.load_s}, {"train", t.train_s}}},
              {"assumptions", projection_assumptions(links)},
              {"projection", json::array()}};
  for (const std::string& line : projection_assumptions(links)) fmt::print("  - {}\n", line);
  print_projection(all, parse_published(a.published), out);
  write_figures(a.json, out);
}

void add_project(CLI::App* bench) {
  struct Args {
    ProjectCommand cmd;
    OptionTable<ProjectCommand> table = project_options();
    std::unique_ptr<TableFlags<ProjectCommand>> flags;
  };
  auto a = std::make_shared<Args>();
  auto* sub = bench->add_subcommand(
      "project",
      "Epoch time and speedup for P GPUs projected from `dsp bench volumes` runs at each P, "
      "one-device stage times and link figures (the model's assumptions are printed)");
  sub->add_option("RUN", a->cmd.runs, "`dsp bench volumes --json` files, one per P")->required();
  a->flags = std::make_unique<TableFlags<ProjectCommand>>(sub, a->table);
  sub->callback([a] {
    a->flags->apply(a->cmd);
    a->cmd.validate();
    run_project(a->cmd);
  });
}

#ifdef DSP_HAVE_TRAIN
struct VolumesCommand {
  std::string partition;
  std::string model = "sage";
  int64_t hidden = 256;
  std::string fanouts = "15,10,5";
  int64_t batch_size = 1024;
  int batches = 3;  // measured, after --warmup
  int warmup = 1;
  int threads = 0;
  uint64_t seed = 0;
  std::string json;

  void validate() const {
    DSP_CHECK_ARG(hidden >= 1 && batch_size >= 1 && batches >= 1 && warmup >= 0 && threads >= 0,
                  "--hidden, --batch-size, --batches must be positive; --warmup, --threads >= 0");
  }
};

const OptionTable<VolumesCommand>& volumes_options() {
  using C = VolumesCommand;
  auto v = [](std::string flag, std::string key, std::string help, auto get) {
    return options::value<C>(std::move(flag), std::move(key), std::move(help), get);
  };
  static const OptionTable<C> t{
      v("--model", "model", "sage (default) or another model of dsp train",
        DSP_PROJECT_FIELD(C, model)),
      v("--hidden", "hidden", "hidden units (256)", DSP_PROJECT_FIELD(C, hidden)),
      v("--fanouts", "fanouts", "per layer (15,10,5)", DSP_PROJECT_FIELD(C, fanouts)),
      v("--batch-size", "batch_size", "seeds per rank and batch (1024)",
        DSP_PROJECT_FIELD(C, batch_size)),
      v("--batches", "batches", "measured batches (3)", DSP_PROJECT_FIELD(C, batches)),
      v("--warmup", "warmup", "batches run first and not counted (1)",
        DSP_PROJECT_FIELD(C, warmup)),
      v("--threads", "threads", "per rank; 0: cores / ranks", DSP_PROJECT_FIELD(C, threads)),
      v("--seed", "seed", "sampling and model seed", DSP_PROJECT_FIELD(C, seed)),
      v("--json", "json", "write the figures to this file", DSP_PROJECT_FIELD(C, json)),
  };
  return t;
}

// What one rank measured, per batch: [sample peer, load peer, load host, all-reduce bytes,
// sample msgs, load msgs, train msgs, sample s, load s, train s, load local bytes].
constexpr int kFigures = 11;

// A channel's bytes to / from other ranks (the larger) and its ops, since its last reset.
std::pair<double, double> peer_traffic(const Communicator& ch) {
  const CommCounters c = ch.counters();
  const int self = ch.rank();
  const double sent = static_cast<double>(c.total_sent() - c.bytes_sent[self]);
  const double recv = static_cast<double>(c.total_recv() - c.bytes_recv[self]);
  return {std::max(sent, recv), static_cast<double>(c.ops)};
}

// The stages of `dsp train` run one after another for warmup + batches batches; returns this
// rank's figures per measured batch (kFigures).
std::vector<double> measure_rank(const VolumesCommand& a, RankRuntime& rt, EpochScheduler& sched,
                                 CollectiveSampler& sampler, Trainer& trainer) {
  Coordinator& coord = rt.coord();
  CoordinatedCommunicator& cs = coord.channel(WorkerKind::kSampler);
  CoordinatedCommunicator& cl = coord.channel(WorkerKind::kLoader);
  CoordinatedCommunicator& ct = coord.channel(WorkerKind::kTrainer);
  const int64_t steps = sched.steps();
  double secs[3] = {0, 0, 0};
  for (int64_t b = 0; b < a.warmup + a.batches; ++b) {
    if (b == a.warmup) {
      for (Communicator* ch : {static_cast<Communicator*>(&cs), static_cast<Communicator*>(&cl),
                               static_cast<Communicator*>(&ct)}) {
        ch->reset_counters();
      }
      rt.features().store().reset_stats();
      secs[0] = secs[1] = secs[2] = 0;
    }
    const int64_t epoch = b / steps, t = b % steps;
    for (CoordinatedCommunicator* ch : {&cs, &cl, &ct}) ch->set_step(epoch, t);
    const std::vector<int64_t> seeds = sched.batch_seeds(sched.epoch_order(epoch), t);
    Stopwatch timer;
    SampledBatch sb = sampler.sample(seeds, epoch, t);
    secs[0] += timer.seconds();
    timer.reset();
    LoadedBatch lb = rt.features().load(std::move(sb));
    secs[1] += timer.seconds();
    timer.reset();
    trainer.train_step(lb);
    secs[2] += timer.seconds();
  }
  const double n = static_cast<double>(a.batches);
  const auto [sp, sm] = peer_traffic(cs);
  const auto [lp, lm] = peer_traffic(cl);
  const CommCounters tc = ct.counters();
  const double allreduce = static_cast<double>(tc.bytes_sent[ct.rank()]);
  const GatherStats& g = rt.features().store().stats();
  const double host = static_cast<double>(g.bytes_cold);
  const double local = static_cast<double>(g.bytes_local_hot + g.bytes_fifo);
  return {sp / n,
          lp / n,
          host / n,
          allreduce / n,
          sm / n,
          lm / n,
          static_cast<double>(tc.ops) / n,
          secs[0] / n,
          secs[1] / n,
          secs[2] / n,
          local / n};
}

// The job's figures from every rank's (all[r * kFigures + i]): the slowest rank's, and the
// mean where it says more.
json volumes_json(const VolumesCommand& a, const std::vector<double>& all, int ranks, int64_t steps,
                  int64_t seeds) {
  auto col = [&](int i, bool mean) {
    double m = 0, s = 0;
    for (int r = 0; r < ranks; ++r) {
      m = std::max(m, all[r * kFigures + i]);
      s += all[r * kFigures + i];
    }
    return mean ? s / ranks : m;
  };
  json per_rank = json::array();
  for (int r = 0; r < ranks; ++r) {
    per_rank.push_back(
        std::vector<double>(all.begin() + r * kFigures, all.begin() + (r + 1) * kFigures));
  }
  return {{"bench", "volumes"},
          {"partition", a.partition},
          {"ranks", ranks},
          {"steps_per_epoch", steps},
          {"train_seeds", seeds},
          {"batch_size", a.batch_size},
          {"fanouts", a.fanouts},
          {"model", a.model},
          {"hidden", a.hidden},
          {"batches", a.batches},
          {"per_batch",
           {{"sample",
             {{"peer_bytes", col(0, false)},
              {"peer_bytes_mean", col(0, true)},
              {"host_bytes", 0.0},
              {"messages", col(4, false)},
              {"compute_s", col(7, false)}}},
            {"load",
             {{"peer_bytes", col(1, false)},
              {"peer_bytes_mean", col(1, true)},
              {"host_bytes", col(2, false)},
              {"local_bytes", col(10, false)},
              {"messages", col(5, false)},
              {"compute_s", col(8, false)}}},
            {"train",
             {{"allreduce_bytes", col(3, false)},
              {"messages", col(6, false)},
              {"compute_s", col(9, false)}}}}},
          {"per_rank_columns",
           {"sample_peer_bytes", "load_peer_bytes", "load_host_bytes", "allreduce_bytes",
            "sample_messages", "load_messages", "train_messages", "sample_s", "load_s", "train_s",
            "load_local_bytes"}},
          {"per_rank", per_rank}};
}

void run_volumes(const VolumesCommand& a, const RankOptions& rank) {
  RankRuntime rt(bench_rank(a.partition, a.threads, rank));
  const PartitionData& part = rt.part();
  DSP_CHECK_FORMAT(part.meta.feature_dim > 0 && part.labels.defined() && part.meta.num_classes > 1,
                   "{}: bench volumes needs features and labels", a.partition);
  SamplerOptions so;
  so.fanouts = parse_int_list(a.fanouts, "--fanouts");
  so.seed = a.seed;
  so.blocks_on_device = true;
  so.ids_on_device = true;  // as dsp train samples
  std::unique_ptr<CollectiveSampler> sampler = rt.make_sampler(so);
  Coordinator& coord = rt.coord();
  Trainer trainer(bench_train_config(a.model, a.hidden, a.seed, rt, so.fanouts),
                  coord.channel(WorkerKind::kTrainer));
  const int64_t* s = part.seeds.data<int64_t>();
  EpochScheduler sched(std::vector<int64_t>(s, s + part.seeds.dim(0)), a.batch_size, a.seed);
  CoordinatedCommunicator& main = coord.channel(WorkerKind::kMain);
  main.set_step(-1, 0);
  const int64_t steps = sched.agree_steps(main);
  std::vector<double> mine = measure_rank(a, rt, sched, *sampler, trainer);
  std::vector<double> all(static_cast<size_t>(kFigures) * rt.size());
  main.set_step(1 << 20, 0);
  main.all_gather(mine.data(), all.data(), kFigures, DType::kFloat64);
  double seeds = static_cast<double>(part.seeds.dim(0));
  main.all_reduce(&seeds, 1, DType::kFloat64, ReduceOp::kSum);
  if (rt.rank() != 0) return;
  const json j = volumes_json(a, all, rt.size(), steps, static_cast<int64_t>(seeds));
  const json& pb = j["per_batch"];
  fmt::print(
      "volumes: {} rank(s), {} batches per rank and epoch, {} measured batches; per batch, "
      "slowest rank: sample {:.3f} MB to peers in {} collectives ({:.1f} ms); load {:.3f} MB "
      "to peers + {:.3f} MB cold in {} ({:.1f} ms); train all-reduce {:.3f} MB in {} ({:.1f} "
      "ms)\n",
      rt.size(), steps, a.batches, pb["sample"]["peer_bytes"].get<double>() / 1e6,
      pb["sample"]["messages"].get<double>(), 1e3 * pb["sample"]["compute_s"].get<double>(),
      pb["load"]["peer_bytes"].get<double>() / 1e6, pb["load"]["host_bytes"].get<double>() / 1e6,
      pb["load"]["messages"].get<double>(), 1e3 * pb["load"]["compute_s"].get<double>(),
      pb["train"]["allreduce_bytes"].get<double>() / 1e6, pb["train"]["messages"].get<double>(),
      1e3 * pb["train"]["compute_s"].get<double>());
  write_figures(a.json, j);
}
#endif

}  // namespace

void add_bench_project(CLI::App* bench) {
  add_project(bench);
#ifdef DSP_HAVE_TRAIN
  add_bench_command<VolumesCommand>(
      bench, "volumes",
      "Per-rank bytes and collectives per batch of each stage, and its time (run under mpirun "
      "-np P with a P-part partition; input of `dsp bench project`)",
      "PARTITION", "partition directory (dsp partition)", &VolumesCommand::partition,
      volumes_options(), {"device", "topology_memory", "memory_budget"}, run_volumes);
#endif
}

}  // namespace dsp::cli
