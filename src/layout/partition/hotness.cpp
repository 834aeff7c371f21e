#include "layout/partition/hotness.hpp"

#include <algorithm>
#include <numeric>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace dsp {

std::vector<int64_t> top_k_by_score(const std::vector<int64_t>& score, int64_t begin, int64_t end,
                                    int64_t k) {
  DSP_CHECK_ARG(begin >= 0 && begin <= end && end <= static_cast<int64_t>(score.size()),
                "top_k_by_score: bad range [{}, {})", begin, end);
  k = std::clamp<int64_t>(k, 0, end - begin);
  std::vector<int64_t> ids(end - begin);
  std::iota(ids.begin(), ids.end(), begin);
  auto hotter = [&](int64_t a, int64_t b) {
    return score[a] != score[b] ? score[a] > score[b] : a < b;
  };
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), hotter);
  ids.resize(k);
  return ids;
}

namespace {

const Csr& graph_of(const CacheScoreInputs& in, const char* policy) {
  DSP_CHECK_ARG(in.graph != nullptr,
                "cache policy '{}' scores the whole graph: it is chosen at partition time", policy);
  return *in.graph;
}

class InDegree final : public StaticCachePolicy {
 public:
  const char* name() const override { return "in-degree"; }
  bool at_train_time() const override { return true; }
  std::vector<int64_t> scores(const CacheScoreInputs& in) const override {
    std::vector<int64_t> s(in.num_nodes);
    if (in.in_degree) {
      std::copy(in.in_degree, in.in_degree + in.num_nodes, s.begin());
    } else {
      const Csr& g = graph_of(in, name());
      for (int64_t v = 0; v < in.num_nodes; ++v) s[v] = g.degree(v);
    }
    return s;
  }
};

class OutDegree final : public StaticCachePolicy {
 public:
  const char* name() const override { return "out-degree"; }
  bool at_train_time() const override { return false; }
  std::vector<int64_t> scores(const CacheScoreInputs& in) const override {
    const Csr& g = graph_of(in, name());
    std::vector<int64_t> s(in.num_nodes, 0);
    dispatch_index(g.index_dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* idx = g.indices.data<T>();
      for (int64_t e = 0, m = g.num_edges(); e < m; ++e) ++s[idx[e]];
    });
    return s;
  }
};

class Presample final : public StaticCachePolicy {
 public:
  const char* name() const override { return "presample"; }
  bool at_train_time() const override { return false; }
  bool presamples() const override { return true; }
  std::vector<int64_t> scores(const CacheScoreInputs& in) const override {
    const Csr& g = graph_of(in, name());
    DSP_CHECK_ARG(static_cast<bool>(in.presample),
                  "cache policy 'presample' needs the sampler's visit-count hook");
    static const std::vector<int64_t> none;
    std::vector<int64_t> s = in.presample(g, in.train_ids ? *in.train_ids : none);
    DSP_CHECK(static_cast<int64_t>(s.size()) == in.num_nodes,
              "presample hook returned {} counts for {} nodes", s.size(), in.num_nodes);
    return s;
  }
};

class Random final : public StaticCachePolicy {
 public:
  const char* name() const override { return "random"; }
  bool at_train_time() const override { return true; }
  std::vector<int64_t> scores(const CacheScoreInputs& in) const override {
    std::vector<int64_t> s(in.num_nodes);
    const uint64_t key = rng_key(in.seed, 0x7261'6e64);  // "rand"
    for (int64_t v = 0; v < in.num_nodes; ++v) {
      s[v] = static_cast<int64_t>(RngStream(key, v).next_u64() >> 1);
    }
    return s;
  }
};

class NoCache final : public StaticCachePolicy {
 public:
  const char* name() const override { return "none"; }
  bool at_train_time() const override { return true; }
  bool caches() const override { return false; }
  std::vector<int64_t> scores(const CacheScoreInputs& in) const override {
    return std::vector<int64_t>(in.num_nodes, 0);
  }
};

}  // namespace

const StaticCachePolicy& static_cache_policy(const std::string& name) {
  static const InDegree in_degree;
  static const OutDegree out_degree;
  static const Presample presample;
  static const Random random;
  static const NoCache none;
  static const StaticCachePolicy* const all[] = {&in_degree, &out_degree, &presample, &random,
                                                 &none};
  for (const StaticCachePolicy* p : all)
    if (name == p->name()) return *p;
  DSP_THROW_T(InvalidArgument,
              "unknown cache policy '{}' (in-degree, out-degree, presample, random, none)", name);
}

void check_train_time_cache_policy(const std::string& name) {
  DSP_CHECK_ARG(static_cache_policy(name).at_train_time(),
                "cache policy '{}' is chosen at partition time (dsp partition --cache-policy ...): "
                "a job may choose or resize the cache only with in-degree, random or none",
                name);
}

std::vector<Array> train_time_cache_lists(const std::string& policy, double ratio,
                                          const std::vector<int64_t>& offsets,
                                          const int64_t* in_degree, int64_t num_nodes,
                                          uint64_t seed) {
  check_train_time_cache_policy(policy);
  const StaticCachePolicy& p = static_cache_policy(policy);
  CacheScoreInputs in;
  in.num_nodes = num_nodes;
  in.in_degree = in_degree;
  in.seed = seed;
  const std::vector<int64_t> score = p.scores(in);
  std::vector<Array> lists;
  for (size_t part = 0; part + 1 < offsets.size(); ++part) {
    const int64_t b = offsets[part], e = offsets[part + 1];
    const int64_t k = !p.caches() ? 0 : static_cast<int64_t>(ratio * (e - b));
    lists.push_back(Array::from_vector(top_k_by_score(score, b, e, k)));
  }
  return lists;
}

std::vector<int64_t> hotness_scores(const std::string& policy, const Csr& g,
                                    const std::vector<int64_t>& train_ids, uint64_t seed,
                                    const PresampleFn& presample) {
  CacheScoreInputs in;
  in.num_nodes = g.num_nodes;
  in.graph = &g;
  in.train_ids = &train_ids;
  in.seed = seed;
  in.presample = presample;
  return static_cache_policy(policy).scores(in);
}

double optimal_hit_rate(const std::vector<int64_t>& trace, int64_t num_nodes, int64_t capacity) {
  if (trace.empty()) return 0.0;
  std::vector<int64_t> freq(num_nodes, 0);
  for (int64_t v : trace) {
    DSP_CHECK_ARG(v >= 0 && v < num_nodes, "trace id {} out of range [0, {})", v, num_nodes);
    ++freq[v];
  }
  capacity = std::clamp<int64_t>(capacity, 0, num_nodes);
  std::nth_element(freq.begin(), freq.begin() + capacity, freq.end(), std::greater<int64_t>());
  int64_t hits = std::accumulate(freq.begin(), freq.begin() + capacity, int64_t{0});
  return static_cast<double>(hits) / static_cast<double>(trace.size());
}

double hit_rate(const std::vector<int64_t>& trace, int64_t num_nodes,
                const std::vector<int64_t>& cached) {
  if (trace.empty()) return 0.0;
  std::vector<uint8_t> in(num_nodes, 0);
  for (int64_t v : cached) {
    DSP_CHECK_ARG(v >= 0 && v < num_nodes, "cached id {} out of range [0, {})", v, num_nodes);
    in[v] = 1;
  }
  int64_t hits = 0;
  for (int64_t v : trace) {
    DSP_CHECK_ARG(v >= 0 && v < num_nodes, "trace id {} out of range [0, {})", v, num_nodes);
    hits += in[v];
  }
  return static_cast<double>(hits) / static_cast<double>(trace.size());
}

}  // namespace dsp
