#include "graph/link.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/lists.hpp"
#include "core/rng.hpp"
#include "graph/validate.hpp"

namespace dsp {
namespace {

// Keys are rng_key(seed, kLinkDomain, purpose): apart from the generators' and the sampler's.
constexpr uint64_t kLinkDomain = 0x6c696e6b73706c74ULL;  // "linksplt"
enum LinkPurpose : uint64_t { kPermute = 1, kValidNegatives, kTestNegatives };

using Pair = std::pair<int64_t, int64_t>;

// A uniformly random permutation of [0, n), Fisher-Yates with each swap from its own stream.
std::vector<int64_t> permutation(int64_t n, uint64_t key) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  for (int64_t i = n - 1; i > 0; --i) {
    std::swap(p[i], p[static_cast<int64_t>(RngStream(key, i).uniform_int(i + 1))]);
  }
  return p;
}

Array pair_array(std::vector<Pair> v) {
  std::sort(v.begin(), v.end());
  std::vector<int64_t> flat;
  flat.reserve(2 * v.size());
  for (const Pair& p : v) {
    flat.push_back(p.first);
    flat.push_back(p.second);
  }
  return Array::from_vector(std::move(flat), {static_cast<int64_t>(v.size()), 2});
}

// The distinct edges of g that may be held out: (src, dst, entry of row dst listing src); for a
// symmetric graph one per unordered pair (src < dst). Self loops go to `loops`.
struct Candidates {
  std::vector<Pair> pairs;
  std::vector<int64_t> entry;
  std::vector<Pair> loops;
};

// `loops`: u == v is a self loop (one id space); a relation between two types has none.
Candidates candidates(const Csr& g, bool undirected, bool loops = true) {
  Candidates c;
  const int64_t* p = g.rowptr();
  dispatch_index(g.index_dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* idx = g.indices.data<T>();
    for (int64_t v = 0; v < g.num_nodes; ++v) {
      for (int64_t j = p[v]; j < p[v + 1]; ++j) {
        const auto u = static_cast<int64_t>(idx[j]);
        if (loops && u == v) {
          c.loops.emplace_back(u, v);
        } else if (!undirected || u < v) {
          c.pairs.emplace_back(u, v);
          c.entry.push_back(j);
        }
      }
    }
  });
  return c;
}

// The entries of g not marked in `drop`, with their weights.
Csr without_entries(const Csr& g, const std::vector<bool>& drop) {
  Csr out;
  out.num_nodes = g.num_nodes;
  const int64_t n = g.num_nodes;
  const int64_t* p = g.rowptr();
  std::vector<int64_t> ptr(static_cast<size_t>(n) + 1, 0);
  for (int64_t v = 0; v < n; ++v) {
    int64_t kept = 0;
    for (int64_t j = p[v]; j < p[v + 1]; ++j) kept += !drop[j];
    ptr[v + 1] = ptr[v] + kept;
  }
  const int64_t m = ptr[n];
  out.indices = Array(g.index_dtype(), {m});
  if (g.has_weights()) out.weights = Array(DType::kFloat32, {m});
  dispatch_index(g.index_dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* idx = g.indices.data<T>();
    T* o = out.indices.mutable_data<T>();
    const float* w = g.has_weights() ? g.weights.data<float>() : nullptr;
    float* ow = w ? out.weights.mutable_data<float>() : nullptr;
    int64_t k = 0;
    for (int64_t j = 0; j < p[n]; ++j) {
      if (drop[j]) continue;
      o[k] = idx[j];
      if (w) ow[k] = w[j];
      ++k;
    }
  });
  out.indptr = Array::from_vector(std::move(ptr));
  return out;
}

// Where negatives are drawn: sources in [0, n_src), destinations in [0, n_dst); `taken` tells
// a pair that is no negative (an edge, a self pair); `undirected` writes a pair (min, max).
struct NegativeSpace {
  int64_t n_src = 0, n_dst = 0;
  bool undirected = false;
  std::function<bool(int64_t, int64_t)> taken;
};

// The space of a graph's own negatives: pairs u != v that are no edge of g (neither direction
// when undirected).
NegativeSpace graph_space(const Csr& g, bool undirected) {
  return {g.num_nodes, g.num_nodes, undirected, [&g, undirected](int64_t u, int64_t v) {
            return u == v || csr_has_entry(g, u, v) || (undirected && csr_has_entry(g, v, u));
          }};
}

// `count` distinct pairs of the space that pass `ok`, drawn from the stream `key`.
Array draw_negatives(const NegativeSpace& sp, int64_t count, uint64_t key,
                     const std::function<bool(int64_t, int64_t)>& ok, const char* split) {
  const uint64_t tries = 100 * static_cast<uint64_t>(count) + 1000;
  std::set<Pair> seen;
  std::vector<Pair> out;
  for (uint64_t i = 0; static_cast<int64_t>(out.size()) < count && i < tries; ++i) {
    RngStream s(key, i);
    auto u = static_cast<int64_t>(s.uniform_int(static_cast<uint64_t>(sp.n_src)));
    auto v = static_cast<int64_t>(s.uniform_int(static_cast<uint64_t>(sp.n_dst)));
    if (sp.undirected && u > v) std::swap(u, v);
    if (sp.taken(u, v)) continue;
    if (ok && !ok(u, v)) continue;
    if (seen.insert({u, v}).second) out.emplace_back(u, v);
  }
  DSP_CHECK_ARG(static_cast<int64_t>(out.size()) == count,
                "--link-negatives: found only {} of {} negative pairs for {} in {} draws (too few "
                "node pairs are not edges); lower --link-negatives",
                out.size(), count, split, tries);
  return pair_array(std::move(out));
}

// Per-positive negatives (OGB's ogbl-citation2): for each row (u, v) of `pos`, `k` distinct
// destinations w such that (u, w) is a pair of the space that passes `ok`, drawn from the
// positive's own stream; pairs (u, w), positive by positive.
Array draw_per_positive(const NegativeSpace& sp, const Array& pos, int64_t k, uint64_t key,
                        const std::function<bool(int64_t, int64_t)>& ok, const char* split) {
  const uint64_t tries = 100 * static_cast<uint64_t>(k) + 1000;
  const int64_t* p = pos.data<int64_t>();
  std::vector<int64_t> flat;
  flat.reserve(static_cast<size_t>(2 * pos.dim(0) * k));
  for (int64_t i = 0; i < pos.dim(0); ++i) {
    const int64_t u = p[2 * i];
    RngStream s(key, static_cast<uint64_t>(i));
    std::set<int64_t> seen;
    for (uint64_t t = 0; static_cast<int64_t>(seen.size()) < k && t < tries; ++t) {
      const auto w = static_cast<int64_t>(s.uniform_int(static_cast<uint64_t>(sp.n_dst)));
      if (sp.taken(u, w)) continue;
      if (ok && !ok(u, w)) continue;
      if (!seen.insert(w).second) continue;
      flat.push_back(u);
      flat.push_back(w);
    }
    DSP_CHECK_ARG(static_cast<int64_t>(seen.size()) == k,
                  "--link-negatives-per-positive: found only {} of {} negatives for {} row {} "
                  "(source {}) in {} draws; lower it",
                  seen.size(), k, split, i, u, tries);
  }
  return Array::from_vector(std::move(flat), {pos.dim(0) * k, 2});
}

}  // namespace

Array graph_edge_pairs(const Csr& g, bool undirected) {
  Candidates c = candidates(g, undirected);
  c.pairs.insert(c.pairs.end(), c.loops.begin(), c.loops.end());
  return pair_array(std::move(c.pairs));
}

void check_link_split(const LinkSplitOptions& o, const std::string& flag) {
  for (const auto& [name, f] : {std::pair{"train", o.train}, std::pair{"valid", o.valid},
                                std::pair{"test", o.test}}) {
    DSP_CHECK_ARG(std::isfinite(f) && f >= 0 && f <= 1, "{}: the {} fraction {} is outside [0, 1]",
                  flag, name, f);
  }
  DSP_CHECK_ARG(o.train > 0, "{}: the train fraction must be > 0 (the stored graph is made of "
                "the training edges)", flag);
  DSP_CHECK_ARG(o.train + o.valid + o.test <= 1 + 1e-9,
                "{}: train + valid + test fractions ({} + {} + {}) exceed 1", flag, o.train,
                o.valid, o.test);
  DSP_CHECK_ARG(o.negatives >= 0, "--link-negatives must be >= 0, got {}", o.negatives);
  DSP_CHECK_ARG(o.negatives_per_positive >= 0,
                "--link-negatives-per-positive must be >= 0, got {}", o.negatives_per_positive);
  DSP_CHECK_ARG(o.negatives == 0 || o.negatives_per_positive == 0,
                "--link-negatives (shared by a split's positives) and "
                "--link-negatives-per-positive exclude each other: give one");
}

LinkSplitOptions parse_link_split(const std::string& text, const std::string& flag) {
  std::vector<double> f;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    const std::optional<double> v = whole_double(item);
    DSP_CHECK_ARG(v.has_value(), "{}: expected three fractions such as 0.85,0.05,0.10, got '{}'",
                  flag, text);
    f.push_back(*v);
    start = comma + 1;
  }
  DSP_CHECK_ARG(f.size() == 3,
                "{}: expected three fractions (train,valid,test) such as 0.85,0.05,0.10, got '{}'",
                flag, text);
  LinkSplitOptions o;
  o.train = f[0];
  o.valid = f[1];
  o.test = f[2];
  check_link_split(o, flag);
  return o;
}

namespace {

// The candidates cut by the seeded permutation into train (after the self loops), valid and test
// (round(f * E) each, clamped in that order); `held(k)` is called for each held-out candidate k.
struct Cut {
  std::vector<Pair> train, valid, test;
  int64_t candidates = 0, dropped = 0;
};

Cut cut_candidates(const Candidates& c, const LinkSplitOptions& o,
                   const std::function<void(int64_t)>& held) {
  const auto e = static_cast<int64_t>(c.pairs.size());
  DSP_CHECK_ARG(e > 0, "--link-split: the graph has no edges (other than self loops) to split");
  auto share = [e](double f, int64_t left) {
    return std::min<int64_t>(left, std::llround(f * static_cast<double>(e)));
  };
  const int64_t n_train = share(o.train, e), n_valid = share(o.valid, e - n_train),
                n_test = share(o.test, e - n_train - n_valid);
  const std::vector<int64_t> order = permutation(e, rng_key(o.seed, kLinkDomain, kPermute));
  Cut cut;
  cut.train = c.loops;
  cut.candidates = e;
  cut.dropped = e - n_train - n_valid - n_test;
  for (int64_t i = 0; i < e; ++i) {
    const int64_t k = order[i];
    if (i < n_train) {
      cut.train.push_back(c.pairs[k]);
      continue;
    }
    if (i < n_train + n_valid) cut.valid.push_back(c.pairs[k]);
    if (i >= n_train + n_valid && i < n_train + n_valid + n_test) cut.test.push_back(c.pairs[k]);
    held(k);
  }
  return cut;
}

// Where a split's pairs go.
struct LinkArrays {
  Array *train, *valid, *test, *valid_neg, *test_neg;
};

// The cut's pairs into `out` and each held-out split's negatives from `space`; returns the
// negatives' count per split (per held-out edge with negatives_per_positive).
int64_t store_split(Cut& cut, const NegativeSpace& space, const LinkSplitOptions& o,
                    const LinkArrays& out, const std::function<bool(int64_t, int64_t)>& ok) {
  const auto n_valid = static_cast<int64_t>(cut.valid.size());
  const auto n_test = static_cast<int64_t>(cut.test.size());
  *out.train = pair_array(std::move(cut.train));
  if (n_valid > 0) *out.valid = pair_array(std::move(cut.valid));
  if (n_test > 0) *out.test = pair_array(std::move(cut.test));
  const int64_t per = o.negatives_per_positive;
  const int64_t m = per > 0            ? per
                    : o.negatives > 0 ? o.negatives
                                      : std::max<int64_t>({n_valid, n_test, 1});
  const struct {
    int64_t count;
    const Array* pos;
    Array* neg;
    uint64_t purpose;
    const char* name;
  } held[] = {{n_valid, out.valid, out.valid_neg, kValidNegatives, "link_valid"},
              {n_test, out.test, out.test_neg, kTestNegatives, "link_test"}};
  for (const auto& h : held) {
    if (h.count == 0) continue;
    const uint64_t key = rng_key(o.seed, kLinkDomain, h.purpose);
    *h.neg = per > 0 ? draw_per_positive(space, *h.pos, per, key, ok, h.name)
                     : draw_negatives(space, m, key, ok, h.name);
  }
  return m;
}

nlohmann::json split_record(const LinkSplitOptions& o, int64_t m, const Cut& cut) {
  return {{"train", o.train},
          {"valid", o.valid},
          {"test", o.test},
          {"seed", o.seed},
          {"negatives", m},
          {"negatives_per_positive", o.negatives_per_positive > 0},
          {"candidate_edges", cut.candidates},
          {"dropped_edges", cut.dropped}};
}

// Marks the entry of row `row` of g listing `id` in `drop`, when there is one.
void drop_entry(const Csr& g, int64_t row, int64_t id, std::vector<bool>& drop) {
  const int64_t* p = g.rowptr();
  dispatch_index(g.index_dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* idx = g.indices.data<T>();
    const T* at = std::lower_bound(idx + p[row], idx + p[row + 1], static_cast<T>(id));
    if (at != idx + p[row + 1] && *at == static_cast<T>(id)) drop[at - idx] = true;
  });
}

}  // namespace

void split_links(Dataset& ds, const LinkSplitOptions& o,
                 const std::function<bool(int64_t, int64_t)>& negative_ok) {
  check_link_split(o);
  const bool undirected = !ds.meta.directed;
  const Csr& full = ds.graph;
  std::vector<bool> drop(static_cast<size_t>(full.num_edges()), false);
  Cut cut;
  {
    const Candidates c = candidates(full, undirected);
    cut = cut_candidates(c, o, [&](int64_t k) {
      drop[c.entry[k]] = true;
      // the reverse entry: row src listing dst
      if (undirected) drop_entry(full, c.pairs[k].first, c.pairs[k].second, drop);
    });
  }
  const int64_t m = store_split(
      cut, graph_space(full, undirected), o,
      {&ds.link_train, &ds.link_valid, &ds.link_test, &ds.link_valid_neg, &ds.link_test_neg},
      negative_ok);
  ds.meta.link_negatives_per_positive = o.negatives_per_positive;
  ds.meta.extra["link_split"] = split_record(o, m, cut);
  ds.graph = without_entries(full, drop);
  ds.sync_meta();
}

void split_hetero_links(HeteroDataset& ds, const std::string& relation, const LinkSplitOptions& o,
                        const std::function<bool(int64_t, int64_t)>& negative_ok) {
  check_link_split(o);
  HeteroSchema& s = ds.schema;
  s.resolve(ds.name.empty() ? "heterogeneous dataset" : ds.name);
  const int r = s.relation_index(relation);
  std::string keys;
  for (const RelationInfo& ri : s.relations) keys += (keys.empty() ? "" : ", ") + ri.key();
  DSP_CHECK_ARG(r >= 0,
                "--link-relation: no relation '{}' in {} (a key, or a name only one "
                "relation has; relations: {})",
                relation, ds.name, keys);
  const RelationInfo rel = s.relations[r];
  const bool one_type = rel.src_type == rel.dst_type;
  const Csr full = ds.relations[r];
  const int rev = s.reverse_of(r);
  std::vector<bool> drop(static_cast<size_t>(full.num_edges()), false), drop_rev;
  if (rev >= 0) drop_rev.assign(static_cast<size_t>(ds.relations[rev].num_edges()), false);
  Cut cut;
  {
    const Candidates c = candidates(full, /*undirected=*/false, one_type);
    cut = cut_candidates(c, o, [&](int64_t k) {
      drop[c.entry[k]] = true;
      // the reverse relation's entry: row src (of rel's source type) listing dst
      if (rev >= 0) drop_entry(ds.relations[rev], c.pairs[k].first, c.pairs[k].second, drop_rev);
    });
  }
  const NegativeSpace space{s.node_types[rel.src_type].count, s.node_types[rel.dst_type].count,
                            false, [&full, one_type](int64_t u, int64_t v) {
                              return (one_type && u == v) || csr_has_entry(full, u, v);
                            }};
  const int64_t m = store_split(
      cut, space, o,
      {&ds.link_train, &ds.link_valid, &ds.link_test, &ds.link_valid_neg, &ds.link_test_neg},
      negative_ok);
  ds.link_negatives_per_positive = o.negatives_per_positive;
  ds.extra["link_split"] = split_record(o, m, cut);
  ds.extra["link_split"]["relation"] = rel.key();
  ds.relations[r] = without_entries(full, drop);
  if (rev >= 0) ds.relations[rev] = without_entries(ds.relations[rev], drop_rev);
  s.link_relation = rel.key();
  ds.sync_schema();
}

}  // namespace dsp
