#include "train/link_task.hpp"

#include <fmt/format.h>

#include <numeric>
#include <utility>

namespace dsp {

namespace {
// Whether the stored graph is symmetric (--exclude auto then hides the reverse edge too).
bool undirected(const PartitionMeta& meta) { return !meta.extra.value("directed", true); }
}  // namespace

LinkTask::LinkTask(const JobConfig& cfg, RankRuntime& rt)
    : cfg_(cfg), rt_(rt), batcher_(rt.part(), cfg.link, cfg.seed, undirected(rt.part().meta)) {}

SampledBatch LinkTask::sample(CollectiveSampler& sampler, int64_t epoch, int64_t batch,
                              const std::vector<int64_t>& edges) const {
  LinkBatch lb = batcher_.make(edges, epoch, batch);
  SampledBatch sb = sampler.sample(lb.seeds, epoch, batch, &lb.exclude);
  sb.pairs = std::move(lb.pairs);
  return sb;
}

const std::vector<int64_t>& LinkTask::recall_candidates() {
  if (rt_.hetero()) return batcher_.destinations();
  if (all_nodes_.empty()) {
    all_nodes_.resize(static_cast<size_t>(rt_.part().meta.num_nodes));
    std::iota(all_nodes_.begin(), all_nodes_.end(), int64_t{0});
  }
  return all_nodes_;
}

RecallExclusions LinkTask::recall_exclusions() const {
  RecallExclusions ex;
  if (!rt_.hetero()) {
    ex.self = true;
    ex.row_neighbours = undirected(rt_.part().meta);
  }
  return ex;
}

void LinkTask::evaluate(const std::vector<float>& rows, int64_t width, int64_t epoch,
                        Trainer& trainer, const std::function<int64_t(int)>& step_of) {
  const PartitionData& part = rt_.part();
  CoordinatedCommunicator& tc = rt_.channel(WorkerKind::kTrainer);
  const int64_t per = part.meta.link_negatives_per_positive;
  const std::vector<int>& rk = cfg_.link.recall_k;
  auto split = [&](int s, const Array& pos, const Array& neg) {
    tc.set_step(epoch, step_of(s));
    LinkMetrics m =
        evaluate_link_split(tc, part.meta, rows, width, pos, neg, per, cfg_.link.hits_k, trainer);
    m.recall_k = rk;
    if (!rk.empty()) {
      m.recall = link_recall(tc, part, rows, width, pos, recall_candidates(), rk, trainer,
                             recall_exclusions());
    }
    return m;
  };
  valid_ = split(0, part.link_valid, part.link_valid_neg);
  test_ = split(1, part.link_test, part.link_test_neg);
}

// The first Hits@K, MRR with negatives per positive, or the ROC-AUC (--metric rocauc).
std::string LinkTask::metric() const {
  return link_selection(cfg_.metric == MetricKind::kRocauc,
                        rt_.part().meta.link_negatives_per_positive, cfg_.link.hits_k);
}

double LinkTask::value(const LinkMetrics& m) const {
  return m.selected(cfg_.metric == MetricKind::kRocauc);
}

std::string LinkTask::line(const LinkMetrics& m) {
  std::string s;
  for (size_t j = 0; j < m.k.size(); ++j) s += fmt::format("hits@{} {:.4f} ", m.k[j], m.hits[j]);
  s += fmt::format("mrr {:.4f} auc {:.4f}", m.mrr, m.auc);
  for (size_t j = 0; j < m.recall.size(); ++j) {
    s += fmt::format(" recall@{} {:.4f}", m.recall_k[j], m.recall[j]);
  }
  return s;
}

nlohmann::json LinkTask::record(const LinkMetrics& m) {
  nlohmann::json j = {
      {"mrr", m.mrr}, {"auc", m.auc}, {"positives", m.positives}, {"negatives", m.negatives}};
  for (size_t i = 0; i < m.k.size(); ++i) j[fmt::format("hits@{}", m.k[i])] = m.hits[i];
  for (size_t i = 0; i < m.recall.size(); ++i) {
    j[fmt::format("recall@{}", m.recall_k[i])] = m.recall[i];
  }
  return j;
}

}  // namespace dsp
