#include "train/link.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "train/inference.hpp"
#include "train/trainer.hpp"

namespace dsp {

const OptionTable<EmbeddingOptions>& embedding_options_table() {
  using options::value;
  using T = EmbeddingOptions;
  // clang-format off
#define DSP_EMB(member) [](T& t) -> auto& { return t.member; }
  // clang-format on
  static const OptionTable<EmbeddingOptions> table = {
      value<T>("--embedding-dim", "embedding_dim",
               "learn an embedding of this many columns per node, concatenated after the "
               "features, partitioned across ranks and updated sparsely (default -1: --hidden "
               "columns on a dataset without features, none otherwise; 0: none)",
               DSP_EMB(dim)),
      value<T>("--embedding-optimizer", "embedding_optimizer",
               "the embeddings' sparse optimizer: adam (default) or adagrad", DSP_EMB(optimizer),
               "adam,adagrad"),
      value<T>("--embedding-lr", "embedding_lr", "the embeddings' learning rate (default 0.01)",
               DSP_EMB(lr)),
  };
#undef DSP_EMB
  return table;
}

std::string embedding_shard(const std::string& ckpt, int rank, int ranks) {
  return fmt::format("{}.embedding.{}-of-{}", ckpt, rank, ranks);
}

std::pair<int64_t, int64_t> share_of(int64_t n, int rank, int ranks) {
  return {n * rank / ranks, n * (rank + 1) / ranks};
}

LinkMetrics link_metrics(Communicator& comm, const std::vector<float>& pos,
                         const std::vector<float>& neg, const std::vector<int>& ks) {
  LinkMetrics m;
  m.k = ks;
  m.negatives = static_cast<int64_t>(neg.size());
  for (int k : ks) {
    DSP_CHECK_ARG(k <= m.negatives,
                  "--hits-k {} is larger than the split's {} negative edges: Hits@K ranks a "
                  "positive among them",
                  k, m.negatives);
  }
  std::vector<float> sorted = neg;
  std::sort(sorted.begin(), sorted.end(), std::greater<float>());
  // [hits per K..., reciprocal rank sum, positives]
  std::vector<double> sums(ks.size() + 2, 0.0);
  for (const float s : pos) {
    for (size_t j = 0; j < ks.size(); ++j) sums[j] += s > sorted[ks[j] - 1] ? 1 : 0;
    // Negatives above s: the prefix of the descending order that is > s; at least as high: >= s.
    const auto above =
        std::partition_point(sorted.begin(), sorted.end(), [s](float x) { return x > s; }) -
        sorted.begin();
    const auto at_least =
        std::partition_point(sorted.begin(), sorted.end(), [s](float x) { return x >= s; }) -
        sorted.begin();
    sums[ks.size()] += 1.0 / (1.0 + 0.5 * static_cast<double>(above + at_least));
  }
  sums[ks.size() + 1] = static_cast<double>(pos.size());
  OpOptions o;
  o.label = "link:metrics";
  o.host_buffers = true;
  comm.all_reduce(sums.data(), static_cast<int64_t>(sums.size()), DType::kFloat64, ReduceOp::kSum,
                  o);
  m.positives = static_cast<int64_t>(sums.back());
  const double n = std::max(1.0, sums.back());
  for (size_t j = 0; j < ks.size(); ++j) m.hits.push_back(sums[j] / n);
  m.mrr = sums[ks.size()] / n;
  return m;
}

std::vector<float> score_edges(Communicator& comm, const PartitionMeta& meta,
                               const std::vector<float>& h, int64_t width, const Array& edges,
                               int64_t b, int64_t e, Trainer& trainer) {
  const int64_t* p = edges.data<int64_t>();
  std::vector<int64_t> src, dst;
  for (int64_t i = b; i < e; ++i) {
    src.push_back(p[2 * i]);
    dst.push_back(p[2 * i + 1]);
  }
  const std::vector<float> hs = fetch_rows(comm, meta, h, width, src);
  const std::vector<float> hd = fetch_rows(comm, meta, h, width, dst);
  if (e == b) return {};
  return trainer.score(hs.data(), hd.data(), e - b);
}

LinkMetrics evaluate_link_split(Communicator& comm, const PartitionMeta& meta,
                                const std::vector<float>& h, int64_t width, const Array& pos,
                                const Array& neg, const std::vector<int>& ks, Trainer& trainer) {
  const auto [pb, pe] = share_of(pos.dim(0), comm.rank(), comm.size());
  const std::vector<float> ps = score_edges(comm, meta, h, width, pos, pb, pe, trainer);
  const auto [nb, ne] = share_of(neg.dim(0), comm.rank(), comm.size());
  const std::vector<float> mine = score_edges(comm, meta, h, width, neg, nb, ne, trainer);
  std::vector<float> ns(static_cast<size_t>(neg.dim(0)), 0.0f);
  std::copy(mine.begin(), mine.end(), ns.begin() + nb);
  OpOptions o;
  o.label = "link:negative_scores";
  o.host_buffers = true;
  // Every entry is one rank's score plus exact zeros from the others.
  comm.all_reduce(ns.data(), static_cast<int64_t>(ns.size()), DType::kFloat32, ReduceOp::kSum, o);
  return link_metrics(comm, ps, ns, ks);
}

}  // namespace dsp
