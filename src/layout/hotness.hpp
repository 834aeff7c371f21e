#pragma once
// Which nodes a rank caches: hotness policies of the seed systems, and GNNLab's optimal oracle.
//   in-degree   DSP's default: nodes with the most in-neighbours are sampled most often
//   out-degree  PaGraph: nodes that appear in the most adjacency lists
//   presample   GNNLab PreSC#K: visit counts of K sampling-only epochs (counts come from a hook the
//               sampler provides)
//   random      a uniform random choice (baseline)
//   none        no cache
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "graph/csr.hpp"

namespace dsp {

enum class CachePolicy { kInDegree, kOutDegree, kPresample, kRandom, kNone };
CachePolicy parse_cache_policy(const std::string& name);  // InvalidArgument on unknown names
const char* cache_policy_name(CachePolicy p);

// The k nodes of [begin, end) with the highest score, hottest first; ties go to the lower id.
std::vector<int64_t> top_k_by_score(const std::vector<int64_t>& score, int64_t begin, int64_t end,
                                    int64_t k);

// Visit counts per node (indexed by global id, size N) from `epochs` sampling-only epochs over
// `train_ids` with the real sampler, fanouts and batch size. Provided by the sampler module.
using PresampleFn = std::function<std::vector<int64_t>(const Csr& graph,
                                                       const std::vector<int64_t>& train_ids)>;

// Hotness score of every node of `g` (higher is hotter) under `policy`. `presample` is used only
// by kPresample (InvalidArgument if it is empty); `seed` only by kRandom.
std::vector<int64_t> hotness_scores(CachePolicy policy, const Csr& g,
                                    const std::vector<int64_t>& train_ids, uint64_t seed,
                                    const PresampleFn& presample = {});

// GNNLab's optimal static cache for evaluation: given the ids accessed by a recorded run (one
// entry per access), the best hit rate any static cache of `capacity` nodes can reach, which is
// that of the `capacity` most frequently accessed nodes.
double optimal_hit_rate(const std::vector<int64_t>& trace, int64_t num_nodes, int64_t capacity);
// Hit rate of a given cached set on a trace.
double hit_rate(const std::vector<int64_t>& trace, int64_t num_nodes,
                const std::vector<int64_t>& cached);

}  // namespace dsp
