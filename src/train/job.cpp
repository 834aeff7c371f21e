#include "train/job.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include <fmt/ranges.h>

#include "ccc/coordinator.hpp"
#include "core/console.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/interrupt.hpp"
#include "core/logging.hpp"
#include "core/memory.hpp"
#include "core/rng.hpp"
#include "core/timer.hpp"
#include "csp/sampler.hpp"
#include "graph/npy.hpp"
#include "layout/partition/hotness.hpp"
#include "layout/partition/partition_dir.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/rank/runtime.hpp"
#include "pipeline/roles.hpp"
#include "pipeline/scheduler.hpp"
#include "train/checkpoint_files.hpp"
#include "train/checkpoint_keeper.hpp"
#include "train/eval_choice.hpp"
#include "train/inference.hpp"
#include "train/job_options.hpp"
#include "train/link_task.hpp"
#include "train/lr_schedule.hpp"
#include "train/progress.hpp"
#include "train/trainer.hpp"
#include "train/typed_rows.hpp"

namespace dsp {
namespace fs = std::filesystem;

namespace {
// The loss of node classification on labels of `classes` classes (int64) or label columns
// (multi-label): --loss auto is ce for class labels and bce for multi-label ones.
LossKind resolve_loss(LossKind loss, bool multilabel, int64_t classes, bool hetero) {
  DSP_CHECK_ARG(!(multilabel && hetero),
                "multi-label labels with a heterogeneous model: not implemented (train a "
                "homogeneous model: sage, gcn or gat)");
  if (multilabel) {
    DSP_CHECK_ARG(loss != LossKind::kCe,
                  "--loss ce on multi-label labels ({} columns): a node may carry several labels; "
                  "train with --loss bce (or auto)",
                  classes);
    return LossKind::kBce;
  }
  DSP_CHECK_ARG(loss != LossKind::kBce || classes == 2,
                "--loss bce on class labels is binary (one logit, label 1 positive): the dataset "
                "has {} classes, not 2; train with --loss ce",
                classes);
  return loss == LossKind::kAuto ? LossKind::kCe : loss;
}

// --metric auto: acc for ce, rocauc for bce; otherwise the given one, which must suit the loss.
// --metric rocauc with ce: a 2-class softmax's p(class 1) (scikit-learn's and OGB's score).
MetricKind resolve_metric(MetricKind metric, LossKind loss, int64_t classes) {
  using M = MetricKind;
  if (metric == M::kAuto) return loss == LossKind::kBce ? M::kRocauc : M::kAcc;
  DSP_CHECK_ARG(!(loss == LossKind::kCe && metric == M::kRocauc && classes != 2),
                "--metric rocauc ranks per-seed scores: a binary task (a 2-class softmax's "
                "p(class 1), or --loss bce) or a multi-label one; the dataset has {} classes",
                classes);
  DSP_CHECK_ARG(!(loss == LossKind::kBce && metric == M::kF1),
                "--metric f1 is the multi-class macro-F1 (--loss ce); with --loss bce pick acc or "
                "rocauc");
  return metric;
}
}  // namespace

nlohmann::json JobResult::to_json() const {
  nlohmann::json j = body_json();
  const nlohmann::json none;  // null: a split the data does not have
  if (!has_valid) j["best_val_acc"] = none;
  if (!has_test) j["test_acc_at_best"] = j["test_acc_full"] = none;
  j["history"] = history;
  return j;
}

nlohmann::json JobResult::body_json() const {
  return {{"epochs_run", epochs_run},
          {"stopped_early", stopped_early},
          {"best_val_acc", best_val_acc},
          {"best_epoch", best_epoch},
          {"test_acc_at_best", test_acc_at_best},
          {"eval", eval},
          {"test_acc_full", test_acc_full},
          {"final_loss", final_loss},
          {"mean_epoch_s", mean_epoch_s},
          {"cache_hit_rate", cache_hit_rate},
          {"bytes_communicated", bytes_communicated},
          {"feature_bytes_per_batch", feature_bytes_per_batch},
          {"peer_bytes_per_batch", peer_bytes_per_batch},
          {"fifo_hits", fifo_hits},
          {"fifo_shared_hits", fifo_shared_hits},
          {"fifo_hit_rate", fifo_hit_rate},
          {"read_ahead", read_ahead},
          {"cold_rows_read_ahead", cold_rows_read_ahead},
          {"feature_dtype", feature_dtype},
          {"feature_max_abs_error", feature_max_abs_error},
          {"feature_rel_rms_error", feature_rel_rms_error},
          {"metric", metric},
          {"best_val_mrr", best_val_mrr},
          {"test_mrr_at_best", test_mrr_at_best}};
}

namespace {

// Batch numbers of evaluation: a pure function of (split, step), so a resumed job evaluates with
// exactly the draws of an uninterrupted one. Training batches stay below kEvalBase.
constexpr int64_t kEvalBase = int64_t{1} << 40;
// The "layer" of the key that picks --eval-max-nodes' subsample (no sampling layer is this high).
constexpr uint64_t kEvalSubsampleLayer = 0xe5a1;
constexpr int64_t kEvalSplitStride = int64_t{1} << 32;
int64_t eval_batch_id(int split, int64_t step) {
  return kEvalBase + split * kEvalSplitStride + step;
}
// The collectives around a split's evaluation (step agreement, counts) use ids past its steps.
int64_t eval_control_id(int split, int k) {
  return kEvalBase + split * kEvalSplitStride + kEvalSplitStride / 2 + k;
}
// The barrier after an epoch's checkpoint (every rank's embedding shard written) is past every
// training batch, before evaluation's ids.
static_assert(CheckpointKeeper::kBarrierStep == kEvalBase - 1);

// One rank's training job: setup (constructor), one epoch (train_epoch), evaluation, reporting.
class TrainJob {
 public:
  // `recorded`: the configuration as the user gave it, kept in every checkpoint (resume_config).
  TrainJob(const JobConfig& cfg, nlohmann::json recorded);
  int start_epoch() const { return start_epoch_; }
  // --patience: validation has not improved in that many evaluations.
  bool stop_early() const { return cfg_.patience > 0 && run_.evals_since_best >= cfg_.patience; }
  void train_epoch(int epoch);
  void report_epoch(int epoch);
  JobResult finish();

 private:
  void check_data() const;
  SamplerOptions make_samplers();
  void make_trainer();
  void account();
  void count_splits();
  void warn_few_steps(const EpochScheduler& sched) const;
  void note_history(int epoch, double loss, double train_acc, bool evaluated, double val,
                    double test);
  std::string eval_text(double val, double test) const;
  PipelineStages symmetric_stages();
  EpochScheduler* schedule(PipelineStages& stages, const SamplerOptions& so);
  void log_start(const EpochScheduler& sched) const;
  EvalTally evaluate(int split, const std::vector<int64_t>& ids, int64_t epoch);
  void choose_eval();
  void subsample_eval_ids();
  // Full-neighbour evaluation (train/inference.hpp): validation and test counts, all ranks'.
  std::vector<float> infer_all(int64_t epoch);
  std::pair<EvalTally, EvalTally> evaluate_full(int64_t epoch);
  std::pair<double, double> evaluate_epoch(int epoch);
  void note_best(double val, double test, int epoch);
  void final_full_test();
  std::string eval_summary() const;
  void size_cache(const PipelineOptions& popts);
  int read_ahead_batches();
  int auto_samplers(const PipelineStages& symmetric);
  void log_preaggregation() const;
  void account_gather();
  // --task link / --embedding-dim.
  int64_t embedding_dim() const;
  void make_embedding();
  void make_hetero_embedding(EmbeddingOptions eo);
  // --model rgcn|hsage: the schema's types and relations into tc_.model.
  void hetero_model_config();
  // The feature stores the loads gather through (one, one per featured node type, or none).
  std::vector<FeatureStore*> stores();
  // The stores' hit rate since the epoch began (its evaluation's gathers too), all stores summed.
  double cache_hit_rate();
  std::vector<float> typed_link_rows(int64_t epoch);
  void write_metrics(int epoch, double loss, double train_acc, bool evaluated);
  // checkpoint-<epoch + 1>.pt and its rotation, or `path` (best.pt).
  void checkpoint(int epoch, const std::string& path = "");

  JobConfig cfg_;
  nlohmann::json recorded_;
  RankRuntime rt_;
  std::unique_ptr<CollectiveSampler> sampler_, eval_sampler_;
  TrainConfig tc_;
  std::unique_ptr<Trainer> trainer_;
  std::unique_ptr<EpochScheduler> sched_;
  std::unique_ptr<LinkTask> link_;       // --task link
  std::unique_ptr<EmbeddingTable> emb_;  // learnable embeddings
  std::unique_ptr<CheckpointKeeper> keeper_;  // --checkpoint-dir, --resume
  RoleRank role_;                        // --roles
  int samplers_ = 0;                     // --roles, or what --roles auto chose
  std::unique_ptr<Pipeline> pipe_;
  int64_t steps_ = 0;
  int start_epoch_ = 0;
  std::vector<int64_t> valid_ids_, test_ids_;
  bool has_valid_ = true, has_test_ = true;  // any rank has such nodes (node tasks)
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> metrics_{nullptr, &std::fclose};
  // The epoch in progress.
  double loss_sum_ = 0;
  int64_t loss_count_ = 0;
  EvalCounts train_counts_;
  EpochMetrics em_;
  std::unique_ptr<ProgressBar> bar_;
  // Across epochs.
  JobResult res_;
  double epoch_time_sum_ = 0;
  RunRecord run_;  // the best validation so far and --patience's count
  // --metric as resolved (acc, f1 or rocauc): what run_ holds for node
  // classification; the last evaluation's every metric (valid, test).
  MetricKind metric_ = MetricKind::kAcc;
  EvalTally val_tally_, test_tally_;
  EvalChoice eval_;                 // --eval as resolved (eval_choice.hpp)
  std::vector<float> best_params_;  // sampled evaluation: the best model so far, when it fits
  LrSchedule lr_;                   // --lr-schedule
  double epoch_lr_ = 0;             // the rate the epoch in progress trains with
  int next_epoch_ = 0;              // after the last epoch reported
  double eval_s_ = 0;               // the last evaluation's wall time
};

TrainJob::TrainJob(const JobConfig& cfg, nlohmann::json recorded)
    : cfg_(cfg), recorded_(std::move(recorded)), rt_(cfg.rank_options()) {
  check_data();
  const SamplerOptions so = make_samplers();
  make_trainer();
  if (cfg_.link.link()) link_ = std::make_unique<LinkTask>(cfg_, rt_);
  valid_ids_ = rt_.local_ids(Split::kValid);
  test_ids_ = rt_.local_ids(Split::kTest);
  count_splits();
  PipelineStages stages = symmetric_stages();
  PipelineOptions popts = rt_.pipeline_options(cfg_.pipeline);
  samplers_ = cfg_.roles == JobConfig::kRolesAuto ? auto_samplers(stages) : cfg_.roles;
  EpochScheduler* sched = schedule(stages, so);
  // The cap on the scheduler the pipeline runs over: every epoch's step agreement applies it.
  sched->set_max_steps(cfg_.max_steps);
  CoordinatedCommunicator& main_ch = rt_.channel(WorkerKind::kMain);
  main_ch.set_step(-1, 1);
  steps_ = sched->agree_steps(main_ch);
  if (cfg_.eval_max_nodes > 0) subsample_eval_ids();  // main channel, step (-1, 4)
  choose_eval();                                      // main channel, steps (-1, 3) and (-1, 5)
  if (cfg_.sizes_device_cache(rt_.device().is_cuda())) {
    if (rt_.leader()) {
      DSP_INFO("train",
               "the feature cache holds every row the device memory left holds (a GPU "
               "rank's default; --cache-ratio chooses another share)");
    }
    size_cache(popts);
  } else if (cfg_.cache_auto) {
    size_cache(popts);
  }
  rt_.enable_fifo();  // after the sizing, which rebuilds the store (no-op without --fifo-rows)
  if (samplers_ == 0) popts.read_ahead = res_.read_ahead = read_ahead_batches();  // (-1, 7)
  pipe_ = std::make_unique<Pipeline>(rt_.coord(), *sched, stages, popts);
  if (rt_.leader()) log_start(*sched);
  if (rt_.leader()) warn_few_steps(*sched);
  {  // the partition's --feature-dtype and its error, reported beside the accuracy
    const PartitionMeta& pm = rt_.part().meta;
    res_.feature_dtype = pm.feature_dim > 0 ? dtype_name(pm.feature_dtype) : "";
    res_.feature_max_abs_error = pm.feature_conversion.max_abs_error;
    res_.feature_rel_rms_error = pm.feature_conversion.rel_rms_error;
    if (rt_.leader() && pm.feature_conversion.converted) {
      DSP_INFO("train", "{}", describe_feature_storage(pm));
    }
  }
  keeper_->note_interrupt(start_epoch_);
  if (rt_.leader() && !cfg_.metrics_file.empty()) {
    // A resumed run continues the file after its checkpoint's epochs (truncate_metrics).
    if (keeper_->resumed()) truncate_metrics(cfg_.metrics_file, start_epoch_);
    metrics_.reset(std::fopen(cfg_.metrics_file.c_str(), keeper_->resumed() ? "a" : "w"));
    DSP_CHECK_T(IoError, metrics_ != nullptr, "{}: cannot open for writing", cfg_.metrics_file);
  }
}

void TrainJob::check_data() const {
  const PartitionData& part = rt_.part();
  const PartitionMeta& meta = part.meta;
  const ModelKind model = cfg_.train.model.model;
  DSP_CHECK_ARG(!meta.hetero || ModelConfig::is_hetero_model(model),
                "--model {} on the heterogeneous graph {}: train rgcn or hsage on it", model,
                cfg_.rank.path);
  DSP_CHECK_ARG(meta.hetero || !ModelConfig::is_hetero_model(model),
                "--model {} needs a heterogeneous graph (dsp generate hetero, dsp convert --from "
                "ogb-hetero); {} is homogeneous: train sage, gcn or gat on it",
                model, cfg_.rank.path);
  DSP_CHECK_FORMAT(meta.hetero || meta.feature_dim > 0 || embedding_dim() > 0,
                   "{}: the dataset has no features to train on (--embedding-dim D learns D "
                   "columns per node)",
                   cfg_.rank.path);
  if (cfg_.link.link()) {
    int64_t edges = 0;
    for (const PartStats& ps : meta.part) edges += ps.link_train;
    DSP_CHECK_FORMAT(edges > 0,
                     "{}: the dataset has no training edges (link_train.npy missing or empty): "
                     "link prediction needs them (dsp convert --link-split, dsp generate "
                     "--link-split)",
                     cfg_.rank.path);
    // Both held-out splits: the best epoch is chosen on validation, reported on test.
    for (const auto& [held, file] : {std::make_pair(&part.link_valid, "link_valid.npy"),
                                     std::make_pair(&part.link_test, "link_test.npy")}) {
      DSP_CHECK_FORMAT(held->defined(),
                       "{}: the dataset has no {} (held-out pairs and their negatives): link "
                       "prediction chooses its best epoch on validation pairs and reports test "
                       "pairs; add both (dsp.save_dataset(link_valid=..., link_test=..., "
                       "link_valid_neg=..., link_test_neg=...), dsp convert --link-split)",
                       cfg_.rank.path, file);
    }
    const int64_t per = meta.link_negatives_per_positive;
    const int64_t negatives =
        per > 0 ? per : std::min(part.link_valid_neg.dim(0), part.link_test_neg.dim(0));
    for (int k : cfg_.link.hits_k) {
      DSP_CHECK_ARG(k <= negatives,
                    "--hits-k {} is larger than the {} negative edges {}of {}'s held-out splits: "
                    "Hits@K ranks a positive among them",
                    k, negatives, per > 0 ? "of each positive " : "", cfg_.rank.path);
    }
    DSP_CHECK_ARG(cfg_.link.recall_k.empty() || meta.hetero,
                  "--recall-k needs a typed graph's link relation (each source's held-out "
                  "destinations ranked among the destination type's nodes); {} is homogeneous",
                  cfg_.rank.path);
    return;
  }
  DSP_CHECK_FORMAT(part.labels.defined() && meta.num_classes > 1,
                   "{}: the dataset has no labels (or a single class)", cfg_.rank.path);
  int64_t train_seeds = 0;
  for (const PartStats& ps : meta.part) train_seeds += ps.seeds;
  DSP_CHECK_FORMAT(train_seeds > 0,
                   "{}: the dataset has no training ids (train_idx.npy missing or empty): there is "
                   "nothing to train on",
                   cfg_.rank.path);
}

// The training and evaluation samplers; returns the training sampler's options.
SamplerOptions TrainJob::make_samplers() {
  SamplerOptions so = cfg_.sampler;
  so.seed = cfg_.seed;
  check_node_times(so, rt_.part(), cfg_.rank.path, "training and evaluation seed");
  // The trainer runs on the rank's device, where a device sampler backend builds the blocks: their
  // edge arrays stay there (Block::on_device; the CPU backend ignores this).
  so.blocks_on_device = !rt_.hetero();     // sample_hetero builds its blocks on the host
  so.ids_on_device = so.blocks_on_device;  // the loader gathers the input ids where they are
  // Fanouts run from the seeds out: with PP the last one (the input layer's) is not sampled.
  if (cfg_.preaggregate) so.fanouts.pop_back();
  // On self-reliant (pagraph) parts training samples without communication; evaluation (any
  // valid/test node) still samples collectively. A link batch's endpoints are any node's.
  if (cfg_.link.link()) so.require_owned_seeds = false;
  sampler_ = rt_.make_sampler(so, /*self_reliant=*/!cfg_.link.link());
  SamplerOptions eo = so;
  if (!cfg_.eval_fanouts.empty()) {  // empty: the per-relation fanouts of training (run_training)
    eo.fanouts = cfg_.eval_fanouts;
    eo.relation_fanouts.clear();  // --eval-fanouts: every relation takes each layer's count
  }
  if (cfg_.preaggregate) eo.fanouts.pop_back();
  if (cfg_.link.link() && rt_.hetero()) {  // typed link outputs: every neighbour, every relation
    eo.fanouts.assign(so.fanouts.size(), kAllNeighbours);
    eo.relation_fanouts.clear();
  }
  eo.seed = cfg_.seed ^ 0x6576616cULL;  // "eval": evaluation draws independent of training's
  eval_sampler_ = rt_.make_sampler(eo);
  return so;
}

int64_t TrainJob::embedding_dim() const {
  if (cfg_.embedding.dim >= 0) return cfg_.embedding.dim;
  if (rt_.hetero()) {  // the types without features enter with hidden-wide learnable rows
    const std::vector<Array>& f = rt_.part().type_features;
    const bool featureless =
        std::any_of(f.begin(), f.end(), [](const Array& a) { return !a.defined(); });
    return featureless ? cfg_.train.model.hidden : 0;
  }
  return rt_.part().meta.feature_dim > 0 ? 0 : cfg_.train.model.hidden;
}

// The rank's rows of the learnable embeddings (make_trainer checked their memory first).
void TrainJob::make_embedding() {
  EmbeddingOptions eo = cfg_.embedding;
  eo.dim = embedding_dim();
  eo.seed = cfg_.seed;
  if (rt_.hetero()) return make_hetero_embedding(eo);
  const PartitionMeta& meta = rt_.part().meta;
  const int64_t b = meta.offsets[rt_.rank()], e = meta.offsets[rt_.rank() + 1];
  const Array new2old = load_new2old(rt_.partition_dir(), meta.num_nodes);
  emb_ = std::make_unique<EmbeddingTable>(rt_.channel(WorkerKind::kTrainer), meta.offsets,
                                          new2old.data<int64_t>() + b, eo, rt_.embedding_storage());
  trainer_->attach_embedding(emb_.get());
  if (rt_.leader()) {
    DSP_INFO("train",
             "learnable embeddings: {} columns per node ({} for this rank's {} rows, "
             "in {} memory), sparse {} at lr {}",
             eo.dim, format_bytes(EmbeddingTable::bytes(e - b, eo.dim, eo.optimizer)), e - b,
             emb_->memory() == MemorySpace::kDevice ? "device" : "host", eo.optimizer, eo.lr);
  }
}

// The rows of the featureless types' nodes only (FeaturelessRows), each initialised from its
// dataset (union) id, so a node's row does not depend on the partition or the rank count.
void TrainJob::make_hetero_embedding(EmbeddingOptions eo) {
  const HeteroLayout& h = *rt_.part().meta.hetero;
  emb_ = attach_typed_rows(rt_, *trainer_, tc_.model.type_dims, eo);
  const int T = h.num_types();
  if (rt_.leader()) {
    std::vector<std::string> names;
    for (int t = 0; t < T; ++t) {
      if (tc_.model.type_dims[t] == 0) names.push_back(h.schema.node_types[t].name);
    }
    DSP_INFO("train",
             "learnable rows for the node types without features ({}): {} columns, {} rows in "
             "all ({} on this rank, in {} memory), sparse {} at lr {}",
             fmt::join(names, ", "), eo.dim, emb_->num_nodes(), emb_->end() - emb_->begin(),
             emb_->memory() == MemorySpace::kDevice ? "device" : "host", eo.optimizer, eo.lr);
  }
}

void TrainJob::hetero_model_config() {
  const PartitionData& part = rt_.part();
  const HeteroSchema& schema = part.meta.hetero->schema;
  ModelConfig& m = tc_.model;
  m.in_dim = 0;
  m.type_dims.clear();
  for (int t = 0; t < schema.num_types(); ++t) {
    m.type_dims.push_back(part.type_features[t].defined() ? part.type_features[t].dim(1) : 0);
  }
  m.relation_src.clear();
  m.relation_dst.clear();
  for (const RelationInfo& r : schema.relations) {
    m.relation_src.push_back(r.src_type);
    m.relation_dst.push_back(r.dst_type);
  }
}

std::vector<FeatureStore*> TrainJob::stores() {
  if (rt_.hetero()) {
    std::vector<FeatureStore*> out;
    for (FeatureStore* s : rt_.type_stores()) {
      if (s) out.push_back(s);
    }
    return out;
  }
  if (rt_.has_features()) return {&rt_.store()};
  return {};
}

double TrainJob::cache_hit_rate() {
  int64_t hot = 0, total = 0;
  for (FeatureStore* st : stores()) {
    const GatherStats& g = st->stats();
    const int64_t h = g.rows_remote_hot + g.rows_local_hot + g.rows_fifo + g.rows_fifo_shared;
    hot += h;
    total += h + g.rows_cold;
  }
  return total ? static_cast<double>(hot) / total : 0.0;
}

void TrainJob::make_trainer() {
  const PartitionMeta& meta = rt_.part().meta;
  tc_ = cfg_.train;
  tc_.model.embedding_dim = embedding_dim();
  tc_.model.in_dim = meta.feature_dim + tc_.model.embedding_dim;
  if (rt_.hetero()) hetero_model_config();
  if (cfg_.link.link()) {
    tc_.model.out_dim = tc_.model.hidden;
    tc_.model.loss = LossKind::kBce;  // of the pairs' logits
  } else {
    tc_.model.loss = resolve_loss(tc_.model.loss, meta.multilabel, meta.num_classes, rt_.hetero());
    metric_ = resolve_metric(cfg_.metric, tc_.model.loss, meta.num_classes);
    // A binary bce model outputs one logit; a multi-label one, one per label column.
    tc_.model.out_dim = tc_.model.bce() && !meta.multilabel ? 1 : meta.num_classes;
  }
  if (cfg_.link.link() && tc_.model.predictor == PredictorKind::kNone) {
    tc_.model.predictor = PredictorKind::kDot;
  }
  tc_.model.layers = static_cast<int>(cfg_.sampler.fanouts.size());
  tc_.model.preaggregated = cfg_.preaggregate;
  tc_.seed = cfg_.seed;
  tc_.num_threads = rt_.cores().threads;
  tc_.device = rt_.device();
  if (tc_.normalize_features == FeatureNorm::kStandard) {
    column_statistics(rt_.part().features, &tc_.feature_mean, &tc_.feature_inv_std,
                      rt_.part().feature_scale);
  }
  if (tc_.model.embedding_dim > 0) {  // refused before the model (its input layer) or the table
    int64_t rows = meta.offsets[rt_.rank() + 1] - meta.offsets[rt_.rank()];
    if (rt_.hetero()) {
      const FeaturelessRows f(*meta.hetero, tc_.model.type_dims);
      rows = f.offsets[rt_.rank() + 1] - f.offsets[rt_.rank()];
    }
    rt_.check_embedding_fits(
        rows, tc_.model.embedding_dim, cfg_.embedding.optimizer,
        cfg_.rank.budget_or(available_memory() / static_cast<uint64_t>(rt_.cores().node_size)));
  }
  trainer_ = std::make_unique<Trainer>(tc_, rt_.channel(WorkerKind::kTrainer));
  if (tc_.model.embedding_dim > 0) make_embedding();
  lr_ = LrSchedule(tc_, cfg_.epochs);
  keeper_ =
      std::make_unique<CheckpointKeeper>(cfg_, std::move(recorded_), rt_, *trainer_, emb_.get());
  if (cfg_.resume) {
    if (const auto r = keeper_->resume()) {
      start_epoch_ = r->epochs;
      run_ = r->run;
      if (!r->lr_schedule.is_null()) lr_.restore(r->lr_schedule);
    }
  }
  if (!cfg_.init_from.empty()) {
    trainer_->init_parameters(cfg_.init_from);
    if (rt_.leader()) DSP_INFO("train", "parameters from {}", cfg_.init_from);
  }
  if (rt_.leader() && !cfg_.checkpoint_dir.empty()) fs::create_directories(cfg_.checkpoint_dir);
}

// Node tasks: whether any rank has validation and test nodes (main channel), said once when not.
// Without validation the best model is the last evaluated one, and --patience and the plateau
// schedule, which act on validation, are refused.
void TrainJob::count_splits() {
  if (link_) return;
  int64_t n[2] = {static_cast<int64_t>(valid_ids_.size()), static_cast<int64_t>(test_ids_.size())};
  CoordinatedCommunicator& main_ch = rt_.channel(WorkerKind::kMain);
  main_ch.set_step(-1, 8);
  main_ch.all_reduce(n, 2, DType::kInt64, ReduceOp::kSum);
  res_.has_valid = has_valid_ = n[0] > 0;
  res_.has_test = has_test_ = n[1] > 0;
  DSP_CHECK_ARG(
      has_valid_ || (cfg_.patience == 0 && cfg_.train.lr_schedule != LrScheduleKind::kPlateau),
      "{} acts on validation, but {} has no validation nodes",
      cfg_.patience > 0 ? "--patience" : "--lr-schedule plateau", cfg_.rank.path);
  if (!rt_.leader() || (has_valid_ && has_test_)) return;
  DSP_INFO("train", "{}: {}", cfg_.rank.path,
           !has_valid_ && !has_test_ ? "no validation or test nodes: nothing is evaluated, and "
                                       "best.pt is the last epoch's model"
           : !has_valid_ ? "no validation nodes: best.pt is the last evaluated epoch's model, "
                           "and its test figure is reported"
                         : "no test nodes: validation only, no test figure");
}

// A batch size that leaves a graph a handful of steps an epoch (1024 seeds a rank against
// Cora's 140 training nodes: one update an epoch), said with a size that gives about
// kWantedSteps (the power of two at or above the seeds over kWantedSteps). The size stays the
// user's: DGL and PyG train with the batch size given.
void TrainJob::warn_few_steps(const EpochScheduler& sched) const {
  constexpr int64_t kFewSteps = 4, kWantedSteps = 10;
  const int64_t full = sched.full_steps();
  if (full >= kFewSteps || cfg_.max_steps > 0) return;
  const int64_t seeds = sched.num_local_seeds();  // rank 0's (shares are alike)
  int64_t suggest = 1;
  while (suggest < seeds / kWantedSteps) suggest *= 2;
  DSP_WARN("train",
           "--batch-size {} leaves {} step(s) an epoch ({} {} on rank 0): the model is updated "
           "{} time(s) an epoch; --batch-size {} gives {}",
           cfg_.batch_size, full, seeds, link_ ? "training edges" : "training nodes", full, suggest,
           (seeds + suggest - 1) / suggest);
}

// The epoch's record in the result's history (JobResult::history).
void TrainJob::note_history(int epoch, double loss, double train_acc, bool evaluated, double val,
                            double test) {
  nlohmann::json rec = {{"epoch", epoch + 1},
                        {"loss", loss},
                        {"train_acc", train_acc},
                        {"lr", epoch_lr_},
                        {"epoch_s", em_.wall_s}};
  if (evaluated) {
    const nlohmann::json none;
    rec["val"] = has_valid_ ? nlohmann::json(val) : none;
    rec["test"] = has_test_ ? nlohmann::json(test) : none;
  }
  res_.history.push_back(std::move(rec));
}

// The epoch line's evaluation: the splits the data has, in the task's metric.
std::string TrainJob::eval_text(double val, double test) const {
  if (link_) {
    return fmt::format(" | val {} | test {}", LinkTask::line(link_->valid()),
                       LinkTask::line(link_->test()));
  }
  const std::string m = metric_ == MetricKind::kAcc ? "" : fmt::format("{} ", metric_);
  std::string out;
  if (has_valid_) out += fmt::format(" | val {}{:.4f}", m, val);
  if (has_test_) out += fmt::format(" | test {}{:.4f}", m, test);
  return out;
}

// A step taken: the progress line reads the running loss only when it redraws.
void TrainJob::account() {
  ++loss_count_;
  if (bar_) bar_->update(loss_count_, [this] { return trainer_->running_loss(); });
}

// Every rank samples, loads and trains.
PipelineStages TrainJob::symmetric_stages() {
  PipelineStages stages;
  stages.sample = [this](int64_t epoch, int64_t batch, const std::vector<int64_t>& seeds) {
    if (link_) return link_->sample(*sampler_, epoch, batch, seeds);
    return sampler_->sample_nodes(seeds, epoch, batch);
  };
  stages.load = [this](SampledBatch&& sb) { return rt_.load(std::move(sb)); };
  stages.read_ahead = [this](const std::vector<const SampledBatch*>& b) { rt_.read_ahead(b); };
  stages.train = [this](LoadedBatch&& lb) {
    trainer_->gather_embedding(lb);  // collective; nothing without embeddings
    trainer_->step(lb, /*tally_correct=*/true);
    account();
  };
  stages.set_threads = [this](WorkerKind k, int n) {
    if (k == WorkerKind::kTrainer) trainer_->set_threads(n);
  };
  return stages;
}

// --read-ahead: the group size, the same on every rank (a rank whose loader waits for a group
// while a peer's does not would hold back that peer's sampler ops: pipeline.cpp). auto: groups of
// kAutoReadAhead when any rank's store reads its rows from disk. Said once, with what it reads.
int TrainJob::read_ahead_batches() {
  int64_t any = rt_.reads_ahead() ? 1 : 0;
  CoordinatedCommunicator& main_ch = rt_.channel(WorkerKind::kMain);
  main_ch.set_step(-1, 7);
  main_ch.all_reduce(&any, 1, DType::kInt64, ReduceOp::kMax);
  const int k = cfg_.read_ahead == JobConfig::kReadAheadAuto ? (any ? JobConfig::kAutoReadAhead : 0)
                                                             : cfg_.read_ahead;
  if (rt_.leader() && k > 1) {
    DSP_INFO("train", "--read-ahead {}: batches loaded {} at a time, {}",
             cfg_.read_ahead == JobConfig::kReadAheadAuto ? "auto" : std::to_string(k), k,
             any ? "the cold feature rows of each group read from disk in one sweep in file order"
                 : "though every rank's feature rows are in memory (nothing is read ahead)");
  }
  return k;
}

// The scheduler the pipeline runs over: GNNLab's factored layout's (its stages replace
// `stages`) with sampler-only ranks, else this rank's training seeds in the job's order.
EpochScheduler* TrainJob::schedule(PipelineStages& stages, const SamplerOptions& so) {
  if (samplers_ == 0 && link_) {
    sched_ = std::make_unique<EpochScheduler>(link_->batcher().edge_indices(), cfg_.batch_size,
                                              cfg_.seed);
    return sched_.get();
  }
  if (samplers_ == 0) {
    const PartitionData& part = rt_.part();
    sched_ =
        std::make_unique<EpochScheduler>(rt_.local_ids(Split::kTrain), cfg_.batch_size, cfg_.seed);
    cfg_.seed_order.apply(*sched_, part.patch, part.meta.offsets[rt_.rank()]);
    return sched_.get();
  }
  // GNNLab's factored layout: evaluation stays symmetric (every rank holds its part).
  RoleLayout layout{rt_.size(), samplers_};
  layout.switching = cfg_.roles_switch;
  SlotTrain train_slots = [this](SlotBatches&& mine, int slots) {
    std::vector<Trainer::SlotBatch> sb;
    for (const auto& [slot, lb] : mine) sb.push_back({slot, &lb});
    trainer_->step_slots(sb, slots, /*tally_correct=*/true);
    account();
  };
  role_ = make_role_rank(rt_.coord(), rt_.partition_dir(), layout, cfg_.batch_size, cfg_.seed, so,
                         stages.train, {}, train_slots);
  PipelineStages rs = role_.roles->stages();
  rs.set_threads = stages.set_threads;
  stages = std::move(rs);
  return &role_.roles->scheduler();
}

// "1433 features", or a typed graph's per type: "features paper 128, author learnt 64".
std::string features_text(const PartitionMeta& meta, int64_t embedding_dim) {
  if (!meta.hetero) return fmt::format("{} features", meta.feature_dim);
  std::vector<std::string> per;
  for (const NodeTypeInfo& t : meta.hetero->schema.node_types) {
    per.push_back(t.feature_dim > 0   ? fmt::format("{} {}", t.name, t.feature_dim)
                  : embedding_dim > 0 ? fmt::format("{} learnt {}", t.name, embedding_dim)
                                      : fmt::format("{} none", t.name));
  }
  return fmt::format("features {}", fmt::join(per, ", "));
}

void TrainJob::log_start(const EpochScheduler& sched) const {
  const PartitionMeta& meta = rt_.part().meta;
  DSP_INFO(
      "train",
      "{} on {} ({} nodes, {}, {} classes): {} rank(s) x {} thread(s) on {}, {} "
      "steps{} of {} {} per rank per epoch, fanouts {}, {} lr {} weight decay {}, pipeline "
      "{}{}",
      tc_.model.model, meta.dataset_name, meta.num_nodes,
      features_text(meta, tc_.model.embedding_dim), meta.num_classes, rt_.size(),
      rt_.cores().threads, rt_.device().str(), steps_,
      cfg_.max_steps > 0 ? fmt::format(" (--max-steps {}; a whole epoch is {})", cfg_.max_steps,
                                       sched.full_steps())
                         : "",
      cfg_.batch_size, link_ ? "training edges" : "seeds", fmt::join(cfg_.sampler.fanouts, ","),
      tc_.optimizer, tc_.lr, tc_.weight_decay, cfg_.pipeline,
      samplers_ > 0 ? fmt::format(", roles: {} sampler-only rank(s), {} trainer(s), switching {}",
                                  samplers_, rt_.size() - samplers_, cfg_.roles_switch)
                    : "");
  log_preaggregation();
}

// `--roles auto`: GNNLab's rule over a few batches of the symmetric stages (profile_roles), timed
// without training them, so the job then trains exactly what `--roles N` with the chosen N does.
int TrainJob::auto_samplers(const PipelineStages& symmetric) {
  EpochScheduler sym(rt_.local_ids(Split::kTrain), cfg_.batch_size, cfg_.seed);
  const RoleAllocation a = profile_roles(
      rt_.coord(), sym, symmetric,
      [this](const LoadedBatch& lb) { return trainer_->time_backward(lb); }, start_epoch_);
  if (rt_.leader()) DSP_INFO("train", "--roles auto: {}", a.why);
  return a.samplers;
}

// PaGraph's sizing: the first batch of the first epoch is sampled once more here (its draws are a
// pure function of (seed, epoch, batch), so training samples the same blocks) to learn the feature
// bytes a batch loads; the memory left then sets the cache, reserving the batches in flight.
void TrainJob::size_cache(const PipelineOptions& popts) {
  const std::vector<int64_t> seeds = sched_->batch_seeds(sched_->epoch_order(start_epoch_), 0);
  rt_.channel(WorkerKind::kSampler).set_step(-1, 2);
  const SampledBatch sb = sampler_->sample_nodes(seeds, start_epoch_, 0);
  const PartitionData& part = rt_.part();
  const int64_t bytes = sb.blocks.front().num_src * part.features.dim(1) *
                        static_cast<int64_t>(dtype_size(part.features.dtype()));
  // Pipelined: the loaded queue and the batch being loaded hold features besides the trained one.
  const int64_t in_flight =
      popts.mode == PipelineMode::kSequential ? 0 : static_cast<int64_t>(popts.queue_capacity) + 1;
  rt_.size_cache_for_batch(bytes, in_flight);
}

// What the first layer reads, said once: a pre-aggregated partition must not change what a job
// computes unless asked (--preaggregate).
void TrainJob::log_preaggregation() const {
  const PartitionMeta& meta = rt_.part().meta;
  const std::string kind = tc_.model.preaggregate_kind();
  if (cfg_.preaggregate) {
    DSP_INFO("train",
             "first layer pre-aggregated (PaGraph): {} over every in-neighbour, read from "
             "preaggregated_{}.npy as [x | a] rows; sampling fanouts {} (the input layer's {} is "
             "not sampled)",
             kind == "mean" ? "the mean" : "the GCN-normalised sum", kind,
             fmt::join(cfg_.sampler.fanouts.begin(), cfg_.sampler.fanouts.end() - 1, ","),
             cfg_.sampler.fanouts.back());
  } else if (!meta.preaggregated.empty()) {
    DSP_INFO("train",
             "the partition holds pre-aggregated rows ({}); the first layer samples its "
             "neighbours as usual{}",
             fmt::join(meta.preaggregated, ", "),
             std::find(meta.preaggregated.begin(), meta.preaggregated.end(), kind) !=
                     meta.preaggregated.end()
                 ? " (dsp train --preaggregate would use them)"
                 : "");
  }
}

// What the training loads of the epoch just run gathered (this rank): bytes of input rows per
// batch, wherever they came from (the FIFO levels' rows too, so the figure does not depend on
// them), the bytes other ranks sent, and the FIFO levels' hits.
void TrainJob::account_gather() {
  GatherStats g;
  int64_t fifo_bytes = 0;
  for (FeatureStore* st : stores()) {  // a heterogeneous graph's stores summed
    const GatherStats& s = st->stats();
    g.rows_remote_hot += s.rows_remote_hot;
    g.rows_local_hot += s.rows_local_hot;
    g.rows_cold += s.rows_cold;
    g.rows_cold_ahead += s.rows_cold_ahead;
    g.rows_fifo += s.rows_fifo;
    g.rows_fifo_shared += s.rows_fifo_shared;
    g.bytes_cold += s.bytes_cold;
    g.bytes_local_hot += s.bytes_local_hot;
    g.bytes_remote_hot += s.bytes_remote_hot;
    fifo_bytes += (s.rows_fifo + s.rows_fifo_shared) * static_cast<int64_t>(st->row_bytes());
  }
  const int64_t fifo_rows = g.rows_fifo + g.rows_fifo_shared;
  const double steps = steps_ > 0 ? static_cast<double>(steps_) : 1.0;
  const double bytes =
      static_cast<double>(g.bytes_cold + g.bytes_local_hot + g.bytes_remote_hot + fifo_bytes);
  res_.feature_bytes_per_batch = bytes / steps;
  res_.peer_bytes_per_batch = static_cast<double>(g.bytes_remote_hot) / steps;
  res_.fifo_hits = g.rows_fifo;
  res_.fifo_shared_hits = g.rows_fifo_shared;
  const int64_t peer_rows = fifo_rows + g.rows_remote_hot;
  res_.fifo_hit_rate = peer_rows > 0 ? static_cast<double>(fifo_rows) / peer_rows : 0.0;
  res_.cold_rows_read_ahead =
      g.rows_cold > 0 ? static_cast<double>(g.rows_cold_ahead) / g.rows_cold : 0.0;
}

// --eval (eval_choice.hpp); link prediction ranks held-out edges from every node's output, so
// it evaluates with full neighbourhoods (a typed graph: every neighbour sampled).
void TrainJob::choose_eval() {
  if (!link_) {
    std::vector<int64_t> widths;
    for (int l = 0; l < tc_.model.layers; ++l) widths.push_back(trainer_->layer_width(l));
    const int64_t nodes = static_cast<int64_t>(valid_ids_.size() + test_ids_.size());
    eval_ = dsp::choose_eval(cfg_, rt_, tc_.model, widths, nodes);
    res_.eval = name_of(eval_.mode);
    return;
  }
  eval_.full = eval_.fits = true;
  eval_.mode = EvalMode::kFull;
  res_.eval = name_of(eval_.mode);
  if (!rt_.leader()) return;
  const PartitionData& part = rt_.part();
  const int64_t per = part.meta.link_negatives_per_positive;
  DSP_INFO("train",
           "evaluation: full neighbourhoods, {}; Hits@{}, MRR and AUC of {} validation and {} "
           "test edges against {}; {} picks the best epoch",
           rt_.hetero() ? "every neighbour of every relation sampled" : "layer by layer",
           fmt::join(cfg_.link.hits_k, ","), part.link_valid.dim(0), part.link_test.dim(0),
           per > 0 ? fmt::format("{} negatives each", per)
                   : fmt::format("{} and {} negatives", part.link_valid_neg.dim(0),
                                 part.link_test_neg.dim(0)),
           link_->metric());
}

// --eval-max-nodes: each split's node kept with probability max / (the split's size), by a hash
// of (seed, its dataset id), so every rank count keeps the same nodes; the counts are logged.
void TrainJob::subsample_eval_ids() {
  const Array new2old = load_new2old(rt_.partition_dir(), rt_.part().meta.num_nodes);
  const int64_t* orig = new2old.data<int64_t>();
  CoordinatedCommunicator& main_ch = rt_.channel(WorkerKind::kMain);
  main_ch.set_step(-1, 4);
  int64_t sizes[4] = {static_cast<int64_t>(valid_ids_.size()),
                      static_cast<int64_t>(test_ids_.size()), 0, 0};
  main_ch.all_reduce(sizes, 2, DType::kInt64, ReduceOp::kSum);
  const uint64_t key = rng_key(cfg_.seed, 0, 0, kEvalSubsampleLayer);
  std::vector<int64_t>* splits[2] = {&valid_ids_, &test_ids_};
  for (int k = 0; k < 2; ++k) {
    const double keep = static_cast<double>(cfg_.eval_max_nodes) / std::max<int64_t>(sizes[k], 1);
    std::vector<int64_t>& ids = *splits[k];
    ids.erase(std::remove_if(ids.begin(), ids.end(),
                             [&](int64_t v) {
                               return RngStream(key, static_cast<uint64_t>(orig[v])).uniform01() >=
                                      keep;
                             }),
              ids.end());
    sizes[2 + k] = static_cast<int64_t>(ids.size());
  }
  main_ch.all_reduce(sizes + 2, 2, DType::kInt64, ReduceOp::kSum);
  if (rt_.leader()) {
    DSP_INFO("train",
             "evaluation on {} of the {} validation and {} of the {} test nodes "
             "(--eval-max-nodes {}, the same nodes at any rank count)",
             sizes[2], sizes[0], sizes[3], sizes[1], cfg_.eval_max_nodes);
  }
}

// This rank's rows of the model's output on the whole graph (full-neighbour layer-wise
// inference), with the evaluation's progress and steps.
std::vector<float> TrainJob::infer_all(int64_t epoch) {
  InferenceOptions io;
  io.batch_size = cfg_.eval_batch_size;
  io.epoch = epoch;
  io.first_step = eval_batch_id(2, 0);
  EvalProgress progress(rt_.leader() && cfg_.progress, rt_.leader(), "full neighbourhoods");
  io.progress = [&progress](int64_t done, int64_t total) { progress.update(done, total); };
  return layerwise_inference(rt_, *trainer_, io);
}

std::pair<EvalTally, EvalTally> TrainJob::evaluate_full(int64_t epoch) {
  const std::vector<float> logits = infer_all(epoch);
  const int64_t width = trainer_->layer_width(tc_.model.layers - 1);
  const int64_t first = rt_.part().meta.offsets[rt_.rank()];
  const Array& labels = rt_.part().labels;
  CoordinatedCommunicator& tc = rt_.channel(WorkerKind::kTrainer);
  EvalTally val = trainer_->new_tally(), test = trainer_->new_tally();
  tc.set_step(epoch, eval_control_id(0, 1));
  tally_rows(logits, width, first, valid_ids_, labels, &val);
  val.combine(tc, "train:eval_valid");
  tc.set_step(epoch, eval_control_id(1, 1));
  tally_rows(logits, width, first, test_ids_, labels, &test);
  test.combine(tc, "train:eval_test");
  return {val, test};
}

// A typed link job's output rows at their part rows: every node of the link relation's two types
// that this rank owns, by sampling every neighbour of every relation (eval_sampler_); the rows
// of other types stay zero (no pair reads them).
std::vector<float> TrainJob::typed_link_rows(int64_t epoch) {
  const PartitionMeta& meta = rt_.part().meta;
  const HeteroLayout& h = *meta.hetero;
  const RelationInfo& r = h.schema.relations[h.schema.link];
  const int64_t b = meta.offsets[rt_.rank()], e = meta.offsets[rt_.rank() + 1];
  std::vector<int64_t> seeds;
  for (int64_t v = b; v < e; ++v) {
    const int t = h.type_of(v);
    if (t == r.src_type || t == r.dst_type) seeds.push_back(v);
  }
  EvalProgress progress(rt_.leader() && cfg_.progress, rt_.leader(), "full neighbourhoods");
  rt_.channel(WorkerKind::kMain).set_step(epoch, eval_control_id(2, 0));
  const int layers = tc_.model.layers;
  const std::vector<float> rows =
      typed_outputs_of(rt_, *trainer_, *eval_sampler_, seeds, layers, cfg_.eval_batch_size, epoch,
                       eval_batch_id(2, 0),
                       [&progress](int64_t done, int64_t total) { progress.update(done, total); });
  const int64_t width = trainer_->layer_width(layers - 1);
  std::vector<float> out(static_cast<size_t>((e - b) * width), 0.0f);
  for (size_t i = 0; i < seeds.size(); ++i) {
    std::copy(rows.begin() + static_cast<int64_t>(i) * width,
              rows.begin() + static_cast<int64_t>(i + 1) * width,
              out.begin() + (seeds[i] - b) * width);
  }
  return out;
}

void TrainJob::note_best(double val, double test, int epoch) {
  ++run_.evals_since_best;
  // A NaN (ROC-AUC of a one-class split) is no improvement; without validation the latest model
  // is the best one.
  if (has_valid_ && !(val > run_.best_val)) return;
  run_.best_val = val;
  run_.test_at_best = test;
  if (link_) {
    res_.best_val_mrr = link_->valid().mrr;
    res_.test_mrr_at_best = link_->test().mrr;
  }
  run_.best_epoch = epoch;
  run_.evals_since_best = 0;
  if (eval_.final_full) best_params_ = trainer_->flat_parameters();
  if (keeper_->on()) checkpoint(epoch, cfg_.checkpoint_dir + "/best.pt");
}

// Sampled evaluation: the best model's test accuracy with full neighbourhoods, when it fits, costs
// at most kFinalFullFactor sampled evaluations (eval_choice.cpp) and the best model is at hand
// (not when it predates a resume).
void TrainJob::final_full_test() {
  if (eval_.full ||
      cfg_.eval == EvalMode::kFull) {  // (a typed graph's by sampling every neighbour)
    res_.test_acc_full = run_.best_epoch >= 0 ? run_.test_at_best : -1;
    return;
  }
  if (best_params_.empty()) return;
  const std::vector<float> last = trainer_->flat_parameters();
  trainer_->set_flat_parameters(best_params_);
  res_.test_acc_full = evaluate_full(cfg_.epochs + 1).second.metric(metric_);
  trainer_->set_flat_parameters(last);
}

std::string TrainJob::eval_summary() const {
  if (eval_.full || cfg_.eval == EvalMode::kFull) return "full neighbourhoods";
  const std::string sampled = fmt::format("sampled, fanouts {}", eval_fanouts_text(cfg_));
  if (res_.test_acc_full < 0) return sampled;
  return fmt::format("{}; with full neighbourhoods {:.4f}", sampled, res_.test_acc_full);
}

// Evaluation over this rank's share of `ids` (global, owned), the same steps on every rank.
EvalTally TrainJob::evaluate(int split, const std::vector<int64_t>& ids, int64_t epoch) {
  const int64_t bs = cfg_.eval_batch_size;
  int64_t steps = (static_cast<int64_t>(ids.size()) + bs - 1) / bs;
  CoordinatedCommunicator& main_ch = rt_.channel(WorkerKind::kMain);
  main_ch.set_step(epoch, eval_control_id(split, 0));
  main_ch.all_reduce(&steps, 1, DType::kInt64, ReduceOp::kMax);
  EvalTally tally = trainer_->new_tally();
  EvalProgress progress(rt_.leader() && cfg_.progress, rt_.leader(), split == 0 ? "valid" : "test");
  // Training's read-ahead groups (--read-ahead): a group's batches are sampled, their cold rows
  // read in one sweep, then each is loaded and evaluated.
  const int64_t k = std::max(1, pipe_->options().read_ahead);
  for (int64_t g = 0; g < steps; g += k) {
    std::vector<SampledBatch> group;
    for (int64_t s = g; s < std::min(steps, g + k); ++s) {
      const int64_t b = std::min<int64_t>(ids.size(), s * bs);
      const int64_t e = std::min<int64_t>(ids.size(), b + bs);
      const std::vector<int64_t> seeds(ids.begin() + b, ids.begin() + e);
      rt_.channel(WorkerKind::kSampler).set_step(epoch, eval_batch_id(split, s));
      group.push_back(eval_sampler_->sample_nodes(seeds, epoch, eval_batch_id(split, s)));
    }
    if (k > 1) rt_.read_ahead(batch_pointers(group));
    for (int64_t s = g; s < g + static_cast<int64_t>(group.size()); ++s) {
      rt_.channel(WorkerKind::kLoader).set_step(epoch, eval_batch_id(split, s));
      LoadedBatch lb = rt_.load(std::move(group[static_cast<size_t>(s - g)]));
      rt_.channel(WorkerKind::kTrainer).set_step(epoch, eval_batch_id(split, s));
      trainer_->gather_embedding(lb);  // collective; nothing without embeddings
      trainer_->eval_batch(lb, &tally);
      progress.update(s + 1, steps);
    }
  }
  if (k > 1) rt_.read_ahead({});
  rt_.channel(WorkerKind::kTrainer).set_step(epoch, eval_control_id(split, 1));
  tally.combine(rt_.channel(WorkerKind::kTrainer),
                split == 0 ? "train:eval_valid" : "train:eval_test");
  return tally;
}

void TrainJob::train_epoch(int epoch) {
  loss_sum_ = 0;
  loss_count_ = 0;
  train_counts_ = {};
  epoch_lr_ = lr_.lr(epoch);
  trainer_->set_lr(epoch_lr_);
  bar_ = std::make_unique<ProgressBar>(rt_.leader() && cfg_.progress, epoch, cfg_.epochs, steps_);
  sampler_->reset_stats();
  trainer_->reset_step_times();
  for (FeatureStore* st : stores()) st->reset_stats();
  em_ = pipe_->run_epoch(epoch);
  if (cfg_.roles == 0) account_gather();
  bar_->finish();
  epoch_time_sum_ += em_.wall_s;
  ++res_.epochs_run;
}

// Validation and test figures of the model after `epoch` (accuracy, or link prediction's first
// Hits@K), the best so far noted, the learning rate schedule told.
std::pair<double, double> TrainJob::evaluate_epoch(int epoch) {
  Stopwatch eval_time;
  double val = 0, test = 0;
  if (link_) {
    // Every node's output by full-neighbour inference (a typed graph's: typed_link_rows).
    const std::vector<float> h = rt_.hetero() ? typed_link_rows(epoch) : infer_all(epoch);
    link_->evaluate(h, trainer_->layer_width(tc_.model.layers - 1), epoch, *trainer_,
                    [epoch](int split) { return eval_control_id(split, 1); });
    val = link_->value(link_->valid());
    test = link_->value(link_->test());
  } else if (has_valid_ || has_test_) {
    if (eval_.full) {
      std::tie(val_tally_, test_tally_) = evaluate_full(epoch);
    } else {
      val_tally_ = evaluate(0, valid_ids_, epoch);
      test_tally_ = evaluate(1, test_ids_, epoch);
    }
    val = val_tally_.metric(metric_);
    test = test_tally_.metric(metric_);
  }
  note_best(val, test, epoch);
  lr_.observe(val);
  eval_s_ = eval_time.seconds();
  return {val, test};
}

void TrainJob::report_epoch(int epoch) {
  next_epoch_ = epoch + 1;
  const Trainer::Tally tally = trainer_->take_tally();  // the epoch's one read of its figures
  loss_sum_ = tally.loss_sum;
  train_counts_ = tally.correct;
  const double loss = loss_count_ ? loss_sum_ / loss_count_ : 0.0;
  rt_.channel(WorkerKind::kTrainer).set_step(epoch, steps_ + 1);
  const EvalCounts train_acc = trainer_->all_reduce(train_counts_);
  const bool last = epoch + 1 == cfg_.epochs;
  const bool do_eval = last || (cfg_.eval_every > 0 && (epoch + 1) % cfg_.eval_every == 0);
  double val = -1, test = -1;
  if (do_eval) std::tie(val, test) = evaluate_epoch(epoch);
  res_.final_loss = loss;
  res_.cache_hit_rate = cache_hit_rate();
  if (rt_.leader()) {
    const std::string evals = do_eval ? eval_text(val, test) : "";
    const bool evaluated = do_eval && (link_ || has_valid_ || has_test_);
    const std::string eval_time = evaluated ? fmt::format(" | eval {:.2f} s", eval_s_) : "";
    const std::string fifo =
        rt_.fifo_requested() ? fmt::format(" | fifo {:.3f}", res_.fifo_hit_rate) : "";
    console_result(
        fmt::format("epoch {:>3} | loss {:.4f} | train {:.4f}{}{} | {:.2f} s (sample {:.2f}, load "
                    "{:.2f}, train {:.2f} s busy){}",
                    epoch + 1, loss, train_acc.accuracy(), evals, fifo, em_.wall_s,
                    em_.sampler.busy_s, em_.loader.busy_s, em_.trainer.busy_s, eval_time));
    write_metrics(epoch, loss, train_acc.accuracy(), do_eval);
  }
  note_history(epoch, loss, train_acc.accuracy(), do_eval, val, test);
  if (keeper_->on() && (last || stop_early() ||
                        (cfg_.checkpoint_every > 0 && (epoch + 1) % cfg_.checkpoint_every == 0))) {
    checkpoint(epoch);
  }
  keeper_->note_interrupt(epoch + 1);
  if (stop_early() && rt_.leader()) {
    DSP_INFO("train", "early stop after epoch {}: validation has not improved in {} evaluations",
             epoch + 1, cfg_.patience);
  }
}

void TrainJob::write_metrics(int epoch, double loss, double train_acc, bool evaluated) {
  if (!metrics_) return;
  nlohmann::json rec = {
      {"epoch", epoch + 1},
      {"loss", loss},
      {"train_acc", train_acc},
      {"epoch_s", em_.wall_s},
      {"max_steps", cfg_.max_steps},  // the cap of pipeline.steps
      {"normalize_features", cfg_.train.normalize_features},
      {"eval", res_.eval},
      {"lr", epoch_lr_},
      {"pipeline", em_.to_json()},
      {"sampler", sampler_->stats().to_json()},
      {"train_step", trainer_->step_times().to_json()},
      {"cache_hit_rate", res_.cache_hit_rate},
      {"feature_bytes_per_batch", res_.feature_bytes_per_batch},
      {"peer_bytes_per_batch", res_.peer_bytes_per_batch},
      {"read_ahead",
       {{"batches", res_.read_ahead}, {"cold_rows_read_ahead", res_.cold_rows_read_ahead}}}};
  if (rt_.part().meta.feature_conversion.converted) {
    rec["feature_dtype"] = res_.feature_dtype;
    rec["feature_rel_rms_error"] = res_.feature_rel_rms_error;
  }
  if (rt_.fifo_requested()) {
    rec["fifo"] = {{"hits", res_.fifo_hits},
                   {"shared_hits", res_.fifo_shared_hits},
                   {"hit_rate", res_.fifo_hit_rate}};
  }
  if (evaluated && link_) {
    rec["val"] = LinkTask::record(link_->valid());
    rec["test"] = LinkTask::record(link_->test());
    rec["eval_s"] = eval_s_;
  } else if (evaluated) {
    // Every metric of the task (acc and f1, or acc and rocauc) for both splits; a ROC-AUC
    // without both classes in a split is null.
    rec["metric"] = name_of(metric_);
    const nlohmann::json none;  // a split the data does not have
    for (const MetricKind m : val_tally_.metric_names()) {
      const std::string name = name_of(m);
      rec["val_" + name] = has_valid_ ? nlohmann::json(val_tally_.metric(m)) : none;
      rec["test_" + name] = has_test_ ? nlohmann::json(test_tally_.metric(m)) : none;
    }
    rec["eval_s"] = eval_s_;
  }
  const std::string line = rec.dump() + "\n";
  if (std::fputs(line.c_str(), metrics_.get()) == EOF || std::fflush(metrics_.get()) != 0) {
    DSP_THROW_T(IoError, "{}: write failed: {}", cfg_.metrics_file, std::strerror(errno));
  }
}

void TrainJob::checkpoint(int epoch, const std::string& path) {
  keeper_->write(epoch, run_, link_ ? link_->metric() : name_of(metric_), lr_.state(), path);
}

JobResult TrainJob::finish() {
  final_full_test();
  res_.best_val_acc = run_.best_val;
  if (link_) res_.metric = link_->metric();
  if (!link_ && metric_ != MetricKind::kAcc) res_.metric = name_of(metric_);
  res_.best_epoch = run_.best_epoch + 1;  // numbered from 1, as every output numbers epochs
  res_.stopped_early = stop_early() && std::max(next_epoch_, start_epoch_) < cfg_.epochs;
  res_.test_acc_at_best = run_.test_at_best;
  res_.mean_epoch_s = res_.epochs_run ? epoch_time_sum_ / res_.epochs_run : 0;
  for (int k = 0; k < kNumWorkerKinds; ++k) {  // to other ranks (a rank's copies to itself
    const CommCounters c = rt_.channel(static_cast<WorkerKind>(k)).counters();  // are no traffic)
    res_.bytes_communicated += c.total_sent() - c.bytes_sent[static_cast<size_t>(rt_.rank())];
  }
  if (rt_.leader() && res_.epochs_run > 0) {
    const std::string metric = link_ ? link_->metric() : name_of(metric_);
    console_result(fmt::format(
        "\nsummary\n"
        "{}{}"
        "  final loss          {:.4f}\n"
        "  time per epoch      {:.2f} s\n"
        "  cache hit rate      {:.3f}\n"
        "  bytes sent (rank 0) {:.1f} MB\n"
        "  input rows / batch  {:.3f} MB (rank 0, last epoch)\n",
        has_valid_ ? fmt::format("  {:<20}{:.4f} (epoch {})\n", "best val " + metric,
                                 res_.best_val_acc, res_.best_epoch)
                   : fmt::format("  {:<20}the last evaluated epoch's ({}; no validation nodes)\n",
                                 "best model", res_.best_epoch),
        !has_test_
            ? ""
            : fmt::format("  {:<20}{:.4f} ({})\n",
                          link_ ? "test " + metric + " (best)" : "test " + metric + " at best",
                          res_.test_acc_at_best, eval_summary()),
        res_.final_loss, res_.mean_epoch_s, res_.cache_hit_rate, res_.bytes_communicated / 1e6,
        res_.feature_bytes_per_batch / 1e6));
    if (rt_.part().meta.feature_conversion.converted) {
      console_result(fmt::format(
          "  features            {}: relative RMS error {:.4g}, max {:.4g} (dsp partition)\n",
          res_.feature_dtype, res_.feature_rel_rms_error, res_.feature_max_abs_error));
    }
    if (rt_.fifo_requested()) {
      console_result(fmt::format(
          "  fifo hit rate       {:.3f} of the rows other ranks serve ({} + {} shared rows, "
          "rank 0, last epoch)\n"
          "  rows from peers     {:.3f} MB / batch (rank 0, last epoch)\n",
          res_.fifo_hit_rate, res_.fifo_hits, res_.fifo_shared_hits,
          res_.peer_bytes_per_batch / 1e6));
    }
  }
  CoordinatedCommunicator& main_ch = rt_.channel(WorkerKind::kMain);
  main_ch.set_step(cfg_.epochs + 1, 0);
  main_ch.barrier();
  return res_;
}

}  // namespace

JobResult run_training(const JobConfig& cfg_given) {
  JobConfig cfg_in = cfg_given;  // what the run records: the options with the task's defaults
  cfg_in.apply_task_defaults();
  JobConfig cfg = cfg_in;
  cfg.validate();
  // Before any work: a new run must not replace an earlier one's checkpoints unasked.
  if (!cfg.resume) claim_checkpoint_dir(cfg.checkpoint_dir, cfg.overwrite);
  // Fanouts given for evaluation ask for sampled evaluation (auto would ignore them); all of them
  // -1 (every neighbour) ask for each node's full-neighbour output, which layer-wise inference
  // computes once per node and layer instead of once per batch that reaches it.
  const bool every = !cfg.eval_fanouts.empty() &&
                     std::all_of(cfg.eval_fanouts.begin(), cfg.eval_fanouts.end(),
                                 [](int f) { return f == kAllNeighbours; });
  if (every && !ModelConfig::is_hetero_model(cfg.train.model.model) && !cfg.sampler.temporal &&
      !cfg.preaggregate) {
    cfg.eval = EvalMode::kFull;
    cfg.eval_fanouts.clear();
  }
  if (cfg.eval == EvalMode::kAuto && !cfg.eval_fanouts.empty()) cfg.eval = EvalMode::kSampled;
  // A typed model's full-neighbour evaluation: every neighbour (-1) of every relation sampled.
  if (cfg.eval == EvalMode::kFull && ModelConfig::is_hetero_model(cfg.train.model.model)) {
    cfg.eval_fanouts.assign(cfg.sampler.fanouts.size(), kAllNeighbours);
  }
  // Per-relation fanouts (a heterogeneous graph) evaluate as they train unless --eval-fanouts.
  if (cfg.eval_fanouts.empty() && cfg.sampler.relation_fanouts.empty()) {
    cfg.eval_fanouts = cfg.sampler.fanouts;
  }
  TrainJob job(cfg, cfg_in.to_json());
  for (int epoch = job.start_epoch(); epoch < cfg.epochs && !job.stop_early(); ++epoch) {
    job.train_epoch(epoch);
    job.report_epoch(epoch);
  }
  return job.finish();
}

}  // namespace dsp
