#include "train/link.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>

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
               "the embeddings' sparse optimizer: adam (default) or adagrad", DSP_EMB(optimizer)),
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

double LinkMetrics::selected(bool rocauc) const {
  if (rocauc) return auc;
  return hits.empty() || per_positive > 0 ? mrr : hits.front();
}

std::string link_selection(bool rocauc, int64_t per_positive, const std::vector<int>& ks) {
  if (rocauc) return "rocauc";
  return ks.empty() || per_positive > 0 ? "mrr" : fmt::format("hits@{}", ks.front());
}

namespace {

// OGB's rank of score s among n negatives: 1 + (#above + #at least as high) / 2, from the counts.
double ogb_rank(int64_t above, int64_t at_least) {
  return 1.0 + 0.5 * static_cast<double>(above + at_least);
}

// A positive's share of `n` negatives it beats, ties counting half (its term of the Mann-Whitney
// statistic: the mean over positives is scikit-learn's roc_auc_score of positives and negatives).
double auc_term(int64_t above, int64_t at_least, int64_t n) {
  return n == 0 ? 0.0 : (static_cast<double>(n - at_least) + 0.5 * (at_least - above)) / n;
}

// A split's per-positive terms summed over this rank's positives, then over every rank: the
// positives counted for each K, the reciprocal ranks, the AUC terms and the positives.
struct MetricSums {
  std::vector<double> hits;  // per K
  double reciprocal = 0, auc = 0, positives = 0;

  explicit MetricSums(size_t ks) : hits(ks, 0.0) {}
  // One positive with `above` of `n` negatives scoring higher and `at_least` as high or higher
  // (its Hits@K counted by the caller: the conventions differ).
  void add(int64_t above, int64_t at_least, int64_t n) {
    reciprocal += 1.0 / ogb_rank(above, at_least);
    auc += auc_term(above, at_least, n);
    positives += 1;
  }
  // Every rank's sums (one all_reduce) as the means in `m`.
  LinkMetrics reduce(Communicator& comm, LinkMetrics m) const {
    std::vector<double> v = hits;
    v.insert(v.end(), {reciprocal, auc, positives});
    OpOptions o;
    o.label = "link:metrics";
    o.host_buffers = true;
    comm.all_reduce(v.data(), static_cast<int64_t>(v.size()), DType::kFloat64, ReduceOp::kSum, o);
    const size_t nk = hits.size();
    m.positives = static_cast<int64_t>(v[nk + 2]);
    const double n = std::max(1.0, v[nk + 2]);
    for (size_t j = 0; j < nk; ++j) m.hits.push_back(v[j] / n);
    m.mrr = v[nk] / n;
    m.auc = v[nk + 1] / n;
    return m;
  }
};

// Adds positives pos[0, n) ranked each against its own `per` negatives neg[i per, (i + 1) per).
void add_per_positive(const float* pos, const float* neg, int64_t n, int64_t per,
                      const std::vector<int>& ks, MetricSums& sums) {
  for (int64_t i = 0; i < n; ++i) {
    int64_t above = 0, at_least = 0;
    for (int64_t j = 0; j < per; ++j) {
      const float x = neg[i * per + j];
      above += x > pos[i];
      at_least += x >= pos[i];
    }
    const double rank = ogb_rank(above, at_least);
    for (size_t j = 0; j < ks.size(); ++j) sums.hits[j] += rank <= ks[j] ? 1 : 0;
    sums.add(above, at_least, per);
  }
}

}  // namespace

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
  MetricSums sums(ks.size());
  for (const float s : pos) {
    for (size_t j = 0; j < ks.size(); ++j) sums.hits[j] += s > sorted[ks[j] - 1] ? 1 : 0;
    // Negatives above s: the prefix of the descending order that is > s; at least as high: >= s.
    const auto above =
        std::partition_point(sorted.begin(), sorted.end(), [s](float x) { return x > s; }) -
        sorted.begin();
    const auto at_least =
        std::partition_point(sorted.begin(), sorted.end(), [s](float x) { return x >= s; }) -
        sorted.begin();
    sums.add(above, at_least, m.negatives);
  }
  return sums.reduce(comm, std::move(m));
}

namespace {
// --hits-k K beyond each positive's own negatives: InvalidArgument.
void check_per_positive_k(int64_t per_positive, const std::vector<int>& ks) {
  for (int k : ks) {
    DSP_CHECK_ARG(k <= per_positive,
                  "--hits-k {} is larger than the {} negatives of each held-out positive: Hits@K "
                  "ranks a positive among its own negatives",
                  k, per_positive);
  }
}
}  // namespace

LinkMetrics link_metrics_per_positive(Communicator& comm, const std::vector<float>& pos,
                                      const std::vector<float>& neg, int64_t per_positive,
                                      const std::vector<int>& ks) {
  check_per_positive_k(per_positive, ks);
  DSP_CHECK_ARG(static_cast<int64_t>(neg.size()) == static_cast<int64_t>(pos.size()) * per_positive,
                "link metrics: {} negative scores for {} positives of {} negatives each",
                neg.size(), pos.size(), per_positive);
  LinkMetrics m;
  m.k = ks;
  m.per_positive = per_positive;
  m.negatives = static_cast<int64_t>(neg.size());
  MetricSums sums(ks.size());
  add_per_positive(pos.data(), neg.data(), static_cast<int64_t>(pos.size()), per_positive, ks,
                   sums);
  return sums.reduce(comm, std::move(m));
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
  return trainer.eval().score(hs.data(), hd.data(), e - b);
}

namespace {

// Scored pairs a rank holds at once when negatives are per positive: its positives go chunk by
// chunk (ogbl-citation2: 1,000 negatives for each of 86k positives a split).
constexpr int64_t kScoredPairsPerChunk = int64_t{1} << 20;

LinkMetrics evaluate_per_positive(Communicator& comm, const PartitionMeta& meta,
                                  const std::vector<float>& h, int64_t width, const Array& pos,
                                  const Array& neg, int64_t per, const std::vector<int>& ks,
                                  Trainer& trainer) {
  check_per_positive_k(per, ks);  // the rows' count was checked when the partition loaded
  const auto [pb, pe] = share_of(pos.dim(0), comm.rank(), comm.size());
  // Every rank takes part in each round's row fetches: as many rounds as the largest share needs.
  const int64_t most = (pos.dim(0) + comm.size() - 1) / comm.size();
  const int64_t chunk = std::max<int64_t>(1, kScoredPairsPerChunk / (per + 1));
  MetricSums sums(ks.size());
  for (int64_t r = 0; r * chunk < most; ++r) {
    const int64_t b = std::min(pb + r * chunk, pe), e = std::min(b + chunk, pe);
    const std::vector<float> ps = score_edges(comm, meta, h, width, pos, b, e, trainer);
    const std::vector<float> ns = score_edges(comm, meta, h, width, neg, b * per, e * per, trainer);
    add_per_positive(ps.data(), ns.data(), e - b, per, ks, sums);
  }
  LinkMetrics m;
  m.k = ks;
  m.per_positive = per;
  m.negatives = neg.dim(0);
  return sums.reduce(comm, std::move(m));
}

}  // namespace

std::vector<double> source_recall(const std::vector<float>& scores,
                                  const std::vector<char>& excluded,
                                  const std::vector<int64_t>& held, const std::vector<int>& ks) {
  std::vector<float> kept;  // the ranked candidates' scores, descending
  kept.reserve(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) {
    if (!excluded[i]) kept.push_back(scores[i]);
  }
  std::sort(kept.begin(), kept.end(), std::greater<float>());
  std::vector<double> out(ks.size(), 0.0);
  for (const int64_t c : held) {
    const float s = scores[static_cast<size_t>(c)];
    const auto above =
        std::partition_point(kept.begin(), kept.end(), [s](float x) { return x > s; }) -
        kept.begin();
    for (size_t j = 0; j < ks.size(); ++j) out[j] += above < ks[j] ? 1 : 0;
  }
  for (double& r : out) r /= std::max<double>(1, static_cast<double>(held.size()));
  return out;
}

namespace {

// The held-out destinations of each source this rank owns, in the split's order of sources.
std::vector<std::pair<int64_t, std::vector<int64_t>>> owned_sources(const Array& pos, int64_t b,
                                                                    int64_t e) {
  std::unordered_map<int64_t, size_t> at;
  std::vector<std::pair<int64_t, std::vector<int64_t>>> out;
  const int64_t* p = pos.data<int64_t>();
  for (int64_t i = 0; i < pos.dim(0); ++i) {
    const int64_t u = p[2 * i];
    if (u < b || u >= e) continue;
    auto [it, fresh] = at.emplace(u, out.size());
    if (fresh) out.push_back({u, {}});
    out[it->second].second.push_back(p[2 * i + 1]);
  }
  return out;
}

// The training destinations of source u: its rows of the part's link_train (sorted by source).
std::vector<int64_t> training_destinations(const Array& train, int64_t u) {
  std::vector<int64_t> out;
  if (!train.defined()) return out;
  const int64_t* p = train.data<int64_t>();
  int64_t lo = 0, hi = train.dim(0);
  while (lo < hi) {  // the first row of source >= u
    const int64_t mid = (lo + hi) / 2;
    if (p[2 * mid] < u) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  for (int64_t i = lo; i < train.dim(0) && p[2 * i] == u; ++i) out.push_back(p[2 * i + 1]);
  return out;
}

}  // namespace

std::vector<double> link_recall(Communicator& comm, const PartitionData& part,
                                const std::vector<float>& h, int64_t width, const Array& pos,
                                const std::vector<int64_t>& candidates, const std::vector<int>& ks,
                                Trainer& trainer, RecallExclusions ex) {
  const int64_t b = part.meta.offsets[comm.rank()], e = part.meta.offsets[comm.rank() + 1];
  const std::vector<float> rows = fetch_rows(comm, part.meta, h, width, candidates);
  std::unordered_map<int64_t, int64_t> index;  // candidate id -> its index
  for (size_t i = 0; i < candidates.size(); ++i) index.emplace(candidates[i], i);
  const auto n = static_cast<int64_t>(candidates.size());
  std::vector<double> sums(ks.size() + 1, 0.0);  // recall per K summed, then the sources
  std::vector<float> src(static_cast<size_t>(n * width));
  for (const auto& [u, dsts] : owned_sources(pos, b, e)) {
    for (int64_t i = 0; i < n; ++i) {
      std::copy(h.begin() + (u - b) * width, h.begin() + (u - b + 1) * width,
                src.begin() + i * width);
    }
    const std::vector<float> scores = trainer.eval().score(src.data(), rows.data(), n);
    std::vector<char> excluded(static_cast<size_t>(n), 0);
    auto exclude = [&](int64_t v) {
      const auto it = index.find(v);
      if (it != index.end()) excluded[it->second] = 1;
    };
    for (const int64_t v : training_destinations(part.link_train, u)) exclude(v);
    if (ex.self) exclude(u);
    if (ex.row_neighbours) {
      const int64_t* ip = part.patch.rowptr();
      for (int64_t k = ip[u - b]; k < ip[u - b + 1]; ++k) exclude(part.patch.indices.int_at(k));
    }
    std::vector<int64_t> held;
    for (const int64_t v : dsts) {
      const auto it = index.find(v);
      if (it != index.end()) held.push_back(it->second);
    }
    const std::vector<double> r = source_recall(scores, excluded, held, ks);
    for (size_t j = 0; j < ks.size(); ++j) sums[j] += r[j];
    sums[ks.size()] += 1;
  }
  OpOptions o;
  o.label = "link:recall";
  o.host_buffers = true;
  comm.all_reduce(sums.data(), static_cast<int64_t>(sums.size()), DType::kFloat64, ReduceOp::kSum,
                  o);
  std::vector<double> out(ks.size());
  for (size_t j = 0; j < ks.size(); ++j) out[j] = sums[j] / std::max(1.0, sums[ks.size()]);
  return out;
}

LinkMetrics evaluate_link_split(Communicator& comm, const PartitionMeta& meta,
                                const std::vector<float>& h, int64_t width, const Array& pos,
                                const Array& neg, int64_t per_positive, const std::vector<int>& ks,
                                Trainer& trainer) {
  if (per_positive > 0) {
    return evaluate_per_positive(comm, meta, h, width, pos, neg, per_positive, ks, trainer);
  }
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
