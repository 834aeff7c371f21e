#include "train/job_options.hpp"

#include <cstdlib>

#include "core/error.hpp"
#include "core/lists.hpp"
#include "core/memory.hpp"

namespace dsp {
namespace {
using json = nlohmann::json;
using options::declare;

template <class Get>
JobOption value(std::string flag, std::string key, std::string help, Get get,
                const std::string& choices = "") {
  return options::value<JobConfig>(std::move(flag), std::move(key), std::move(help), get, choices);
}

template <class Get>
JobOption toggle(std::string flag, std::string key, std::string help, Get get) {
  return options::toggle<JobConfig>(std::move(flag), std::move(key), std::move(help), get);
}

// A rank option (pipeline/rank/options.hpp), declared by the rank room.
JobOption from_rank(const std::string& key) {
  return options::embed<JobConfig>(options::find(rank_options_table(), key),
                                   [](JobConfig& c) -> RankOptions& { return c.rank; });
}

// A sampler option (csp/sampler.hpp), declared with SamplerOptions.
JobOption from_sampler(const std::string& key) {
  return options::embed<JobConfig>(options::find(sampler_options_table(), key),
                                   [](JobConfig& c) -> SamplerOptions& { return c.sampler; });
}

// A seed order option (pipeline/scheduler.hpp), declared with SeedOrderOptions.
JobOption from_seed_order(const std::string& key) {
  return options::embed<JobConfig>(options::find(seed_order_options_table(), key),
                                   [](JobConfig& c) -> SeedOrderOptions& { return c.seed_order; });
}

// A model or optimiser option (train/config.hpp), declared with TrainConfig.
JobOption from_train(const std::string& key) {
  return options::embed<JobConfig>(options::find(train_config_table(), key),
                                   [](JobConfig& c) -> TrainConfig& { return c.train; });
}

// clang-format off
#define DSP_FIELD(member) [](JobConfig& c) -> auto& { return c.member; }
// clang-format on

JobOption roles_option() {
  JobOption o = declare<JobConfig>(
      "--roles", "roles",
      "GNNLab's factored layout: this many ranks (the last ones) only sample and load, "
      "the others only train (default 0: every rank does every stage); auto: GNNLab's "
      "allocation rule over a profile of a few batches (logged)");
  o.type = "TEXT";
  o.parse = [](JobConfig& c, const std::string& s) {
    if (s == "auto") {
      c.roles = JobConfig::kRolesAuto;
      return;
    }
    char* end = nullptr;
    const long n = std::strtol(s.c_str(), &end, 10);
    DSP_CHECK_ARG(!s.empty() && *end == '\0' && n >= 0 && n < (1 << 20),
                  "--roles must be auto or a number of sampler-only ranks, got '{}'", s);
    c.roles = static_cast<int>(n);
  };
  o.read = [](JobConfig& c, const json& v) {
    c.roles =
        v.is_string() && v.get<std::string>() == "auto" ? JobConfig::kRolesAuto : v.get<int>();
  };
  o.write = [](const JobConfig& c) {
    return c.roles == JobConfig::kRolesAuto ? json("auto") : json(c.roles);
  };
  return o;
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

JobOption quiet_option() {  // a command-line switch only
  JobOption o = declare<JobConfig>("--no-progress", "", "no progress bar", false);
  o.parse = [](JobConfig& c, const std::string&) { c.progress = false; };
  return o;
}

std::vector<JobOption> model_and_sampling() {
  return {
      from_rank("path"),
      from_train("model"),
      from_train("hidden"),
      from_sampler("fanouts"),
      value("--layers", "layers", "number of layers (default: one per fanout)", DSP_FIELD(layers)),
      value("--eval-fanouts", "eval_fanouts", "fanouts for evaluation (default: --fanouts)",
            DSP_FIELD(eval_fanouts)),
      value("--batch-size", "batch_size", "training seeds per rank per step (default 1024)",
            DSP_FIELD(batch_size)),
      value("", "eval_batch_size", "seeds per evaluation batch (default 4096)",
            DSP_FIELD(eval_batch_size)),
      value("--epochs", "epochs", "epochs (default 10)", DSP_FIELD(epochs)),
      value("--max-steps", "max_steps",
            "train at most N steps per epoch: the first N batches of the epoch's shuffled order, "
            "the same count on every rank (default 0: the whole epoch)",
            DSP_FIELD(max_steps)),
      from_train("lr"),
      from_train("weight_decay"),
      from_train("optimizer"),
      from_train("momentum"),
      from_train("dropout"),
      from_train("heads"),
      from_train("out_heads"),
  };
}

std::vector<JobOption> caches_and_pipeline() {
  return {
      from_rank("cache_policy"),
      from_rank("cache_ratio"),
      toggle("--cache-auto", "cache_auto",
             "PaGraph: size the cache after the first batch from the memory left (host: "
             "--cache-memory or the available memory; GPU: free device memory) minus the batches "
             "in flight; the policy must be in-degree, random or none",
             DSP_FIELD(cache_auto)),
      from_rank("cache_memory"),
      from_rank("fifo_rows"),
      from_rank("fifo_shared_rows"),
      value("--pipeline", "pipeline",
            "auto (default: profile the first batches, then pipeline with per-stage core shares "
            "only where it is faster), on (three workers) or off (stages one after another)",
            DSP_FIELD(pipeline), "auto,on,off"),
      roles_option(),
      value("--roles-switch", "roles_switch",
            "with --roles: on = a sampler rank trains a batch itself while its queue is full "
            "(GNNLab's dynamic switching; the same batches and updates as a symmetric job on all "
            "ranks), always, never, or off (default: the trainers train one batch each per step)",
            DSP_FIELD(roles_switch), "off,on,always,never"),
      from_sampler("sample_kernel"),
      ccc_option(),
  };
}

std::vector<JobOption> run_and_placement() {
  return {
      value("--eval-every", "eval_every", "evaluate every k epochs (default 1; 0: at the end)",
            DSP_FIELD(eval_every)),
      value("--patience", "patience",
            "stop once validation has not improved in N evaluations (default 0: never)",
            DSP_FIELD(patience)),
      value("--checkpoint-dir", "checkpoint_dir", "write checkpoint.pt here",
            DSP_FIELD(checkpoint_dir)),
      value("--checkpoint-every", "checkpoint_every", "every k epochs (0: at the end)",
            DSP_FIELD(checkpoint_every)),
      toggle("--resume", "resume", "continue from --checkpoint-dir/checkpoint.pt",
             DSP_FIELD(resume)),
      value("--seed", "seed", "random seed (sampling, dropout, initialisation)", DSP_FIELD(seed)),
      value("--metrics", "metrics_file", "write one JSON record per epoch to this file",
            DSP_FIELD(metrics_file)),
      value("--threads", "threads", "threads per rank (default: the rank's share of its cores)",
            DSP_FIELD(train.num_threads)),
      from_rank("backend"),
      from_rank("device"),
      from_rank("transport"),
      from_rank("topology_memory"),
      quiet_option(),
      from_seed_order("order"),
      from_seed_order("bfs_sequences"),
      toggle("--preaggregate", "preaggregate",
             "sage, gcn: PaGraph's pre-aggregated first layer, from a partition written with dsp "
             "partition --preaggregate (a dataset directory is partitioned so): the input layer's "
             "fanout (the last) is not sampled, its aggregation covers every in-neighbour",
             DSP_FIELD(preaggregate)),
  };
}

std::vector<JobOption> all_options() {
  std::vector<JobOption> v = model_and_sampling();
  for (auto part : {caches_and_pipeline(), run_and_placement()}) {
    for (auto& o : part) v.push_back(std::move(o));
  }
  return v;
}

}  // namespace

const std::vector<JobOption>& job_options() {
  static const std::vector<JobOption> table = all_options();
  return table;
}

}  // namespace dsp
