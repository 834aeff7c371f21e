#include "train/job.hpp"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <utility>

#include "ccc/coordinator.hpp"
#include "core/error.hpp"
#include "core/interrupt.hpp"
#include "core/logging.hpp"
#include "csp/sampler.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/rank/runtime.hpp"
#include "pipeline/roles.hpp"
#include "pipeline/scheduler.hpp"
#include "train/checkpoint_files.hpp"
#include "train/checkpoint_keeper.hpp"
#include "train/evaluator.hpp"
#include "train/job_setup.hpp"
#include "train/link_task.hpp"
#include "train/lr_schedule.hpp"
#include "train/progress.hpp"
#include "train/run_report.hpp"
#include "train/step_embedding.hpp"
#include "train/trainer.hpp"

namespace dsp {
namespace fs = std::filesystem;

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

// One rank's training job: a short loop over its parts. The task's batches (node seeds, or
// LinkTask's edges), the pipeline of sample, load and train over the scheduler, the Evaluator
// after an epoch, the CheckpointKeeper, and the RunReport that tells it all and builds the result.
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
  SamplerOptions make_samplers(std::unique_ptr<CollectiveSampler>* eval_sampler);
  void make_trainer(nlohmann::json recorded);
  // A step taken: the progress line reads the running loss only when it redraws.
  void account();
  PipelineStages symmetric_stages();
  EpochScheduler* schedule(PipelineStages& stages, const SamplerOptions& so);
  int auto_samplers(const PipelineStages& symmetric);
  int read_ahead_batches();
  void size_cache(const PipelineOptions& popts);
  // The feature stores the loads gather through (one, one per featured node type, or none).
  std::vector<FeatureStore*> stores();
  // A new evaluation: the best so far (best.pt, the kept model) when it improves validation.
  void note_best(double val, double test, int epoch);
  // checkpoint-<epoch + 1>.pt and its rotation, or `path` (best.pt).
  void checkpoint(int epoch, const std::string& path = "");

  JobConfig cfg_;
  RankRuntime rt_;
  std::unique_ptr<CollectiveSampler> sampler_;
  TrainConfig tc_;
  MetricKind metric_ = MetricKind::kAcc;  // --metric as resolved (node tasks)
  std::unique_ptr<Trainer> trainer_;
  std::unique_ptr<EpochScheduler> sched_;
  std::unique_ptr<LinkTask> link_;            // --task link
  std::unique_ptr<EmbeddingTable> emb_;       // learnable embeddings
  std::unique_ptr<CheckpointKeeper> keeper_;  // --checkpoint-dir, --resume
  std::unique_ptr<Evaluator> eval_;
  std::unique_ptr<RunReport> report_;
  RoleRank role_;     // --roles
  int samplers_ = 0;  // --roles, or what --roles auto chose
  std::unique_ptr<Pipeline> pipe_;
  int64_t steps_ = 0;
  int start_epoch_ = 0;
  int next_epoch_ = 0;      // after the last epoch reported
  int64_t loss_count_ = 0;  // the epoch in progress' steps
  std::unique_ptr<ProgressBar> bar_;
  RunRecord run_;        // the best validation so far, --patience's count
  LrSchedule lr_;        // --lr-schedule
  double epoch_lr_ = 0;  // the rate the epoch in progress trains with
};

TrainJob::TrainJob(const JobConfig& cfg, nlohmann::json recorded)
    : cfg_(cfg), rt_(cfg.rank_options()) {
  check_job_data(cfg_, rt_);
  std::unique_ptr<CollectiveSampler> eval_sampler;
  const SamplerOptions so = make_samplers(&eval_sampler);
  make_trainer(std::move(recorded));
  if (cfg_.link.link()) link_ = std::make_unique<LinkTask>(cfg_, rt_);
  eval_ = std::make_unique<Evaluator>(cfg_, rt_, *trainer_, tc_.model, std::move(eval_sampler),
                                      link_.get(), metric_);
  report_ = std::make_unique<RunReport>(cfg_, rt_, tc_, *eval_, link_.get());
  PipelineStages stages = symmetric_stages();
  PipelineOptions popts = rt_.pipeline_options(cfg_.pipeline);
  samplers_ = cfg_.roles == JobConfig::kRolesAuto ? auto_samplers(stages) : cfg_.roles;
  EpochScheduler* sched = schedule(stages, so);
  // The cap on the scheduler the pipeline runs over: every epoch's step agreement applies it.
  sched->set_max_steps(cfg_.max_steps);
  CoordinatedCommunicator& main_ch = rt_.channel(WorkerKind::kMain);
  main_ch.set_step(-1, 1);
  steps_ = sched->agree_steps(main_ch);
  eval_->choose();  // main channel, steps (-1, 3) to (-1, 5)
  JobResult& res = report_->result();
  res.eval = name_of(eval_->choice().mode);
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
  rt_.features()
      .enable_fifo();  // after the sizing, which rebuilds the store (no-op without --fifo-rows)
  if (samplers_ == 0) popts.read_ahead = res.read_ahead = read_ahead_batches();  // (-1, 7)
  pipe_ = std::make_unique<Pipeline>(rt_.coord(), *sched, stages, popts);
  eval_->set_read_ahead(pipe_->options().read_ahead);
  report_->start(*sched, steps_, samplers_);
  keeper_->note_interrupt(start_epoch_);
  report_->open_metrics(keeper_->resumed(), start_epoch_);
}

// The training sampler and, into `eval_sampler`, evaluation's; returns the training sampler's
// options.
SamplerOptions TrainJob::make_samplers(std::unique_ptr<CollectiveSampler>* eval_sampler) {
  SamplerOptions so = cfg_.sampler.options();
  so.seed = cfg_.seed;
  check_node_times(so, rt_.part(), cfg_.rank.path, "training and evaluation seed");
  // The trainer runs on the rank's device, where a device sampler backend builds the blocks: their
  // edge arrays stay there (Block::on_device; the CPU backend ignores this).
  so.blocks_on_device = !rt_.hetero();     // typed sampling builds its blocks on the host
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
  *eval_sampler = rt_.make_sampler(eo);
  return so;
}

void TrainJob::make_trainer(nlohmann::json recorded) {
  tc_ = job_train_config(cfg_, rt_, &metric_);
  trainer_ = std::make_unique<Trainer>(tc_, rt_.channel(WorkerKind::kTrainer));
  if (tc_.model.embedding_dim > 0) emb_ = make_job_embedding(cfg_, rt_, *trainer_, tc_);
  lr_ = LrSchedule(tc_, cfg_.epochs);
  keeper_ =
      std::make_unique<CheckpointKeeper>(cfg_, std::move(recorded), rt_, *trainer_, emb_.get());
  if (cfg_.resume) {
    if (const auto r = keeper_->resume()) {
      start_epoch_ = r->epochs;
      run_ = r->run;
      if (!r->lr_schedule.is_null()) lr_.restore(r->lr_schedule);
    }
  }
  if (!cfg_.init_from.empty()) {
    trainer_->state().init_parameters(cfg_.init_from);
    if (rt_.leader()) DSP_INFO("train", "parameters from {}", cfg_.init_from);
  }
  if (rt_.leader() && !cfg_.checkpoint_dir.empty()) fs::create_directories(cfg_.checkpoint_dir);
}

std::vector<FeatureStore*> TrainJob::stores() {
  if (rt_.hetero()) {
    std::vector<FeatureStore*> out;
    for (FeatureStore* s : rt_.features().type_stores()) {
      if (s) out.push_back(s);
    }
    return out;
  }
  if (rt_.features().has_features()) return {&rt_.features().store()};
  return {};
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
    return sampler_->sample(seeds, epoch, batch);
  };
  stages.load = [this](SampledBatch&& sb) { return rt_.features().load(std::move(sb)); };
  stages.read_ahead = [this](const std::vector<const SampledBatch*>& b) {
    rt_.features().read_ahead(b);
  };
  stages.train = [this](LoadedBatch&& lb) {
    trainer_->embedding().gather(lb);  // collective; nothing without embeddings
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
  int64_t any = rt_.features().reads_ahead() ? 1 : 0;
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
  const SampledBatch sb = sampler_->sample(seeds, start_epoch_, 0);
  const PartitionData& part = rt_.part();
  const int64_t bytes = sb.blocks.front().num_src * part.features.dim(1) *
                        static_cast<int64_t>(dtype_size(part.features.dtype()));
  // Pipelined: the loaded queue and the batch being loaded hold features besides the trained one.
  const int64_t in_flight =
      popts.mode == PipelineMode::kSequential ? 0 : static_cast<int64_t>(popts.queue_capacity) + 1;
  rt_.features().size_cache_for_batch(bytes, in_flight);
}

void TrainJob::train_epoch(int epoch) {
  loss_count_ = 0;
  epoch_lr_ = lr_.lr(epoch);
  trainer_->set_lr(epoch_lr_);
  bar_ = std::make_unique<ProgressBar>(rt_.leader() && cfg_.progress, epoch, cfg_.epochs, steps_);
  sampler_->reset_stats();
  trainer_->step_times() = {};
  for (FeatureStore* st : stores()) st->reset_stats();
  report_->trained(pipe_->run_epoch(epoch));
  if (cfg_.roles == 0) report_->gathered(stores(), steps_);
  bar_->finish();
}

void TrainJob::report_epoch(int epoch) {
  next_epoch_ = epoch + 1;
  const Trainer::Tally tally = trainer_->take_tally();  // the epoch's one read of its figures
  RunReport::Epoch e;
  e.epoch = epoch;
  e.loss = loss_count_ ? tally.loss_sum / loss_count_ : 0.0;
  e.lr = epoch_lr_;
  rt_.channel(WorkerKind::kTrainer).set_step(epoch, steps_ + 1);
  e.train_acc = all_reduce(trainer_->comm(), tally.correct).accuracy();
  const bool last = epoch + 1 == cfg_.epochs;
  e.evaluated = last || (cfg_.eval_every > 0 && (epoch + 1) % cfg_.eval_every == 0);
  if (e.evaluated) {
    std::tie(e.val, e.test) = eval_->run(epoch);
    note_best(e.val, e.test, epoch);
    lr_.observe(e.val);
  }
  e.cache_hit_rate = RunReport::cache_hit_rate(stores());
  e.sampler = sampler_->stats().to_json();
  e.train_step = trainer_->step_times().to_json();
  report_->epoch(e);
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

void TrainJob::note_best(double val, double test, int epoch) {
  ++run_.evals_since_best;
  // A NaN (ROC-AUC of a one-class split) is no improvement; without validation the latest model
  // is the best one.
  if (eval_->last().has_valid && !(val > run_.best_val)) return;
  run_.best_val = val;
  run_.test_at_best = test;
  if (link_) {
    report_->result().best_val_mrr = link_->valid().mrr;
    report_->result().test_mrr_at_best = link_->test().mrr;
  }
  run_.best_epoch = epoch;
  run_.evals_since_best = 0;
  eval_->keep_best();
  if (keeper_->on()) checkpoint(epoch, cfg_.checkpoint_dir + "/best.pt");
}

void TrainJob::checkpoint(int epoch, const std::string& path) {
  keeper_->write(epoch, run_, link_ ? link_->metric() : name_of(metric_), lr_.state(), path);
}

JobResult TrainJob::finish() {
  JobResult& res = report_->result();
  res.test_acc_full = eval_->final_full_test(run_);
  res.best_val_acc = run_.best_val;
  if (link_) res.metric = link_->metric();
  if (!link_ && metric_ != MetricKind::kAcc) res.metric = name_of(metric_);
  res.best_epoch = run_.best_epoch + 1;  // numbered from 1, as every output numbers epochs
  res.stopped_early = stop_early() && std::max(next_epoch_, start_epoch_) < cfg_.epochs;
  res.test_acc_at_best = run_.test_at_best;
  for (int k = 0; k < kNumWorkerKinds; ++k) {  // to other ranks (a rank's copies to itself
    const CommCounters c = rt_.channel(static_cast<WorkerKind>(k)).counters();  // are no traffic)
    res.bytes_communicated += c.total_sent() - c.bytes_sent[static_cast<size_t>(rt_.rank())];
  }
  report_->summary();
  CoordinatedCommunicator& main_ch = rt_.channel(WorkerKind::kMain);
  main_ch.set_step(cfg_.epochs + 1, 0);
  main_ch.barrier();
  return res;
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
  if (every && !ModelConfig::is_hetero_model(cfg.train.model.model) && !cfg.sampler.is_temporal() &&
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
