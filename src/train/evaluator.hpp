#pragma once
// How a job evaluates its model after an epoch: this rank's validation and test nodes (whether
// any rank has them; --eval-max-nodes' subsample), --eval as resolved (eval_choice.hpp), sampled
// evaluation in read-ahead groups over its own sampler (its draws independent of training's),
// full-neighbour layer-wise inference, a typed link job's output rows, the last evaluation's
// figures, and the best model's test with full neighbourhoods at the end. Its batch numbers
// start at 2^40, a pure function of (split, step), so a resumed job evaluates with exactly the
// draws of an uninterrupted one. Torch-free.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "csp/sampler.hpp"
#include "pipeline/rank/runtime.hpp"
#include "train/checkpoint_keeper.hpp"
#include "train/eval_choice.hpp"
#include "train/job.hpp"
#include "train/link_task.hpp"
#include "train/metrics.hpp"
#include "train/trainer.hpp"

namespace dsp {

class Evaluator {
 public:
  // `sampler`: evaluation's; `link`: the link task (null: node classification, whose splits are
  // counted over the ranks on the main channel, step (-1, 8): without validation the best model
  // is the last evaluated one, and --patience and --lr-schedule plateau are refused; said once).
  Evaluator(const JobConfig& cfg, RankRuntime& rt, Trainer& trainer, const ModelConfig& model,
            std::unique_ptr<CollectiveSampler> sampler, LinkTask* link, MetricKind metric);
  // --eval-max-nodes' subsample (main channel, step (-1, 4)) and --eval's choice (steps (-1, 3)
  // and (-1, 5)); rank 0 says both. Collective.
  void choose();
  const EvalChoice& choice() const { return eval_; }
  // Sampled evaluation's batches in groups of training's --read-ahead.
  void set_read_ahead(int k) { read_ahead_ = k; }
  // The validation and test figures of the model after `epoch`: --metric as resolved, or link
  // prediction's (LinkTask::value); zeros for a node task without either split. Collective.
  std::pair<double, double> run(int64_t epoch);
  // The last run: its wall time, and for node tasks its tallies (every metric) and whether any
  // rank has each split.
  struct Outcome {
    double seconds = 0;
    EvalTally valid, test;
    bool has_valid = true, has_test = true;
  };
  const Outcome& last() const { return last_; }
  bool evaluates() const { return link_ || last_.has_valid || last_.has_test; }
  MetricKind metric() const { return metric_; }
  // A new best model: kept when a sampled job tests it in full at the end (choice().final_full).
  void keep_best();
  // The best model's test figure with full neighbourhoods (JobResult::test_acc_full): `run`'s
  // under full evaluation; under sampled evaluation the kept model's, computed now; else -1.
  // Sampled evaluation takes it when it fits, costs at most kFinalFullFactor sampled evaluations
  // (eval_choice.cpp) and the best model is at hand (not when it predates a resume).
  double final_full_test(const RunRecord& run);
  // How the test figure was evaluated, for the summary; `test_full`: final_full_test's.
  std::string summary(double test_full) const;

 private:
  void count_splits();
  void subsample();
  void choose_mode();
  // Over this rank's share of `ids` (global, owned), the same steps on every rank.
  EvalTally evaluate(int split, const std::vector<int64_t>& ids, int64_t epoch);
  // Full-neighbour evaluation (train/inference.hpp): validation and test counts, all ranks'.
  std::pair<EvalTally, EvalTally> evaluate_full(int64_t epoch);
  std::vector<float> infer_all(int64_t epoch);
  std::vector<float> typed_link_rows(int64_t epoch);

  const JobConfig& cfg_;
  RankRuntime& rt_;
  Trainer& trainer_;
  std::unique_ptr<CollectiveSampler> sampler_;
  LinkTask* link_;
  MetricKind metric_;  // --metric as resolved (acc, f1 or rocauc) for node tasks
  const ModelConfig& model_;
  int layers_;
  int read_ahead_ = 0;
  std::vector<int64_t> valid_ids_, test_ids_;
  EvalChoice eval_;                 // --eval as resolved
  Outcome last_;                    // the last run's
  std::vector<float> best_params_;  // the best model so far, when final_full
};

}  // namespace dsp
