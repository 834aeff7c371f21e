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

Candidates candidates(const Csr& g, bool undirected) {
  Candidates c;
  const int64_t* p = g.rowptr();
  dispatch_index(g.index_dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* idx = g.indices.data<T>();
    for (int64_t v = 0; v < g.num_nodes; ++v) {
      for (int64_t j = p[v]; j < p[v + 1]; ++j) {
        const auto u = static_cast<int64_t>(idx[j]);
        if (u == v) {
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

// `count` distinct pairs u != v that are no edge of g (neither direction when undirected) and
// pass `ok`, drawn from the stream `key`; written (min, max) when undirected.
Array draw_negatives(const Csr& g, bool undirected, int64_t count, uint64_t key,
                     const std::function<bool(int64_t, int64_t)>& ok, const char* split) {
  const auto n = static_cast<uint64_t>(g.num_nodes);
  const uint64_t tries = 100 * static_cast<uint64_t>(count) + 1000;
  std::set<Pair> seen;
  std::vector<Pair> out;
  for (uint64_t i = 0; static_cast<int64_t>(out.size()) < count && i < tries; ++i) {
    RngStream s(key, i);
    auto u = static_cast<int64_t>(s.uniform_int(n)), v = static_cast<int64_t>(s.uniform_int(n));
    if (undirected && u > v) std::swap(u, v);
    if (u == v || csr_has_entry(g, u, v) || (undirected && csr_has_entry(g, v, u))) continue;
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
// destinations w != u such that (u, w) is no edge of g (neither direction when undirected) and
// passes `ok`, drawn from the positive's own stream; pairs (u, w), positive by positive.
Array draw_per_positive(const Csr& g, bool undirected, const Array& pos, int64_t k, uint64_t key,
                        const std::function<bool(int64_t, int64_t)>& ok, const char* split) {
  const auto n = static_cast<uint64_t>(g.num_nodes);
  const uint64_t tries = 100 * static_cast<uint64_t>(k) + 1000;
  const int64_t* p = pos.data<int64_t>();
  std::vector<int64_t> flat;
  flat.reserve(static_cast<size_t>(2 * pos.dim(0) * k));
  for (int64_t i = 0; i < pos.dim(0); ++i) {
    const int64_t u = p[2 * i];
    RngStream s(key, static_cast<uint64_t>(i));
    std::set<int64_t> seen;
    for (uint64_t t = 0; static_cast<int64_t>(seen.size()) < k && t < tries; ++t) {
      const auto w = static_cast<int64_t>(s.uniform_int(n));
      if (w == u || csr_has_entry(g, u, w) || (undirected && csr_has_entry(g, w, u))) continue;
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

void split_links(Dataset& ds, const LinkSplitOptions& o,
                 const std::function<bool(int64_t, int64_t)>& negative_ok) {
  check_link_split(o);
  const bool undirected = !ds.meta.directed;
  const Csr& full = ds.graph;
  Candidates c = candidates(full, undirected);
  const auto e = static_cast<int64_t>(c.pairs.size());
  DSP_CHECK_ARG(e > 0, "--link-split: the graph has no edges (other than self loops) to split");
  auto share = [e](double f, int64_t left) {
    return std::min<int64_t>(left, std::llround(f * static_cast<double>(e)));
  };
  const int64_t n_train = share(o.train, e), n_valid = share(o.valid, e - n_train),
                n_test = share(o.test, e - n_train - n_valid);
  const std::vector<int64_t> order = permutation(e, rng_key(o.seed, kLinkDomain, kPermute));
  std::vector<bool> drop(static_cast<size_t>(full.num_edges()), false);
  std::vector<Pair> train = c.loops, valid, test;
  for (int64_t i = 0; i < e; ++i) {
    const int64_t k = order[i];
    const Pair pr = c.pairs[k];
    if (i < n_train) {
      train.push_back(pr);
      continue;
    }
    if (i < n_train + n_valid) valid.push_back(pr);
    if (i >= n_train + n_valid && i < n_train + n_valid + n_test) test.push_back(pr);
    drop[c.entry[k]] = true;
    if (undirected) {  // the reverse entry: row src listing dst
      const int64_t* p = full.rowptr();
      dispatch_index(full.index_dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* idx = full.indices.data<T>();
        drop[std::lower_bound(idx + p[pr.first], idx + p[pr.first + 1],
                              static_cast<T>(pr.second)) -
             idx] = true;
      });
    }
  }
  c = Candidates();
  ds.link_train = pair_array(std::move(train));
  if (n_valid > 0) ds.link_valid = pair_array(std::move(valid));
  if (n_test > 0) ds.link_test = pair_array(std::move(test));
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
  } held[] = {{n_valid, &ds.link_valid, &ds.link_valid_neg, kValidNegatives, "link_valid"},
              {n_test, &ds.link_test, &ds.link_test_neg, kTestNegatives, "link_test"}};
  for (const auto& h : held) {
    if (h.count == 0) continue;
    const uint64_t key = rng_key(o.seed, kLinkDomain, h.purpose);
    *h.neg = per > 0 ? draw_per_positive(full, undirected, *h.pos, per, key, negative_ok, h.name)
                     : draw_negatives(full, undirected, m, key, negative_ok, h.name);
  }
  ds.meta.link_negatives_per_positive = per;
  ds.graph = without_entries(full, drop);
  ds.meta.extra["link_split"] = {{"train", o.train},
                                 {"valid", o.valid},
                                 {"test", o.test},
                                 {"seed", o.seed},
                                 {"negatives", m},
                                 {"negatives_per_positive", per > 0},
                                 {"candidate_edges", e},
                                 {"dropped_edges", e - n_train - n_valid - n_test}};
  ds.sync_meta();
}

}  // namespace dsp
