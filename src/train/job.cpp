#include "train/job.hpp"

#include <dlfcn.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <thread>

#include <fmt/ranges.h>

#include "ccc/coordinator.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/logging.hpp"
#include "core/timer.hpp"
#include "csp/sampler.hpp"
#include "graph/dataset.hpp"
#include "layout/feature_store.hpp"
#include "layout/hotness.hpp"
#include "layout/partition.hpp"
#include "pipeline/load_batch.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/scheduler.hpp"
#include "train/trainer.hpp"

namespace dsp {
namespace fs = std::filesystem;

void JobConfig::validate() const {
  DSP_CHECK_ARG(!path.empty(), "no partition or dataset directory given");
  DSP_CHECK_ARG(!fanouts.empty(), "--fanouts must list one fanout per layer");
  DSP_CHECK_ARG(layers == 0 || layers == static_cast<int>(fanouts.size()),
                "--fanouts has {} entries but the model has {} layers (one fanout per layer)",
                fanouts.size(), layers);
  for (int f : fanouts) DSP_CHECK_ARG(f > 0, "fanouts must be > 0, got {}", f);
  for (int f : eval_fanouts) DSP_CHECK_ARG(f > 0, "eval fanouts must be > 0, got {}", f);
  DSP_CHECK_ARG(eval_fanouts.empty() || eval_fanouts.size() == fanouts.size(),
                "--eval-fanouts has {} entries but --fanouts has {}", eval_fanouts.size(),
                fanouts.size());
  DSP_CHECK_ARG(batch_size > 0 && eval_batch_size > 0, "batch sizes must be > 0");
  DSP_CHECK_ARG(epochs >= 0, "--epochs must be >= 0");
  DSP_CHECK_ARG(eval_every >= 0 && checkpoint_every >= 0, "--eval-every/--checkpoint-every >= 0");
  parse_pipeline_mode(pipeline);
  DSP_CHECK_ARG(cache_policy.empty() || cache_policy == "in-degree" || cache_policy == "random" ||
                    cache_policy == "none",
                "--cache-policy override must be in-degree, random or none (out-degree and "
                "presample are chosen at partition time: dsp partition --cache-policy ...), got "
                "'{}'",
                cache_policy);
  DSP_CHECK_ARG(cache_ratio == -1 || (cache_ratio >= 0 && cache_ratio <= 1),
                "--cache-ratio must be in [0, 1], got {}", cache_ratio);
  DSP_CHECK_ARG(!resume || !checkpoint_dir.empty(), "--resume needs --checkpoint-dir");
  DSP_CHECK_ARG(order == "random" || order == "bfs", "--order must be random or bfs, got '{}'",
                order);
  DSP_CHECK_ARG(bfs_sequences >= 1, "--bfs-sequences must be >= 1, got {}", bfs_sequences);
  ModelConfig m = train.model;
  m.layers = static_cast<int>(fanouts.size());
  if (m.in_dim == 0) m.in_dim = 1;  // filled from the data later; validate the rest now
  if (m.out_dim == 0) m.out_dim = 2;
  m.validate();
  check_fanouts(fanouts, m);
}

nlohmann::json JobConfig::to_json() const {
  return {{"path", path},           {"train", train.to_json()},
          {"fanouts", fanouts},     {"layers", layers},     {"eval_fanouts", eval_fanouts},
          {"batch_size", batch_size}, {"eval_batch_size", eval_batch_size},
          {"epochs", epochs},       {"eval_every", eval_every},
          {"pipeline", pipeline},   {"ccc", ccc},
          {"cache_policy", cache_policy}, {"cache_ratio", cache_ratio},
          {"checkpoint_dir", checkpoint_dir}, {"checkpoint_every", checkpoint_every},
          {"resume", resume},       {"metrics_file", metrics_file},
          {"seed", seed},           {"backend", backend},
          {"order", order},         {"bfs_sequences", bfs_sequences}};
}

JobConfig JobConfig::from_json(const nlohmann::json& j, const std::string& what) {
  DSP_CHECK_FORMAT(j.is_object(), "{}: expected a JSON object", what);
  JobConfig c;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const auto& v = it.value();
    try {
      if (k == "path") c.path = v.get<std::string>();
      else if (k == "model") c.train.model.model = v.get<std::string>();
      else if (k == "hidden") c.train.model.hidden = v.get<int64_t>();
      else if (k == "dropout") c.train.model.dropout = v.get<double>();
      else if (k == "heads") c.train.model.heads = v.get<int>();
      else if (k == "out_heads") c.train.model.out_heads = v.get<int>();
      else if (k == "optimizer") c.train.optimizer = v.get<std::string>();
      else if (k == "lr") c.train.lr = v.get<double>();
      else if (k == "weight_decay") c.train.weight_decay = v.get<double>();
      else if (k == "momentum") c.train.momentum = v.get<double>();
      else if (k == "fanouts") c.fanouts = v.get<std::vector<int>>();
      else if (k == "eval_fanouts") c.eval_fanouts = v.get<std::vector<int>>();
      else if (k == "batch_size") c.batch_size = v.get<int64_t>();
      else if (k == "eval_batch_size") c.eval_batch_size = v.get<int64_t>();
      else if (k == "epochs") c.epochs = v.get<int>();
      else if (k == "eval_every") c.eval_every = v.get<int>();
      else if (k == "pipeline") c.pipeline = v.get<std::string>();
      else if (k == "ccc") c.ccc = v.get<bool>();
      else if (k == "cache_policy") c.cache_policy = v.get<std::string>();
      else if (k == "cache_ratio") c.cache_ratio = v.get<double>();
      else if (k == "checkpoint_dir") c.checkpoint_dir = v.get<std::string>();
      else if (k == "checkpoint_every") c.checkpoint_every = v.get<int>();
      else if (k == "resume") c.resume = v.get<bool>();
      else if (k == "metrics_file") c.metrics_file = v.get<std::string>();
      else if (k == "seed") c.seed = v.get<uint64_t>();
      else if (k == "threads") c.train.num_threads = v.get<int>();
      else if (k == "layers") c.layers = v.get<int>();
      else if (k == "order") c.order = v.get<std::string>();
      else if (k == "bfs_sequences") c.bfs_sequences = v.get<int>();
      else {
        DSP_THROW_T(FormatError, "{}: unknown key '{}'", what, k);
      }
    } catch (const nlohmann::json::exception&) {
      DSP_THROW_T(FormatError, "{}: key '{}' has the wrong type", what, k);
    }
  }
  return c;
}

nlohmann::json JobResult::to_json() const {
  return {{"epochs_run", epochs_run},       {"best_val_acc", best_val_acc},
          {"best_epoch", best_epoch},       {"test_acc_at_best", test_acc_at_best},
          {"final_loss", final_loss},       {"mean_epoch_s", mean_epoch_s},
          {"cache_hit_rate", cache_hit_rate}, {"bytes_communicated", bytes_communicated}};
}

namespace {

// "\r  epoch 3/10 [=====>      ] 45/100  ETA 5s  loss 0.512" on a terminal, nothing otherwise.
class ProgressBar {
 public:
  ProgressBar(bool on, int epoch, int epochs, int64_t steps)
      : on_(on && ::isatty(2)), epoch_(epoch), epochs_(epochs), steps_(steps) {}
  void update(int64_t done, double loss) {
    if (!on_ || (last_.seconds() < 0.1 && done < steps_)) return;
    last_.reset();
    const int width = 30;
    int fill = steps_ > 0 ? static_cast<int>(width * done / steps_) : width;
    double eta = done > 0 ? sw_.seconds() * (steps_ - done) / done : 0;
    std::string bar(fill, '=');
    if (fill < width) bar += '>' + std::string(width - fill - 1, ' ');
    std::fprintf(stderr, "\r  epoch %d/%d [%s] %lld/%lld  ETA %.0fs  loss %.4f ", epoch_ + 1,
                 epochs_, bar.c_str(), static_cast<long long>(done),
                 static_cast<long long>(steps_), eta, loss);
    std::fflush(stderr);
  }
  void finish() {
    if (on_) std::fprintf(stderr, "\r%*s\r", 90, "");
  }

 private:
  bool on_;
  int epoch_, epochs_;
  int64_t steps_;
  Stopwatch sw_, last_;
};

std::vector<int64_t> owned(const Array& ids, int64_t begin, int64_t end) {
  std::vector<int64_t> out;
  if (!ids.defined()) return out;
  const int64_t* p = ids.data<int64_t>();
  for (int64_t i = 0; i < ids.dim(0); ++i) {
    if (p[i] >= begin && p[i] < end) out.push_back(p[i]);
  }
  return out;
}

// Overrides the partition's cache lists for every part (computed identically on every rank from
// replicated data, so the feature position lists agree).
void override_cache(PartitionData& part, const std::string& policy_name, double ratio,
                    uint64_t seed, std::vector<Array>& all_cached) {
  const PartitionMeta& m = part.meta;
  if (ratio < 0) ratio = m.cache_ratio;
  CachePolicy policy = parse_cache_policy(policy_name.empty() ? m.cache_policy : policy_name);
  std::vector<int64_t> score(m.num_nodes, 0);
  if (policy == CachePolicy::kInDegree) {
    const int64_t* d = part.in_degree.data<int64_t>();
    std::copy(d, d + m.num_nodes, score.begin());
  } else if (policy == CachePolicy::kRandom) {
    Csr empty;
    empty.num_nodes = m.num_nodes;
    score = hotness_scores(CachePolicy::kRandom, empty, {}, seed);
  } else {
    DSP_CHECK_ARG(policy == CachePolicy::kNone,
                  "cache policy '{}' cannot be overridden at train time; partition again",
                  cache_policy_name(policy));
  }
  all_cached.clear();
  for (int p = 0; p < m.parts; ++p) {
    int64_t b = m.offsets[p], e = m.offsets[p + 1];
    int64_t k = policy == CachePolicy::kNone ? 0 : static_cast<int64_t>(ratio * (e - b));
    all_cached.push_back(Array::from_vector(top_k_by_score(score, b, e, k)));
  }
  part.cached = all_cached[part.part];
}

}  // namespace

JobResult run_training(const JobConfig& cfg_in) {
  JobConfig cfg = cfg_in;
  cfg.validate();
  if (cfg.eval_fanouts.empty()) cfg.eval_fanouts = cfg.fanouts;

  CoordinatorOptions copts;
  copts.ccc = cfg.ccc;
  auto coord = make_coordinator(cfg.backend, copts);
  const int rank = coord->rank(), size = coord->size();
  CoordinatedCommunicator& main_ch = coord->channel(WorkerKind::kMain);
  const bool leader = rank == 0;

  // Each rank gets its share of the cores (DESIGN.md): LibTorch intra-op and OpenMP threads.
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int threads = cfg.train.num_threads > 0 ? cfg.train.num_threads : std::max(1, cores / size);
  cfg.train.num_threads = threads;
  omp_set_num_threads(threads);
  // Debian's LibTorch calls BLAS through the system alternative (OpenBLAS after setup.sh), whose
  // own thread pool defaults to every core; give it this rank's share too.
  if (auto* set_blas = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set_blas(threads);
  }

  // A dataset directory is partitioned on the fly, by rank 0, into a temporary directory.
  std::string part_dir = cfg.path;
  std::string tmp_part;
  if (!path_exists(cfg.path + "/partition.json")) {
    DSP_CHECK_T(IoError, path_exists(cfg.path + "/dataset.json"),
                "{}: neither a partition directory (partition.json) nor a dataset directory "
                "(dataset.json)",
                cfg.path);
    int64_t pid = ::getpid();
    main_ch.broadcast(&pid, 1, DType::kInt64, 0);
    tmp_part = (fs::temp_directory_path() / fmt::format("dsp-train-{}-{}", pid, size)).string();
    int64_t ok = 1;
    std::string err;
    if (leader) {
      try {
        Dataset ds = load_dataset(cfg.path);
        PartitionOptions po;
        po.parts = size;
        po.seed = cfg.seed;
        po.overwrite = true;
        po.verbose = log_level() <= LogLevel::kDebug;
        if (!cfg.cache_policy.empty()) po.cache_policy = cfg.cache_policy;
        if (cfg.cache_ratio >= 0) po.cache_ratio = cfg.cache_ratio;
        DSP_INFO("train", "partitioning {} into {} part(s) ...", cfg.path, size);
        partition_dataset(ds, po, tmp_part);
      } catch (const Error& e) {
        ok = 0;
        err = e.what();
      }
    }
    main_ch.broadcast(&ok, 1, DType::kInt64, 0);
    if (!ok) {
      if (leader) throw FormatError(err);
      DSP_THROW("rank 0 failed to partition the dataset");
    }
    part_dir = tmp_part;
  }
  struct TmpCleanup {
    std::string dir;
    bool leader;
    ~TmpCleanup() {
      std::error_code ec;
      if (leader && !dir.empty()) fs::remove_all(dir, ec);
    }
  } cleanup{tmp_part, leader};

  PartitionData part = load_partition(part_dir, rank, size);
  const PartitionMeta& meta = part.meta;
  DSP_CHECK_FORMAT(meta.feature_dim > 0, "{}: the dataset has no features to train on", part_dir);
  DSP_CHECK_FORMAT(part.labels.defined() && meta.num_classes > 1,
                   "{}: the dataset has no labels (or a single class)", part_dir);
  std::vector<Array> all_cached;
  if ((!cfg.cache_policy.empty() || cfg.cache_ratio >= 0) && tmp_part.empty()) {
    override_cache(part, cfg.cache_policy, cfg.cache_ratio, cfg.seed, all_cached);
  }
  const int64_t begin = meta.offsets[rank], end = meta.offsets[rank + 1];

  SamplerOptions so;
  so.fanouts = cfg.fanouts;
  so.seed = cfg.seed;
  // A self-reliant (pagraph) part replicates the rows its seeds' L-hop samples reach: training
  // samples them on this rank alone (self communicator), drawing the blocks CSP would draw.
  // Evaluation (any valid/test node) still samples collectively.
  std::unique_ptr<Communicator> self_comm;
  PartitionData local;
  if (meta.hops > 0) {
    DSP_CHECK_ARG(static_cast<int>(cfg.fanouts.size()) <= meta.hops,
                  "{}: the parts replicate {}-hop neighbourhoods (dsp partition --hops {}) but "
                  "--fanouts has {} layers",
                  part_dir, meta.hops, meta.hops, cfg.fanouts.size());
    local = replicated_view(part);
    self_comm = make_communicator("self");
  }
  CollectiveSampler sampler(self_comm ? local : part,
                            self_comm ? *self_comm : coord->channel(WorkerKind::kSampler), so);
  SamplerOptions eo = so;
  eo.fanouts = cfg.eval_fanouts;
  eo.seed = cfg.seed ^ 0x6576616cULL;  // "eval": evaluation draws independent of training's
  CollectiveSampler eval_sampler(part, coord->channel(WorkerKind::kSampler), eo);
  FeatureStore store(part, coord->channel(WorkerKind::kLoader), all_cached);

  TrainConfig tc = cfg.train;
  tc.model.in_dim = meta.feature_dim;
  tc.model.out_dim = meta.num_classes;
  tc.model.layers = static_cast<int>(cfg.fanouts.size());
  tc.seed = cfg.seed;
  Trainer trainer(tc, coord->channel(WorkerKind::kTrainer));

  int start_epoch = 0;
  std::string ckpt = cfg.checkpoint_dir.empty() ? "" : cfg.checkpoint_dir + "/checkpoint.pt";
  double best_val = -1, test_at_best = 0;
  int best_epoch = -1;
  if (cfg.resume) {
    DSP_CHECK_T(IoError, path_exists(ckpt), "{}: no checkpoint to resume from", ckpt);
    CheckpointInfo info = trainer.load_checkpoint(ckpt);
    std::string src = fmt::format("{:016x}", meta.source_checksum);
    std::string ck_src = info.extra.value("source_checksum", std::string());
    DSP_CHECK_FORMAT(ck_src.empty() || ck_src == src,
                     "{}: the checkpoint was trained on another dataset (source checksum {}, this "
                     "partition's dataset has {})",
                     ckpt, ck_src, src);
    start_epoch = static_cast<int>(info.epoch);
    best_val = info.extra.value("best_val_acc", -1.0);
    test_at_best = info.extra.value("test_acc_at_best", 0.0);
    best_epoch = info.extra.value("best_epoch", -1);
    if (leader) DSP_INFO("train", "resumed from {} after epoch {}", ckpt, start_epoch);
  }
  if (leader && !cfg.checkpoint_dir.empty()) fs::create_directories(cfg.checkpoint_dir);

  const int64_t F = meta.feature_dim;
  auto load_stage = [&](SampledBatch&& sb) {
    return load_batch(std::move(sb), &store, part.labels);
  };

  // Evaluation over this rank's share of `ids` (global, owned), same steps on every rank.
  int64_t eval_batch_base = 1 << 30;
  auto evaluate = [&](const std::vector<int64_t>& ids, int64_t epoch) {
    int64_t steps = (static_cast<int64_t>(ids.size()) + cfg.eval_batch_size - 1) / cfg.eval_batch_size;
    main_ch.set_step(epoch, eval_batch_base);
    main_ch.all_reduce(&steps, 1, DType::kInt64, ReduceOp::kMax);
    EvalCounts counts;
    for (int64_t s = 0; s < steps; ++s) {
      int64_t b = std::min<int64_t>(ids.size(), s * cfg.eval_batch_size);
      int64_t e = std::min<int64_t>(ids.size(), b + cfg.eval_batch_size);
      std::vector<int64_t> seeds(ids.begin() + b, ids.begin() + e);
      int64_t batch_no = eval_batch_base + s;
      coord->channel(WorkerKind::kSampler).set_step(epoch, batch_no);
      SampledBatch sb = eval_sampler.sample(seeds, epoch, batch_no);
      coord->channel(WorkerKind::kLoader).set_step(epoch, batch_no);
      LoadedBatch lb = load_stage(std::move(sb));
      counts += trainer.eval_batch(lb);
    }
    eval_batch_base += steps + 1;
    coord->channel(WorkerKind::kTrainer).set_step(epoch, eval_batch_base++);
    return trainer.all_reduce(counts);
  };
  const std::vector<int64_t> valid_ids = owned(part.valid_idx, begin, end);
  const std::vector<int64_t> test_ids = owned(part.test_idx, begin, end);

  EpochScheduler sched(std::vector<int64_t>(part.seeds.data<int64_t>(),
                                            part.seeds.data<int64_t>() + part.seeds.dim(0)),
                       cfg.batch_size, cfg.seed);
  if (cfg.order == "bfs") sched.use_bfs_order(part.patch, begin, {cfg.bfs_sequences, 0});
  main_ch.set_step(-1, 0);
  const int64_t steps = sched.agree_steps(main_ch);

  double loss_sum = 0;
  int64_t loss_count = 0;
  EvalCounts train_counts;
  std::unique_ptr<ProgressBar> bar;
  PipelineStages stages;
  stages.sample = [&](int64_t epoch, int64_t batch, const std::vector<int64_t>& seeds) {
    return sampler.sample(seeds, epoch, batch);
  };
  stages.load = load_stage;
  stages.train = [&](LoadedBatch&& lb) {
    train_counts += trainer.eval_batch(lb);
    float loss = trainer.train_step(lb);
    loss_sum += loss;
    ++loss_count;
    if (bar) bar->update(loss_count, loss_sum / loss_count);
  };
  PipelineOptions popts;
  popts.mode = parse_pipeline_mode(cfg.pipeline);
  Pipeline pipe(*coord, sched, stages, popts);

  if (leader) {
    DSP_INFO("train",
             "{} on {} ({} nodes, {} features, {} classes): {} rank(s) x {} thread(s), {} steps "
             "of {} seeds per rank per epoch, fanouts {}, pipeline {}",
             tc.model.model, meta.dataset_name, meta.num_nodes, F, meta.num_classes, size,
             threads, steps, cfg.batch_size, fmt::join(cfg.fanouts, ","), cfg.pipeline);
  }
  std::FILE* metrics = nullptr;
  if (leader && !cfg.metrics_file.empty()) {
    metrics = std::fopen(cfg.metrics_file.c_str(), cfg.resume ? "a" : "w");
    DSP_CHECK_T(IoError, metrics != nullptr, "{}: cannot open for writing", cfg.metrics_file);
  }
  struct FileCloser {
    std::FILE* f;
    ~FileCloser() {
      if (f) std::fclose(f);
    }
  } metrics_closer{metrics};

  JobResult res;
  double epoch_time_sum = 0;
  for (int epoch = start_epoch; epoch < cfg.epochs; ++epoch) {
    loss_sum = 0;
    loss_count = 0;
    train_counts = {};
    bar = std::make_unique<ProgressBar>(leader && cfg.progress, epoch, cfg.epochs, steps);
    sampler.reset_stats();
    store.reset_stats();
    EpochMetrics em = pipe.run_epoch(epoch);
    bar->finish();
    epoch_time_sum += em.wall_s;
    ++res.epochs_run;
    double loss = loss_count ? loss_sum / loss_count : 0.0;
    coord->channel(WorkerKind::kTrainer).set_step(epoch, steps + 1);
    EvalCounts train_acc = trainer.all_reduce(train_counts);

    bool last = epoch + 1 == cfg.epochs;
    bool do_eval = last || (cfg.eval_every > 0 && (epoch + 1) % cfg.eval_every == 0);
    double val = -1, test = -1;
    if (do_eval) {
      val = evaluate(valid_ids, epoch).accuracy();
      test = evaluate(test_ids, epoch).accuracy();
      if (val > best_val) {
        best_val = val;
        test_at_best = test;
        best_epoch = epoch;
      }
    }
    const GatherStats& gs = store.stats();
    res.final_loss = loss;
    res.cache_hit_rate = gs.hit_rate();
    if (leader) {
      std::string evals = do_eval ? fmt::format(" | val {:.4f} | test {:.4f}", val, test) : "";
      fmt::print(stderr,
                 "epoch {:>3} | loss {:.4f} | train {:.4f}{} | {:.2f} s (sample {:.2f}, load "
                 "{:.2f}, train {:.2f} s busy)\n",
                 epoch + 1, loss, train_acc.accuracy(), evals, em.wall_s, em.sampler.busy_s,
                 em.loader.busy_s, em.trainer.busy_s);
      if (metrics) {
        nlohmann::json rec = {{"epoch", epoch + 1},
                              {"loss", loss},
                              {"train_acc", train_acc.accuracy()},
                              {"epoch_s", em.wall_s},
                              {"pipeline", em.to_json()},
                              {"sampler", sampler.stats().to_json()},
                              {"cache_hit_rate", gs.hit_rate()}};
        if (do_eval) {
          rec["val_acc"] = val;
          rec["test_acc"] = test;
        }
        std::fputs((rec.dump() + "\n").c_str(), metrics);
        std::fflush(metrics);
      }
    }
    if (!ckpt.empty() && (last || (cfg.checkpoint_every > 0 && (epoch + 1) % cfg.checkpoint_every == 0))) {
      if (leader) {
        trainer.save_checkpoint(ckpt, epoch + 1,
                                {{"source_checksum", fmt::format("{:016x}", meta.source_checksum)},
                                 {"dataset", meta.dataset_name},
                                 {"best_val_acc", best_val},
                                 {"test_acc_at_best", test_at_best},
                                 {"best_epoch", best_epoch}});
      }
    }
  }
  res.best_val_acc = best_val;
  res.best_epoch = best_epoch;
  res.test_acc_at_best = test_at_best;
  res.mean_epoch_s = res.epochs_run ? epoch_time_sum / res.epochs_run : 0;
  for (int k = 0; k < kNumWorkerKinds; ++k) {
    res.bytes_communicated += coord->channel(static_cast<WorkerKind>(k)).counters().total_sent();
  }
  if (leader && res.epochs_run > 0) {
    fmt::print(stderr,
               "\nsummary\n"
               "  best val acc        {:.4f} (epoch {})\n"
               "  test acc at best    {:.4f}\n"
               "  final loss          {:.4f}\n"
               "  time per epoch      {:.2f} s\n"
               "  cache hit rate      {:.3f}\n"
               "  bytes sent (rank 0) {:.1f} MB\n",
               res.best_val_acc, res.best_epoch + 1, res.test_acc_at_best, res.final_loss,
               res.mean_epoch_s, res.cache_hit_rate, res.bytes_communicated / 1e6);
  }
  main_ch.set_step(cfg.epochs + 1, 0);
  main_ch.barrier();
  return res;
}

}  // namespace dsp
