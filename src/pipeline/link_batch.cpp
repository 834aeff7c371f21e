#include "pipeline/link_batch.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace dsp {

namespace {
// The "layer" of the negatives' key: apart from the sampler's layers and the evaluation's draws.
constexpr uint64_t kNegatives = 0x4e4547;  // "NEG"
// In-degree^0.75 (word2vec's unigram exponent).
constexpr double kUnigramPower = 0.75;
}  // namespace

const Names<TaskKind>& names_of(TaskKind) {
  static const Names<TaskKind> n("task", {{TaskKind::kNode, "node"}, {TaskKind::kLink, "link"}});
  return n;
}

const Names<NegativeKind>& names_of(NegativeKind) {
  using N = NegativeKind;
  static const Names<N> n(
      "negative sampler",
      {{N::kUniform, "uniform"}, {N::kUnigram, "unigram"}, {N::kPairs, "pairs"}});
  return n;
}

const Names<ExcludeKind>& names_of(ExcludeKind) {
  using E = ExcludeKind;
  static const Names<E> n(
      "edge exclusion",
      {{E::kAuto, "auto"}, {E::kNone, "none"}, {E::kSelf, "self"}, {E::kReverse, "reverse"}});
  return n;
}

void LinkOptions::validate() const {
  DSP_CHECK_ARG(neg_ratio >= 1 && neg_ratio <= 4096,
                "--neg-ratio must lie in [1, 4096] (negatives per positive edge), got {}",
                neg_ratio);
  DSP_CHECK_ARG(!hits_k.empty(), "--hits-k needs at least one K");
  for (int k : hits_k) DSP_CHECK_ARG(k >= 1, "--hits-k: every K must be >= 1, got {}", k);
  for (int k : recall_k) DSP_CHECK_ARG(k >= 1, "--recall-k: every K must be >= 1, got {}", k);
}

const OptionTable<LinkOptions>& link_options_table() {
  using options::value;
  using T = LinkOptions;
  // clang-format off
#define DSP_LINK(member) [](T& t) -> auto& { return t.member; }
  // clang-format on
  static const OptionTable<LinkOptions> table = {
      value<T>("--task", "task",
               "node (default: classify nodes) or link (predict edges: the dataset's "
               "link_train/valid/test edges, Hits@K, MRR and ROC-AUC)",
               DSP_LINK(task)),
      value<T>("--neg-ratio", "neg_ratio", "link: negatives per positive edge (default 1)",
               DSP_LINK(neg_ratio)),
      value<T>("--negatives", "negatives",
               "link: a positive (u, v)'s negatives (u, w), w uniform over the nodes (default) or "
               "unigram (in-degree to the power 0.75); or pairs (w, x) with both ends uniform "
               "(PyG's negative_sampling, DGL's GlobalUniform; existing edges are not skipped)",
               DSP_LINK(negatives)),
      value<T>("--exclude", "exclude",
               "link: edges a batch must not see while it samples: self (its positive edges), "
               "reverse (also their reverse edges), none, or auto (default: reverse on an "
               "undirected dataset, else self)",
               DSP_LINK(exclude)),
      value<T>("--hits-k", "hits_k",
               "link: report Hits@K for these K (default 50); the first selects the best epoch "
               "(unless --metric rocauc)",
               DSP_LINK(hits_k)),
      value<T>("--recall-k", "recall_k",
               "link: also report Recall@K for these K (recommendation: each source's held-out "
               "destinations ranked among every node of the relation's destination type, or "
               "of a homogeneous graph, its training destinations (and there itself and, "
               "undirected, its training neighbours) left out; default none)",
               DSP_LINK(recall_k)),
  };
#undef DSP_LINK
  return table;
}

LinkBatcher::LinkBatcher(const PartitionData& part, const LinkOptions& opts, uint64_t seed,
                         bool undirected)
    : part_(part), opts_(opts), seed_(seed), num_nodes_(part.meta.num_nodes) {
  DSP_CHECK_FORMAT(part.link_train.defined(),
                   "{}: the partition has no link_train.npy in part {}: link prediction needs "
                   "training edges (dsp convert --link-split, dsp generate --link-split, or the "
                   "dataset's link_train.npy)",
                   part.dir, part.part);
  edges_ = part.link_train.dim(0);
  using E = ExcludeKind;
  exclude_ = opts.exclude == E::kAuto ? (undirected ? E::kReverse : E::kSelf) : opts.exclude;
  if (part.meta.hetero) {
    init_typed(part.dir);
    return;
  }
  if (opts.negatives == NegativeKind::kUnigram) {
    set_unigram(part.in_degree.data<int64_t>(), "every node has in-degree 0");
  }
}

// The cumulative in-degree^0.75 of the negatives' candidates: every node, or the link relation's
// destination type (dst_pool_, its in-degrees `deg` through that relation).
void LinkBatcher::set_unigram(const int64_t* deg, const std::string& none) {
  const int64_t n = dst_pool_.empty() ? num_nodes_ : static_cast<int64_t>(dst_pool_.size());
  cdf_.resize(static_cast<size_t>(n));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = dst_pool_.empty() ? i : dst_pool_[i];
    sum += std::pow(static_cast<double>(deg[v]), kUnigramPower);
    cdf_[i] = sum;
  }
  DSP_CHECK_FORMAT(sum > 0, "{}: --negatives unigram: {}", part_.dir, none);
}

void LinkBatcher::init_typed(const std::string& dir) {
  const HeteroLayout& h = *part_.meta.hetero;
  const HeteroSchema& s = h.schema;
  DSP_CHECK_FORMAT(s.link >= 0,
                   "{}: the heterogeneous partition names no link_relation: link prediction on a "
                   "typed graph predicts one relation split for it (dsp generate hetero "
                   "--link-split, --link-relation)",
                   dir);
  rel_ = s.link;
  rev_ = s.reverse_of(rel_);
  const RelationInfo& r = s.relations[rel_];
  if (opts_.exclude == ExcludeKind::kAuto) {
    exclude_ = rev_ >= 0 ? ExcludeKind::kReverse : ExcludeKind::kSelf;
  }
  DSP_CHECK_ARG(exclude_ != ExcludeKind::kReverse || rev_ >= 0,
                "--exclude reverse: relation {} of {} has no reverse relation ({}___rev_{}___{}); "
                "use self or none, or add the reverses to the dataset",
                r.key(), dir, r.dst, r.name, r.src);
  auto pool = [&h](int t) {
    std::vector<int64_t> out;
    const int T = h.num_types();
    for (int p = 0; p < h.parts; ++p) {
      const size_t slot = static_cast<size_t>(p) * T + t;
      for (int64_t v = h.bounds[slot]; v < h.bounds[slot + 1]; ++v) out.push_back(v);
    }
    return out;
  };
  dst_pool_ = pool(r.dst_type);
  if (opts_.negatives == NegativeKind::kPairs) src_pool_ = pool(r.src_type);
  DSP_CHECK_FORMAT(!dst_pool_.empty(), "{}: the link relation's destination type {} has no nodes",
                   dir, r.dst);
  if (opts_.negatives == NegativeKind::kUnigram) {  // in-degrees through the link relation
    const std::vector<int64_t> deg = link_destination_counts(dir, part_.meta);
    set_unigram(deg.data(), fmt::format("no node of {} has a training edge of {}", r.dst, r.key()));
  }
}

std::vector<int64_t> LinkBatcher::edge_indices() const {
  std::vector<int64_t> v(static_cast<size_t>(edges_));
  for (int64_t i = 0; i < edges_; ++i) v[i] = i;
  return v;
}

int64_t LinkBatcher::draw_negative(uint64_t key, uint64_t subject, int j) const {
  RngStream r(key, subject, static_cast<uint32_t>(j));
  const int64_t n = dst_pool_.empty() ? num_nodes_ : static_cast<int64_t>(dst_pool_.size());
  int64_t i = 0;
  if (cdf_.empty()) {
    i = static_cast<int64_t>(r.uniform_int(static_cast<uint64_t>(n)));
  } else {
    const double x = r.uniform01() * cdf_.back();
    i = std::min<int64_t>(std::upper_bound(cdf_.begin(), cdf_.end(), x) - cdf_.begin(), n - 1);
  }
  return dst_pool_.empty() ? i : dst_pool_[i];
}

// --negatives pairs: both ends from the negative's own stream, its first draw the source, its
// second the destination (on a typed graph from the link relation's two types).
std::pair<int64_t, int64_t> LinkBatcher::draw_pair(uint64_t key, uint64_t subject, int j) const {
  RngStream r(key, subject, static_cast<uint32_t>(j));
  if (dst_pool_.empty()) {
    const auto w = static_cast<int64_t>(r.uniform_int(static_cast<uint64_t>(num_nodes_)));
    return {w, static_cast<int64_t>(r.uniform_int(static_cast<uint64_t>(num_nodes_)))};
  }
  const int64_t w = src_pool_[r.uniform_int(src_pool_.size())];
  return {w, dst_pool_[r.uniform_int(dst_pool_.size())]};
}

LinkBatch LinkBatcher::make(const std::vector<int64_t>& edges, int64_t epoch, int64_t batch) const {
  LinkBatch out;
  std::unordered_map<int64_t, int64_t> pos;
  pos.reserve(edges.size() * static_cast<size_t>(2 + opts_.neg_ratio));
  auto seed_of = [&](int64_t v) {
    auto [it, fresh] = pos.emplace(v, static_cast<int64_t>(out.seeds.size()));
    if (fresh) out.seeds.push_back(v);
    return it->second;
  };
  auto add = [&](int64_t s, int64_t d, float label) {
    out.pairs.src.push_back(s);
    out.pairs.dst.push_back(d);
    out.pairs.label.push_back(label);
  };
  const int64_t* e = part_.link_train.data<int64_t>();
  const uint64_t key =
      rng_key(seed_, static_cast<uint64_t>(epoch), static_cast<uint64_t>(batch), kNegatives);
  for (int64_t i : edges) {
    const int64_t u = e[2 * i], v = e[2 * i + 1];
    const int64_t su = seed_of(u);
    add(su, seed_of(v), 1.0f);
    exclude(out, u, v);
    const uint64_t subject =
        static_cast<uint64_t>(u) * static_cast<uint64_t>(num_nodes_) + static_cast<uint64_t>(v);
    for (int j = 0; j < opts_.neg_ratio; ++j) {
      if (opts_.negatives == NegativeKind::kPairs) {
        const auto [w, x] = draw_pair(key, subject, j);
        add(seed_of(w), seed_of(x), 0.0f);
      } else {
        add(su, seed_of(draw_negative(key, subject, j)), 0.0f);
      }
    }
  }
  return out;
}

// The exclusions of positive u -> v: itself (of the link relation on a typed graph) and, with
// "reverse", v -> u (of the reverse relation there).
void LinkBatcher::exclude(LinkBatch& out, int64_t u, int64_t v) const {
  CollectiveSampler::ExcludedEdges& ex = out.exclude;
  if (exclude_ == ExcludeKind::kNone) return;
  ex.dst.push_back(v);
  ex.src.push_back(u);
  if (rel_ >= 0) ex.rel.push_back(rel_);
  if (exclude_ != ExcludeKind::kReverse) return;
  ex.dst.push_back(u);
  ex.src.push_back(v);
  if (rel_ >= 0) ex.rel.push_back(rev_);
}

}  // namespace dsp
