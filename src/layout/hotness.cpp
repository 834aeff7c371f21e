#include "layout/hotness.hpp"

#include <algorithm>
#include <numeric>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace dsp {

CachePolicy parse_cache_policy(const std::string& name) {
  if (name == "in-degree") return CachePolicy::kInDegree;
  if (name == "out-degree") return CachePolicy::kOutDegree;
  if (name == "presample") return CachePolicy::kPresample;
  if (name == "random") return CachePolicy::kRandom;
  if (name == "none") return CachePolicy::kNone;
  DSP_THROW_T(InvalidArgument,
              "unknown cache policy '{}' (in-degree, out-degree, presample, random, none)", name);
}

const char* cache_policy_name(CachePolicy p) {
  switch (p) {
    case CachePolicy::kInDegree: return "in-degree";
    case CachePolicy::kOutDegree: return "out-degree";
    case CachePolicy::kPresample: return "presample";
    case CachePolicy::kRandom: return "random";
    case CachePolicy::kNone: return "none";
  }
  return "?";
}

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

std::vector<int64_t> hotness_scores(CachePolicy policy, const Csr& g,
                                    const std::vector<int64_t>& train_ids, uint64_t seed,
                                    const PresampleFn& presample) {
  const int64_t n = g.num_nodes;
  std::vector<int64_t> score(n, 0);
  switch (policy) {
    case CachePolicy::kInDegree:
      for (int64_t v = 0; v < n; ++v) score[v] = g.degree(v);
      break;
    case CachePolicy::kOutDegree:
      dispatch_index(g.index_dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* idx = g.indices.data<T>();
        for (int64_t e = 0, m = g.num_edges(); e < m; ++e) ++score[idx[e]];
      });
      break;
    case CachePolicy::kPresample:
      DSP_CHECK_ARG(static_cast<bool>(presample),
                    "cache policy 'presample' needs the sampler's visit-count hook");
      score = presample(g, train_ids);
      DSP_CHECK(static_cast<int64_t>(score.size()) == n,
                "presample hook returned {} counts for {} nodes", score.size(), n);
      break;
    case CachePolicy::kRandom: {
      uint64_t key = rng_key(seed, 0x7261'6e64);  // "rand"
      for (int64_t v = 0; v < n; ++v) {
        score[v] = static_cast<int64_t>(RngStream(key, v).next_u64() >> 1);
      }
      break;
    }
    case CachePolicy::kNone:
      break;
  }
  return score;
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
