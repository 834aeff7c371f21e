#pragma once
// What a job tells of itself, and the result it returns: rank 0's start lines (what trains on
// what, the first layer's pre-aggregation, a batch size that leaves few steps), each epoch's line
// on the console and record in --metrics-file (rank 0) and in the result's history (every rank),
// the training loads' figures (bytes per batch, the caches' and FIFO levels' hits), and the
// closing summary. Torch-free.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "layout/store/feature_store.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/rank/runtime.hpp"
#include "pipeline/scheduler.hpp"
#include "train/config.hpp"
#include "train/evaluator.hpp"
#include "train/job.hpp"
#include "train/link_task.hpp"

namespace dsp {

class RunReport {
 public:
  // `tc`: the trainer's configuration; `link`: the link task (null: node classification).
  RunReport(const JobConfig& cfg, RankRuntime& rt, const TrainConfig& tc, const Evaluator& eval,
            const LinkTask* link);
  JobResult& result() { return res_; }
  const JobResult& result() const { return res_; }
  // --metrics-file (rank 0), continued after `start_epoch` epochs when the run resumed.
  void open_metrics(bool resumed, int start_epoch);
  // Rank 0's lines before the first epoch: `steps` per epoch, `samplers` sampler-only ranks.
  void start(const EpochScheduler& sched, int64_t steps, int samplers) const;
  // An epoch trained (its pipeline's figures); `stores`' loads over its `steps` batches, when the
  // ranks train what they load (not with --roles).
  void trained(const EpochMetrics& em);
  void gathered(const std::vector<FeatureStore*>& stores, int64_t steps);
  // The stores' hit rate since the epoch began (its evaluation's gathers too), all summed.
  static double cache_hit_rate(const std::vector<FeatureStore*>& stores);
  // An epoch's figures: `evaluated` when it ran an evaluation (val, test: Evaluator::run's).
  struct Epoch {
    int epoch = 0;
    double loss = 0, train_acc = 0, lr = 0;
    bool evaluated = false;
    double val = -1, test = -1;
    double cache_hit_rate = 0;           // cache_hit_rate(the stores) after the evaluation
    nlohmann::json sampler, train_step;  // the sampler's and the train step's figures
  };
  // The epoch line and metrics record (rank 0) and the history's record (every rank).
  void epoch(const Epoch& e);
  // The closing summary (rank 0, when any epoch ran).
  void summary() const;

 private:
  void warn_few_steps(const EpochScheduler& sched) const;
  void log_start(const EpochScheduler& sched, int64_t steps, int samplers) const;
  void log_preaggregation() const;
  std::string eval_text(double val, double test) const;
  void note_history(const Epoch& e);
  void write_metrics(const Epoch& e);

  const JobConfig& cfg_;
  RankRuntime& rt_;
  const TrainConfig& tc_;
  const ModelConfig& model_;
  const Evaluator& eval_;
  const LinkTask* link_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> metrics_{nullptr, &std::fclose};
  EpochMetrics em_;  // the epoch last trained
  double epoch_time_sum_ = 0;
  JobResult res_;
};

}  // namespace dsp
