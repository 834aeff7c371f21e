#pragma once
// `dsp train` as a library call: partition (if needed), then per rank the collective sampler, the
// feature store and the trainer wired into the three-worker pipeline under the coordinator,
// evaluation, checkpoints, progress and metrics. Torch-free header.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "csp/sampler.hpp"
#include "layout/store/embedding_table.hpp"
#include "pipeline/rank/options.hpp"
#include "pipeline/roles.hpp"
#include "pipeline/scheduler.hpp"
#include "train/config.hpp"
#include "train/link.hpp"
#include "train/metrics.hpp"

namespace dsp {

// How validation and test are evaluated (JobConfig::eval; train/evaluator.hpp); what picks the
// best epoch is JobConfig::metric (train/metrics.hpp's MetricKind).
enum class EvalMode { kAuto, kFull, kSampled };
const Names<EvalMode>& names_of(EvalMode);

// A job's model and sampler options before --task picks its defaults (JobConfig::
// apply_task_defaults): no fanouts and a negative weight decay stand for "the task's".
TrainConfig job_train_defaults();
SamplerConfig job_sampler_defaults();

struct JobConfig {
  // What each rank is built from (pipeline/rank/options.hpp): the partition or dataset directory
  // (a dataset directory is partitioned on the fly into one part per rank), the communicator
  // backend, device and transport, the cache override and memory, BGL's FIFO levels. Its seed and
  // threads are the job's (seed, train.num_threads), set when the rank is built.
  RankOptions rank;
  TrainConfig train = job_train_defaults();  // model.in_dim/out_dim/layers: from the data
  // The sampler's own options (csp/sampler_options.hpp): fanouts (from the seeds out, one per
  // layer), the kernel and the scheme's flags; the job sets its seed and where blocks stay.
  SamplerConfig sampler = job_sampler_defaults();
  int layers = 0;                 // 0: fanouts.size(); else must equal it
  std::vector<int> eval_fanouts;  // default: fanouts; given, they make `eval` auto sampled
  int64_t batch_size = 1024;      // seeds per rank per step
  int64_t eval_batch_size = 4096;
  // Validate and test on about this many nodes of each split: each node kept with probability
  // eval_max_nodes / split size, by a hash of (seed, its dataset id), so the same nodes at any rank
  // count. 0: every node.
  int64_t eval_max_nodes = 0;
  // Evaluation: full (full-neighbour layer-wise inference, train/inference.hpp), sampled
  // (eval_fanouts), or auto: sampled when eval_fanouts are given, else full where its memory
  // estimate fits and it reads no more neighbour rows than sampling, else sampled (logged).
  EvalMode eval = EvalMode::kAuto;
  int epochs = 10;
  // At most this many steps per epoch (0: no limit): the epoch stops after the first N batches of
  // its usual order (every rank at the same step; evaluation and checkpoints as usual).
  int64_t max_steps = 0;
  int eval_every = 1;  // 0: evaluate only after the last epoch
  // Early stopping: stop once validation has not improved in this many evaluations (the same
  // decision on every rank: the accuracy is all-reduced); checkpointed and resumed. 0: off.
  int patience = 0;
  PipelineMode pipeline = PipelineMode::kAuto;  // auto (profiled), on, off (DSP-Seq, the ablation)
  bool ccc = true;                // off only to show why the coordinator is needed
  // Sampler-only ranks (GNNLab's factored layout, pipeline/roles.hpp); 0: symmetric; kRolesAuto:
  // GNNLab's allocation rule over a short profile of the symmetric stages.
  int roles = 0;
  static constexpr int kRolesAuto = -1;
  RoleSwitch roles_switch = RoleSwitch::kOff;  // pipeline/roles.hpp
  // Superbatches (PipelineOptions::read_ahead): batches whose feature rows are read from disk in
  // one sweep; kReadAheadAuto: kAutoReadAhead when any rank's rows are beyond its memory share,
  // else 0; 0 or 1: none.
  int read_ahead = kReadAheadAuto;
  static constexpr int kReadAheadAuto = -1;
  static constexpr int kAutoReadAhead = 16;
  static constexpr int kMaxReadAhead = 1024;
  // PaGraph: with no rank.cache_ratio, size the cache after the first batch from the memory left
  // (RankRuntime::size_cache_for_batch, within rank.cache_memory).
  bool cache_auto = false;
  // PaGraph's first-layer pre-aggregation (sage, gcn): the partition's preaggregated_<kind>.npy
  // rows replace the input layer's sampled block; the sampler draws fanouts[0, L-1) and the
  // input layer's fanout (the last) is not used. Off: a pre-aggregated partition trains normally.
  bool preaggregate = false;
  // Empty: no checkpoints. Else each checkpoint is checkpoint_dir/checkpoint-<E>.pt (E: the
  // epochs it completed; each rank's embedding shard beside it), the newest keep_checkpoints of
  // them kept, checkpoint.pt a link to the newest; and best.pt (the best validation so far).
  std::string checkpoint_dir;
  // A new run where checkpoint_dir holds an earlier run's files (checkpoint_files.hpp
  // earlier_run_files): they are removed first. Without it (or resume) such a run is refused.
  bool overwrite = false;
  int checkpoint_every = 0;  // epochs; 0: only at the end (if checkpoint_dir is set)
  int keep_checkpoints = 2;  // >= 1
  // Continue the run in checkpoint_dir: from checkpoint.pt (an error when it is missing or
  // damaged); with resume_auto from the newest checkpoint-<E>.pt that verifies on every rank
  // (a damaged one skipped with a warning), or a new run when there is none (FormatError when
  // there are some and none verifies).
  bool resume = false;
  bool resume_auto = false;  // --resume auto (sets resume too)
  // A new run whose parameters start from this checkpoint or exported model directory
  // (Trainer::init_parameters); not with resume.
  std::string init_from;
  std::string metrics_file;  // JSON lines, one record per epoch (rank 0)
  // What picks the best epoch (node classification): acc, f1 (macro-F1, --loss ce), rocauc
  // (--loss bce: ROC-AUC, mean over label columns when multi-label) or auto (acc for ce, rocauc
  // for bce). best_val_acc and test_acc_at_best then hold it.
  MetricKind metric = MetricKind::kAuto;
  uint64_t seed = 0;
  bool progress = true;         // progress bar on a terminal (rank 0)
  SeedOrderOptions seed_order;  // per pass: a shuffle, or BGL's BFS order (pipeline/scheduler.hpp)
  // The task (train/link.hpp): node classification, or link prediction with its negatives,
  // edge exclusion and Hits@K.
  LinkOptions link;
  // Learnable node embeddings (layout/store/embedding_table.hpp), concatenated after the
  // features: dim -1 (the default) learns `hidden` columns on a dataset without features and
  // none otherwise; 0 none.
  EmbeddingOptions embedding{-1};

  // The defaults that depend on the task, where the options left them to it (empty fanouts,
  // weight decay kTaskWeightDecay): node classification 15,10,5 and 5e-4 (DSP's and DGL's node
  // examples); link prediction 15,10 and no weight decay (PyG's, DGL's and OGB's link loops: a
  // link model's first gradients are small, and Adam's L2 term, normalised like them, shrinks
  // every weight by about lr a step until the logits are zero; a third mean-aggregating layer
  // blurs the pairs Hits@K must rank, in PyG as here). The learning rate (lr kTaskLr) is 0.01,
  // and 0.001 for link prediction with a typed model (rgcn, hsage): their outputs sum one term per
  // relation (hsage also one self weight and bias per relation), so Adam, which moves every weight
  // by about lr a step, moves the pairs' dot products several times as far; at 0.01 the first
  // steps saturate the logits and the dead rows stay (train accuracy 0.50, Hits@50 0.03 on the
  // generated authorships against 0.67-0.70 at 0.001). Idempotent; run_training calls it first.
  void apply_task_defaults();
  static constexpr double kTaskWeightDecay = -1;
  static constexpr double kTaskLr = -1;
  // Whether a rank on a GPU (`gpu`) sizes its feature cache from the device memory left after the
  // topology and the model, as --cache-auto does, without being asked: every row when they fit,
  // the rest read from host memory through UVA. Not when --cache-ratio, --cache-policy or
  // --cache-auto chose, nor where --cache-auto is refused (link prediction, typed graphs, --roles,
  // --preaggregate's rows keep the partition's cache).
  bool sizes_device_cache(bool gpu) const;

  void validate() const;  // InvalidArgument naming the field (after the task's defaults)
  // The options its ranks are built from: rank, with the job's coordinator switch (ccc), threads,
  // seed and pre-aggregation kind.
  RankOptions rank_options() const;
  nlohmann::json to_json() const;
  // Fields of a --config file; unknown keys are an error (typos must not be silently ignored).
  static JobConfig from_json(const nlohmann::json& j, const std::string& what);
};

struct JobResult {
  int epochs_run = 0;
  bool stopped_early = false;  // --patience ended the job before --epochs
  double best_val_acc = 0;
  int best_epoch = 0;  // the best validation's epoch, numbered from 1 (0: none evaluated)
  double test_acc_at_best = 0;
  std::string eval;  // how validation and test were evaluated: "full" or "sampled"
  // The best-validation model's test accuracy with full neighbourhoods: test_acc_at_best under
  // full evaluation; under sampled evaluation computed at the end when it fits; else -1.
  double test_acc_full = -1;
  double final_loss = 0;
  double mean_epoch_s = 0;
  double cache_hit_rate = 0;
  uint64_t bytes_communicated = 0;     // this rank to the others, all workers
  double feature_bytes_per_batch = 0;  // this rank's loaded input rows, last epoch's training
  // Of those, the bytes received from other ranks' caches per batch, and the rows the FIFO
  // levels served instead (rank, machine) with their share of the rows other ranks serve.
  double peer_bytes_per_batch = 0;
  int64_t fifo_hits = 0, fifo_shared_hits = 0;
  double fifo_hit_rate = 0;
  // --read-ahead: batches per group (0: none), and of this rank's cold rows in training loads,
  // the share served from the group's sweep.
  int read_ahead = 0;
  double cold_rows_read_ahead = 0;
  // The partition's stored feature dtype and, when dsp partition --feature-dtype converted them,
  // the conversion's error over all entries (partition.json's feature_conversion; else 0).
  std::string feature_dtype;
  double feature_max_abs_error = 0, feature_rel_rms_error = 0;
  // --task link: best_val_acc / test_acc_at_best hold the first Hits@K; these the rest. Node
  // classification with --metric f1 or rocauc (--loss bce's default): that metric.
  std::string metric = "accuracy";  // or "hits@K", "f1", "rocauc"
  // Whether the data has validation and test nodes (node tasks). Without validation the best
  // model is the last epoch's (best_val_acc null in to_json); without test no test figure (null).
  bool has_valid = true, has_test = true;
  // One record per epoch trained by this run, in order (PyTorch users' per-epoch history):
  // epoch (from 1), loss, train_acc, lr, epoch_s, and after an evaluation val and test in the
  // metric (null for a split the data does not have; link prediction: the first Hits@K).
  std::vector<nlohmann::json> history;
  double best_val_mrr = 0, test_mrr_at_best = 0;
  nlohmann::json to_json() const;

 private:
  nlohmann::json body_json() const;
};

// --resume with the configuration the checkpoint in c.checkpoint_dir recorded: that run's
// options, with those the user gave (`given`: their keys, from flags or a --config file) taken from
// c. A given option that contradicts the recorded one is refused (InvalidArgument naming both
// values) unless its table entry may change between runs (Option::may_change_on_resume: epochs,
// eval_every, checkpoint_every, keep_checkpoints, checkpoint_dir, metrics_file, threads,
// memory_budget, log_file, tf32, path). Returns c when the checkpoint recorded no run.
JobConfig resume_config(const JobConfig& c, const std::set<std::string>& given);

// Runs the whole job on this rank (collective over the ranks of the job). Rank 0 prints.
JobResult run_training(const JobConfig& cfg);

}  // namespace dsp
