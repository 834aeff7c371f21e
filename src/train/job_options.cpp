#include "train/job_options.hpp"

#include <cstdlib>

#include "core/error.hpp"
#include "core/lists.hpp"
#include "core/memory.hpp"

namespace dsp {

const Names<EvalMode>& names_of(EvalMode) {
  using E = EvalMode;
  static const Names<E> n("evaluation",
                          {{E::kAuto, "auto"}, {E::kFull, "full"}, {E::kSampled, "sampled"}});
  return n;
}

namespace {
using json = nlohmann::json;
using options::declare;
using options::resumable;

template <class Get>
JobOption value(std::string flag, std::string key, std::string help, Get get,
                const std::string& choices = "") {
  return options::value<JobConfig>(std::move(flag), std::move(key), std::move(help), get, choices);
}

template <class Get>
JobOption toggle(std::string flag, std::string key, std::string help, Get get) {
  return options::toggle<JobConfig>(std::move(flag), std::move(key), std::move(help), get);
}

// clang-format off
#define DSP_FIELD(member) [](JobConfig& c) -> auto& { return c.member; }
// clang-format on

// An option that takes auto (stored as -1) or a count in [0, max] into c.*member; `what` names the
// count in the usage error ("--roles must be auto or <what>, got 'x'").
JobOption auto_or_count(std::string flag, std::string key, std::string help, int JobConfig::*member,
                        long max, std::string what) {
  JobOption o = declare<JobConfig>(flag, std::move(key), std::move(help));
  o.type = "TEXT";
  o.parse = [=](JobConfig& c, const std::string& s) {
    if (s == "auto") {
      c.*member = -1;
      return;
    }
    char* end = nullptr;
    const long n = std::strtol(s.c_str(), &end, 10);
    DSP_CHECK_ARG(!s.empty() && *end == '\0' && n >= 0 && n <= max,
                  "{} must be auto or {}, got '{}'", flag, what, s);
    c.*member = static_cast<int>(n);
  };
  o.read = [member](JobConfig& c, const json& v) {
    c.*member = v.is_string() && v.get<std::string>() == "auto" ? -1 : v.get<int>();
  };
  o.write = [member](const JobConfig& c) {
    return c.*member == -1 ? json("auto") : json(c.*member);
  };
  return o;
}

JobOption roles_option() {
  static_assert(JobConfig::kRolesAuto == -1, "auto_or_count stores auto as -1");
  return auto_or_count("--roles", "roles",
                       "GNNLab's factored layout: this many ranks (the last ones) only sample and "
                       "load, the others only train (default 0: every rank does every stage); "
                       "auto: GNNLab's allocation rule over a profile of a few batches (logged)",
                       &JobConfig::roles, (1 << 20) - 1, "a number of sampler-only ranks");
}

JobOption read_ahead_option() {
  static_assert(JobConfig::kReadAheadAuto == -1, "auto_or_count stores auto as -1");
  return auto_or_count(
      "--read-ahead", "read_ahead",
      "Ginex's superbatches: load the sampled batches N at a time, the cold feature rows of all N "
      "read from disk in one sweep in file order before the first is loaded (the same batches "
      "and results); auto (default): 16 when the feature rows exceed a rank's memory share "
      "(read from disk), else 0 (off)",
      &JobConfig::read_ahead, JobConfig::kMaxReadAhead,
      fmt::format("a number of batches in [0, {}]", JobConfig::kMaxReadAhead));
}

JobOption ccc_option() {
  JobOption o =
      declare<JobConfig>("--ccc", "ccc", "on (default); off shows why the coordinator is needed");
  o.type = "TEXT:{on,off}";
  o.parse = [](JobConfig& c, const std::string& s) {
    DSP_CHECK_ARG(s == "on" || s == "off", "--ccc must be on or off, got '{}'", s);
    c.ccc = s == "on";
  };
  o.read = [](JobConfig& c, const json& v) { c.ccc = v.get<bool>(); };
  o.write = [](const JobConfig& c) { return json(c.ccc); };
  return o;
}

JobOption resume_option() {
  JobOption o = declare<JobConfig>(
      "--resume", "resume",
      "continue the run in --checkpoint-dir from checkpoint.pt (an error when it is missing or "
      "damaged); --resume auto: from the newest checkpoint there that verifies on every rank, "
      "skipping a damaged one with a warning, or start the run when there is none (so the same "
      "command starts and restarts a job; an error when none verifies)");
  o.type = "[auto]";
  o.value_optional = true;
  o.parse = [](JobConfig& c, const std::string& s) {
    DSP_CHECK_ARG(s.empty() || s == "auto", "--resume takes no value or auto, got '{}'", s);
    c.resume = true;
    c.resume_auto = s == "auto";
  };
  o.read = [](JobConfig& c, const json& v) {
    DSP_CHECK_ARG(v.is_boolean() || v == "auto", "resume must be true, false or \"auto\", got {}",
                  v.dump());
    c.resume = !v.is_boolean() || v.get<bool>();
    c.resume_auto = v.is_string();
  };
  o.write = [](const JobConfig& c) {
    return c.resume && c.resume_auto ? json("auto") : json(c.resume);
  };
  return o;
}

JobOption quiet_option() {  // a command-line switch only
  JobOption o = declare<JobConfig>("--no-progress", "", "no progress bar", false);
  o.parse = [](JobConfig& c, const std::string&) { c.progress = false; };
  return o;
}

std::vector<JobOption> model_and_sampling() {
  return {
      value("--layers", "layers",
            "number of layers (default: one per fanout; without --fanouts, the first N of the "
            "task's fanouts, then 5s)",
            DSP_FIELD(layers)),
      value("--eval-fanouts", "eval_fanouts",
            "sampled evaluation with these fanouts (default: --fanouts, when evaluation samples)",
            DSP_FIELD(eval_fanouts)),
      value("--eval", "eval",
            "evaluation: full (every layer over whole neighbourhoods, layer by layer, as DGL's "
            "and PyG's inference; a typed graph: every neighbour sampled, batch by batch), sampled "
            "(--eval-fanouts) or auto (default: sampled if "
            "--eval-fanouts is given, else full where its memory estimate fits and it reads no "
            "more neighbour rows than sampling, else sampled; logged)",
            DSP_FIELD(eval)),
      value("--batch-size", "batch_size",
            "training seeds (--task link: training edges) per rank per step (default 1024)",
            DSP_FIELD(batch_size)),
      value("", "eval_batch_size", "seeds per evaluation batch (default 4096)",
            DSP_FIELD(eval_batch_size)),
      value("--eval-max-nodes", "eval_max_nodes",
            "validate and test on about N nodes of each split, the same ones at any rank count "
            "(default 0: every node; sampled evaluation then costs that much less)",
            DSP_FIELD(eval_max_nodes)),
      resumable(value("--epochs", "epochs", "epochs (default 10)", DSP_FIELD(epochs))),
      value("--max-steps", "max_steps",
            "train at most N steps per epoch: the first N batches of the epoch's shuffled order, "
            "the same count on every rank (default 0: the whole epoch)",
            DSP_FIELD(max_steps)),
  };
}

std::vector<JobOption> caches_and_pipeline() {
  return {
      toggle("--cache-auto", "cache_auto",
             "PaGraph: size the cache after the first batch from the memory left (host: "
             "--cache-memory or the available memory; GPU: free device memory) minus the batches "
             "in flight; the policy must be in-degree, random or none",
             DSP_FIELD(cache_auto)),
      value("--pipeline", "pipeline",
            "auto (default: profile the first batches, then pipeline with per-stage core shares "
            "only where it is faster), on (three workers) or off (stages one after another)",
            DSP_FIELD(pipeline)),
      roles_option(),
      value("--roles-switch", "roles_switch",
            "with --roles: on = a sampler rank trains a batch itself while its queue is full "
            "(GNNLab's dynamic switching; the same batches and updates as a symmetric job on all "
            "ranks), always, never, or off (default: the trainers train one batch each per step)",
            DSP_FIELD(roles_switch)),
      read_ahead_option(),
      ccc_option(),
  };
}

std::vector<JobOption> run_and_placement() {
  return {
      resumable(value("--eval-every", "eval_every",
                      "evaluate every k epochs (default 1; 0: at the end)", DSP_FIELD(eval_every))),
      value("--patience", "patience",
            "stop once validation has not improved in N evaluations (default 0: never)",
            DSP_FIELD(patience)),
      resumable(value("--checkpoint-dir", "checkpoint_dir",
                      "write checkpoints here: checkpoint-<E>.pt after epoch E (the newest "
                      "--keep-checkpoints kept), checkpoint.pt (the newest) and best.pt (the best "
                      "validation so far)",
                      DSP_FIELD(checkpoint_dir))),
      resumable(value("--checkpoint-every", "checkpoint_every", "every k epochs (0: at the end)",
                      DSP_FIELD(checkpoint_every))),
      resumable(value("--keep-checkpoints", "keep_checkpoints",
                      "keep the newest K checkpoint-<E>.pt (default 2); an older one is removed "
                      "once a newer one is complete on every rank",
                      DSP_FIELD(keep_checkpoints))),
      resumable(resume_option()),
      toggle("--overwrite", "overwrite",
             "a new run in a --checkpoint-dir that holds an earlier run's checkpoints: remove "
             "them first (without it, or --resume, the run is refused before any work)",
             DSP_FIELD(overwrite)),
      value("--init-from", "init_from",
            "start a new run from this model's parameters: a checkpoint of dsp train (e.g. "
            "best.pt) or a directory of dsp.export_model; same model and sizes, any optimizer",
            DSP_FIELD(init_from)),
      value("--seed", "seed", "random seed (sampling, dropout, initialisation)", DSP_FIELD(seed)),
      value("--metric", "metric",
            "what picks the best epoch: acc, f1 (macro-F1, --loss ce), rocauc (--loss bce; "
            "mean over label columns with both classes when multi-label, as OGB's "
            "ogbn-proteins) or auto (default: acc for ce, rocauc for bce); --task link: auto "
            "(the first --hits-k's Hits@K, MRR with negatives per positive) or rocauc (the "
            "held-out edges' ROC-AUC against their negatives)",
            DSP_FIELD(metric)),
      resumable(value("--metrics", "metrics_file", "write one JSON record per epoch to this file",
                      DSP_FIELD(metrics_file))),
      resumable(value("--threads", "threads",
                      "threads per rank (default: the rank's share of its cores)",
                      DSP_FIELD(train.num_threads))),
      quiet_option(),
      toggle("--preaggregate", "preaggregate",
             "sage, gcn: PaGraph's pre-aggregated first layer, from a partition written with dsp "
             "partition --preaggregate (a dataset directory is partitioned so): the input layer's "
             "fanout (the last) is not sampled, its aggregation covers every in-neighbour",
             DSP_FIELD(preaggregate)),
  };
}
#undef DSP_FIELD

// The job's own options, then those its modules declare (each module's table, embedded whole:
// a module's new option needs no line here): the rank's (pipeline/rank/options.hpp), the
// sampler's (csp/sampler.hpp), the seed order's (pipeline/scheduler.hpp), the model's and
// optimiser's (train/config.hpp).
std::vector<JobOption> all_options() {
  std::vector<JobOption> v = model_and_sampling();
  auto add = [&v](std::vector<JobOption> part) { options::append(v, std::move(part)); };
  add(caches_and_pipeline());
  add(run_and_placement());
  add(options::embed_all<JobConfig>(rank_options_table(),
                                    [](JobConfig& c) -> RankOptions& { return c.rank; }));
  add(options::embed_all<JobConfig>(sampler_options_table(),
                                    [](JobConfig& c) -> SamplerConfig& { return c.sampler; }));
  add(options::embed_all<JobConfig>(
      seed_order_options_table(), [](JobConfig& c) -> SeedOrderOptions& { return c.seed_order; }));
  add(options::embed_all<JobConfig>(train_config_table(),
                                    [](JobConfig& c) -> TrainConfig& { return c.train; }));
  add(options::embed_all<JobConfig>(link_options_table(),
                                    [](JobConfig& c) -> LinkOptions& { return c.link; }));
  add(options::embed_all<JobConfig>(embedding_options_table(),
                                    [](JobConfig& c) -> EmbeddingOptions& { return c.embedding; }));
  return v;
}

}  // namespace

const std::vector<JobOption>& job_options() {
  static const std::vector<JobOption> table = all_options();
  return table;
}

}  // namespace dsp
