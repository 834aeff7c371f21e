#pragma once
// Which nodes a rank caches: the static cache policies of the seed systems behind one interface,
// chosen by name from one registry (static_cache_policy) by the partitioner, the train-time
// override (RankRuntime) and dsp bench cache alike, and GNNLab's optimal oracle. A policy scores
// every node; each rank caches the top of its own id range (top_k_by_score).
//   in-degree   DSP's default: nodes with the most in-neighbours are sampled most often
//   out-degree  PaGraph: nodes that appear in the most adjacency lists
//   presample   GNNLab PreSC#K: visit counts of K sampling-only epochs (counts come from a hook the
//               sampler provides)
//   random      a uniform random choice (baseline)
//   none        no cache
// The dynamic policy, BGL's FIFO of rows other ranks serve, sits in the feature store
// (layout/store/fifo_cache.hpp). A new static policy: one class in hotness.cpp, one registry line.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "graph/array.hpp"
#include "graph/csr.hpp"

namespace dsp {

// The k nodes of [begin, end) with the highest score, hottest first; ties go to the lower id.
std::vector<int64_t> top_k_by_score(const std::vector<int64_t>& score, int64_t begin, int64_t end,
                                    int64_t k);

// Visit counts per node (indexed by global id, size N) from `epochs` sampling-only epochs over
// `train_ids` with the real sampler, fanouts and batch size. Provided by the sampler module.
using PresampleFn =
    std::function<std::vector<int64_t>(const Csr& graph, const std::vector<int64_t>& train_ids)>;

// What a policy may score from: the whole graph at partition time, or at train time only what
// every rank holds (the partition's replicated in-degree array, a seed).
struct CacheScoreInputs {
  int64_t num_nodes = 0;
  const Csr* graph = nullptr;          // partition time
  const int64_t* in_degree = nullptr;  // train time: in_degree[v] for every global id v
  const std::vector<int64_t>* train_ids = nullptr;
  uint64_t seed = 0;      // random
  PresampleFn presample;  // presample
};

class StaticCachePolicy {
 public:
  virtual ~StaticCachePolicy() = default;
  virtual const char* name() const = 0;
  // The hotness of every node (num_nodes scores, higher is hotter); InvalidArgument when an input
  // it needs is missing.
  virtual std::vector<int64_t> scores(const CacheScoreInputs& in) const = 0;
  // Whether a job may choose or resize a partition's cache with this policy at train time (it
  // scores from what every rank holds); the others are chosen by dsp partition.
  virtual bool at_train_time() const = 0;
  virtual bool caches() const { return true; }  // false: none
  // Whether it scores by the visits of presampled epochs (CacheScoreInputs::presample), which
  // the caller then runs first (dsp partition, dsp bench cache).
  virtual bool presamples() const { return false; }
};

// The policy of that name; InvalidArgument "unknown cache policy ..." naming the others.
const StaticCachePolicy& static_cache_policy(const std::string& name);
// The one check of a train-time cache choice (dsp train --cache-policy, and --cache-ratio on a
// partition whose policy cannot be recomputed): InvalidArgument unless at_train_time().
void check_train_time_cache_policy(const std::string& name);
// A job's own cache lists, one per part (part p owns ids [offsets[p], offsets[p+1])), under a
// train-time policy (checked here) and `ratio` of each part: computed identically on every rank
// from what every rank holds (the replicated in-degree array of `num_nodes` entries, the seed), so
// the feature position lists agree.
std::vector<Array> train_time_cache_lists(const std::string& policy, double ratio,
                                          const std::vector<int64_t>& offsets,
                                          const int64_t* in_degree, int64_t num_nodes,
                                          uint64_t seed);

// Hotness of every node of `g` under the named policy (partition time).
std::vector<int64_t> hotness_scores(const std::string& policy, const Csr& g,
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
