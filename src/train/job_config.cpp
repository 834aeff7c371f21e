// JobConfig: the task's defaults, the one check of a job's options (validate), their JSON, and
// --resume's configuration (resume_config). The job that runs it is job.cpp.
#include <algorithm>
#include <set>

#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "train/checkpoint_files.hpp"
#include "train/job.hpp"
#include "train/job_options.hpp"
#include "train/trainer.hpp"

namespace dsp {

namespace {

// --eval and --eval-fanouts.
void check_evaluation(const JobConfig& c) {
  if (!c.eval_fanouts.empty()) check_fanouts(c.eval_fanouts, "--eval-fanouts");
  DSP_CHECK_ARG(c.eval_fanouts.empty() || c.eval_fanouts.size() == c.sampler.fanouts.size(),
                "--eval-fanouts has {} entries but --fanouts has {}", c.eval_fanouts.size(),
                c.sampler.fanouts.size());
  DSP_CHECK_ARG(c.eval != EvalMode::kFull || c.eval_fanouts.empty(),
                "--eval-fanouts with --eval full: full-neighbour evaluation samples nothing; give "
                "one of them");
  DSP_CHECK_ARG(c.eval != EvalMode::kFull || !c.sampler.is_temporal(),
                "--eval full with --temporal: full-neighbour inference sees every edge, also those "
                "after a node's time; evaluate with --eval sampled (--eval auto picks it)");
  DSP_CHECK_ARG(c.eval != EvalMode::kFull || !c.preaggregate,
                "--eval full with --preaggregate: full-neighbour inference runs the model's input "
                "layer, which a pre-aggregated model does not have; evaluate with --eval sampled");
}

// --task link and --embedding-*: what they work with.
void check_task(const JobConfig& c) {
  c.link.validate();
  DSP_CHECK_ARG(c.embedding.dim >= -1, "--embedding-dim must be >= 0 (-1: the default), got {}",
                c.embedding.dim);
  EmbeddingOptions e = c.embedding;
  e.dim = std::max<int64_t>(e.dim, 1);
  e.validate();
  DSP_CHECK_ARG(c.roles == 0 || c.embedding.dim <= 0,
                "--roles with learnable embeddings: the embeddings train in the symmetric step");
  const PredictorKind pred = c.train.model.predictor;
  if (!c.link.link()) {
    DSP_CHECK_ARG(pred == PredictorKind::kNone,
                  "--predictor {} scores node pairs: it needs --task link", pred);
    DSP_CHECK_ARG(c.link.recall_k.empty(), "--recall-k ranks held-out edges: it needs --task link");
    return;
  }
  auto refuse = [](bool bad, const char* what) {
    DSP_CHECK_ARG(!bad, "--task link does not support {}", what);
  };
  refuse(c.roles != 0, "--roles (GNNLab's factored layout carries node batches only)");
  refuse(c.preaggregate, "--preaggregate");
  refuse(c.cache_auto, "--cache-auto");
  refuse(c.seed_order.order != SeedOrder::kRandom, "--order bfs (the scheduler deals edges)");
  refuse(c.eval == EvalMode::kSampled || !c.eval_fanouts.empty(),
         "sampled evaluation (--eval sampled, --eval-fanouts): every node's output comes from "
         "full-neighbour inference");
  refuse(c.eval_max_nodes > 0, "--eval-max-nodes (every held-out edge is scored)");
}

// --read-ahead: auto or a group size, in the symmetric layout.
void check_read_ahead(const JobConfig& c) {
  DSP_CHECK_ARG(c.read_ahead == JobConfig::kReadAheadAuto ||
                    (c.read_ahead >= 0 && c.read_ahead <= JobConfig::kMaxReadAhead),
                "--read-ahead must be auto or a number of batches in [0, {}], got {}",
                JobConfig::kMaxReadAhead, c.read_ahead);
  DSP_CHECK_ARG(c.roles == 0 || c.read_ahead <= 1,
                "--read-ahead {} with --roles: sampler ranks load through their own queues; "
                "superbatches are for symmetric jobs",
                c.read_ahead);
}

// --temporal: node classification, every seed at its node time, in the symmetric layout.
void check_temporal(const JobConfig& c) {
  if (!c.sampler.is_temporal()) return;
  auto refuse = [](bool bad, const char* what) {
    DSP_CHECK_ARG(!bad, "--temporal does not support {}", what);
  };
  refuse(c.link.link(), "--task link (a seed's time is its node's time)");
  refuse(c.roles != 0, "--roles (GNNLab's factored layout samples plain batches)");
  refuse(c.preaggregate,
         "--preaggregate (its first layer aggregates every in-neighbour, after a node's time too)");
}

// --model rgcn|hsage (a heterogeneous partition; the data check refuses the others' mismatch):
// node classification with node-wise uniform sampling in the symmetric layout.
void check_hetero(const JobConfig& c) {
  if (!ModelConfig::is_hetero_model(c.train.model.model)) return;
  const std::string what = fmt::format("--model {}", c.train.model.model);
  auto refuse = [&what](bool bad, const char* option) {
    DSP_CHECK_ARG(!bad, "{} does not support {}", what, option);
  };
  refuse(c.sampler.is_temporal(), "--temporal");
  refuse(c.preaggregate, "--preaggregate (pre-aggregated rows are a homogeneous graph's)");
  refuse(c.sampler.kind != SamplerKind::kNeighbor,
         "--sampler labor or layer (a heterogeneous graph is sampled node-wise, per relation)");
  refuse(c.roles != 0, "--roles (GNNLab's factored layout carries homogeneous batches)");
  refuse(c.cache_auto,
         "--cache-auto (it sizes one feature store; a heterogeneous graph has one "
         "per node type)");
  refuse(c.rank.fifo_rows > 0, "--fifo-rows (the FIFO levels serve one feature store)");
}

// --loss and --metric as far as the options alone decide (the labels decide the rest:
// resolve_loss).
void check_loss_and_metric(const JobConfig& c) {
  const LossKind loss = c.train.model.loss;
  if (c.link.link()) {
    DSP_CHECK_ARG(loss != LossKind::kCe,
                  "--loss ce with --task link: link prediction trains with binary cross-entropy "
                  "of the pairs' logits (--loss bce or auto)");
    DSP_CHECK_ARG(c.metric == MetricKind::kAuto || c.metric == MetricKind::kRocauc,
                  "--metric {} with --task link: link prediction picks its best epoch by the "
                  "first --hits-k's Hits@K (MRR with negatives per positive) or, with --metric "
                  "rocauc, by the ROC-AUC of the held-out edges against their negatives",
                  c.metric);
    return;
  }
  DSP_CHECK_ARG(!(loss == LossKind::kBce && c.metric == MetricKind::kF1),
                "--metric f1 is the multi-class macro-F1 (--loss ce); with --loss bce pick acc or "
                "rocauc");
}

void check_not_both_init_and_resume(const JobConfig& c) {
  DSP_CHECK_ARG(!c.resume || c.init_from.empty(),
                "--init-from starts a new run from a model's parameters and --resume continues "
                "a run: give one of them");
}
}  // namespace

TrainConfig job_train_defaults() {
  TrainConfig t;
  t.weight_decay = JobConfig::kTaskWeightDecay;
  t.lr = JobConfig::kTaskLr;
  return t;
}

SamplerConfig job_sampler_defaults() {
  SamplerConfig s;
  s.fanouts.clear();
  return s;
}

bool JobConfig::sizes_device_cache(bool gpu) const {
  return gpu && !cache_auto && rank.cache_ratio == -1 && rank.cache_policy.empty() &&
         !link.link() && !ModelConfig::is_hetero_model(train.model.model) && roles == 0 &&
         !preaggregate;
}

void JobConfig::apply_task_defaults() {
  if (sampler.fanouts.empty() && sampler.relation_fanouts.empty()) {
    sampler.fanouts = link.link() ? std::vector<int>{15, 10} : std::vector<int>{15, 10, 5};
    // --layers alone: that many of them (beyond 64, the count check below refuses it).
    if (layers > 0 && layers <= 64) sampler.fanouts.resize(static_cast<size_t>(layers), 5);
  }
  if (train.weight_decay == kTaskWeightDecay) train.weight_decay = link.link() ? 0.0 : 5e-4;
  if (train.lr == kTaskLr) {
    train.lr = link.link() && ModelConfig::is_hetero_model(train.model.model) ? 1e-3 : 1e-2;
  }
}

void JobConfig::validate() const {
  if ((sampler.fanouts.empty() && sampler.relation_fanouts.empty()) ||
      train.weight_decay == kTaskWeightDecay || train.lr == kTaskLr) {
    JobConfig resolved = *this;
    resolved.apply_task_defaults();
    resolved.validate();
    return;
  }
  rank_options().validate();  // the rank's own options: checked where they belong
  sampler.validate();
  const std::vector<int>& fanouts = sampler.fanouts;
  DSP_CHECK_ARG(layers == 0 || layers == static_cast<int>(fanouts.size()),
                "--fanouts has {} entries but the model has {} layers (one fanout per layer)",
                fanouts.size(), layers);
  check_evaluation(*this);
  check_task(*this);
  check_temporal(*this);
  check_hetero(*this);
  DSP_CHECK_ARG(batch_size > 0 && eval_batch_size > 0, "batch sizes must be > 0");
  DSP_CHECK_ARG(eval_max_nodes >= 0, "--eval-max-nodes must be >= 0, got {}", eval_max_nodes);
  DSP_CHECK_ARG(epochs >= 1, "--epochs must be at least 1, got {}: a run trains", epochs);
  DSP_CHECK_ARG(max_steps >= 0, "--max-steps must be >= 0 (0: no limit), got {}", max_steps);
  DSP_CHECK_ARG(roles >= 0 || roles == kRolesAuto,
                "--roles must be auto or >= 0 (sampler-only ranks), got {}", roles);
  DSP_CHECK_ARG(roles != 0 || roles_switch == RoleSwitch::kOff,
                "--roles-switch {} needs --roles (sampler-only ranks to switch)", roles_switch);
  DSP_CHECK_ARG(eval_every >= 0 && checkpoint_every >= 0, "--eval-every/--checkpoint-every >= 0");
  DSP_CHECK_ARG(patience >= 0, "--patience must be >= 0 (0: never stop early), got {}", patience);
  DSP_CHECK_ARG(!resume || !checkpoint_dir.empty(), "--resume needs --checkpoint-dir");
  DSP_CHECK_ARG(!overwrite || !checkpoint_dir.empty(),
                "--overwrite replaces an earlier run in --checkpoint-dir: give --checkpoint-dir");
  DSP_CHECK_ARG(
      !overwrite || !resume,
      "--resume continues the run in --checkpoint-dir, --overwrite replaces it: give one");
  DSP_CHECK_ARG(keep_checkpoints >= 1, "--keep-checkpoints must be >= 1, got {}", keep_checkpoints);
  check_not_both_init_and_resume(*this);
  check_loss_and_metric(*this);
  DSP_CHECK_ARG(!cache_auto || rank.cache_ratio == -1,
                "--cache-auto sizes the cache from the memory left: give it or --cache-ratio, "
                "not both");
  seed_order.validate();
  DSP_CHECK_ARG(roles == 0 || (seed_order.order == SeedOrder::kRandom && !cache_auto),
                "--roles runs the random seed order with the partition's cache: --order bfs and "
                "--cache-auto are for symmetric jobs");
  DSP_CHECK_ARG(!preaggregate || train.normalize_features == FeatureNorm::kNone,
                "--normalize-features {} with --preaggregate: the pre-aggregated rows were "
                "computed from the raw features; train without --preaggregate to normalise",
                train.normalize_features);
  check_read_ahead(*this);
  DSP_CHECK_ARG(roles == 0 || !preaggregate,
                "--roles runs the sampled input layer: --preaggregate is for symmetric jobs");
  DSP_CHECK_ARG(roles == 0 || rank.fifo_rows == 0,
                "--roles: sampler ranks read every row from their own mapping and trainers load "
                "none, so no rows come from peers for a FIFO to keep: --fifo-rows is for "
                "symmetric jobs");
  DSP_CHECK_ARG(roles == 0 || !rank.device.is_cuda(),
                "--roles with --device {}: sampler-only ranks sample on the CPU (GPU sampler "
                "ranks are not implemented): train on the GPU without --roles, or use --roles "
                "on the CPU",
                rank.device.str());
  ModelConfig m = train.model;
  m.layers = static_cast<int>(fanouts.size());
  m.preaggregated = preaggregate;
  if (m.in_dim == 0) m.in_dim = 1;  // filled from the data later; validate the rest now
  if (m.out_dim == 0) m.out_dim = 2;
  if (m.hetero()) {  // the schema comes with the data: one featured type and a self relation
    m.in_dim = 0;
    m.type_dims = {1};
    m.relation_src = m.relation_dst = {0};
  }
  if (link.link() && m.predictor == PredictorKind::kNone) m.predictor = PredictorKind::kDot;
  TrainConfig t = train;  // the model and optimiser options, before any rank starts
  t.model = m;
  t.validate();
  check_fanout_count(fanouts, m);
}

nlohmann::json JobConfig::to_json() const { return write_options(job_options(), *this); }

JobConfig JobConfig::from_json(const nlohmann::json& j, const std::string& what) {
  JobConfig c;
  read_options(job_options(), j, c, what);
  return c;
}

RankOptions JobConfig::rank_options() const {
  RankOptions ro = rank;
  ro.coord.ccc = ccc;
  ro.threads = train.num_threads;
  ro.seed = seed;
  ro.log_name = "train";
  if (preaggregate) ro.preaggregate = train.model.preaggregation();
  return ro;
}

namespace {
// The command-line spelling of a job option's key (the key itself for a --config-only one).
std::string flag_of(const std::string& key) {
  const std::string& flag = options::find(job_options(), key).flag;
  return flag.empty() ? key : flag;
}
}  // namespace

namespace {
// --resume auto: the newest checkpoint in `dir` whose header verifies, for the run's recorded
// options ("": none; the job then picks the one to load, every tensor verified).
std::string newest_readable_checkpoint(const std::string& dir) {
  std::vector<std::string> files;
  for (const int64_t e : rotated_epochs(dir)) files.push_back(rotated_checkpoint(dir, e));
  if (files.empty()) files.push_back(dir + "/checkpoint.pt");
  for (const std::string& f : files) {
    if (!path_exists(f)) continue;
    try {
      checkpoint_header(f);
      return f;
    } catch (const Error&) {  // the job warns about it
    }
  }
  return "";
}
}  // namespace

JobConfig resume_config(const JobConfig& c, const std::set<std::string>& given) {
  check_not_both_init_and_resume(c);
  const std::string path = c.resume_auto ? newest_readable_checkpoint(c.checkpoint_dir)
                                         : c.checkpoint_dir + "/checkpoint.pt";
  if (path.empty()) return c;  // --resume auto with nothing to resume: a new run
  DSP_CHECK_T(IoError, path_exists(path), "{}: no checkpoint to resume from", path);
  const nlohmann::json extra = checkpoint_header(path).value("extra", nlohmann::json::object());
  if (!extra.contains("job")) return c;  // written before checkpoints recorded their run
  const JobConfig base = JobConfig::from_json(extra.at("job"), path);
  const nlohmann::json recorded = base.to_json(), mine = c.to_json();
  std::set<std::string> may_change;  // the options flagged so (Option::may_change_on_resume)
  std::vector<std::string> flags;
  for (const JobOption& o : job_options()) {
    if (!o.may_change_on_resume) continue;
    may_change.insert(o.key);
    if (!o.flag.empty() && o.key != "resume") flags.push_back(o.flag);
  }
  nlohmann::json take = nlohmann::json::object();
  for (const std::string& key : given) {
    if (!mine.contains(key)) continue;
    DSP_CHECK_ARG(may_change.count(key) || mine.at(key) == recorded.at(key),
                  "{} {} contradicts the run in {} ({}): --resume continues that run; only {} "
                  "and the path may change",
                  flag_of(key), mine.at(key).dump(), path, recorded.at(key).dump(),
                  fmt::join(flags, ", "));
    take[key] = mine.at(key);
  }
  JobConfig out = base;
  out.resume = c.resume;  // whether and how this run resumes is its own choice, not the record's
  out.resume_auto = c.resume_auto;
  out.overwrite = false;  // the recorded run may have replaced another; this one continues it
  read_options(job_options(), take, out, "--resume");
  return out;
}

}  // namespace dsp
