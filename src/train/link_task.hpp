#pragma once
// Link prediction as a job's task (dsp train --task link): its batches (LinkBatcher over the
// part's training edges), the ranking of each split's held-out edges from every node's output
// rows (Hits@K, MRR, ROC-AUC, Recall@K: train/link.hpp), what picks the best epoch, and how the
// figures read in the epoch line and the metrics file. Torch-free.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "csp/sampler.hpp"
#include "pipeline/link_batch.hpp"
#include "pipeline/rank/runtime.hpp"
#include "train/job.hpp"
#include "train/link.hpp"
#include "train/trainer.hpp"

namespace dsp {

class LinkTask {
 public:
  // The part's training edges (FormatError naming the partition when it has none).
  LinkTask(const JobConfig& cfg, RankRuntime& rt);
  const LinkBatcher& batcher() const { return batcher_; }
  // The training edges `edges` (part indices) as batch (epoch, batch): their endpoints sampled,
  // each edge (and, by --exclude, its reverse) hidden, the pairs to score attached.
  SampledBatch sample(CollectiveSampler& sampler, int64_t epoch, int64_t batch,
                      const std::vector<int64_t>& edges) const;
  // Ranks the validation and test edges from `rows` (every node of this rank's part, `width`
  // columns each): split s on the trainer channel's step (epoch, step_of(s)). Collective. The
  // results stay as valid() and test().
  void evaluate(const std::vector<float>& rows, int64_t width, int64_t epoch, Trainer& trainer,
                const std::function<int64_t(int)>& step_of);
  const LinkMetrics& valid() const { return valid_; }
  const LinkMetrics& test() const { return test_; }
  // What picks the best epoch ("hits@50", "mrr" with negatives per positive, "rocauc") and that
  // figure of `m`.
  std::string metric() const;
  double value(const LinkMetrics& m) const;
  // "hits@50 0.8123 mrr 0.4012 auc 0.9310" (and " recall@20 0.3012" per --recall-k).
  static std::string line(const LinkMetrics& m);
  // A split's figures in the metrics file: mrr, auc, positives, negatives, hits@K, recall@K.
  static nlohmann::json record(const LinkMetrics& m);

 private:
  // Recall@K's candidates: the link relation's destination type, or every node of a homogeneous
  // graph (made on first use); and what a source is not ranked against besides its training
  // destinations (link.hpp RecallExclusions).
  const std::vector<int64_t>& recall_candidates();
  RecallExclusions recall_exclusions() const;

  const JobConfig& cfg_;
  RankRuntime& rt_;
  LinkBatcher batcher_;
  LinkMetrics valid_, test_;  // the last evaluation
  std::vector<int64_t> all_nodes_;
};

}  // namespace dsp
