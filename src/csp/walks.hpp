#pragma once
// Random walks and PinSAGE neighbourhoods over the partitioned graph (CSP's protocol with host
// buffers): each step sends every walk to the owner of its node (one all_to_all_v there and
// one back), which moves it to a uniform in-neighbour. Bad input on any rank makes every rank
// throw (one all_reduce of an error flag first). Walks over a heterogeneous graph are refused.
#include <cstdint>
#include <string>
#include <vector>

#include "ccc/communicator.hpp"
#include "layout/partition/partition.hpp"

namespace dsp {

// Walks: paths[i * (length + 1) + t] = node after t steps of walk i (t = 0: the start), -1 once
// the walk has stopped at a node without in-neighbours.
struct WalkResult {
  int64_t num_walks = 0, length = 0;
  std::vector<int64_t> paths;
};

// PinSAGE neighbourhoods: for seed i, ids[indptr[i], indptr[i+1]) are the (at most top_k) nodes
// most visited by its walks (the seed itself excluded), by decreasing count, ties to the lower
// id; counts holds the visit counts (the edge weights PinSAGE uses).
struct PinSageResult {
  std::vector<int64_t> indptr, ids;
  std::vector<float> counts;
};

class WalkSampler {
 public:
  // `part` must outlive the sampler. `seed` keys the draws; with `require_owned_starts` every
  // start must be a node this rank owns (as CollectiveSampler's seeds).
  WalkSampler(const PartitionData& part, Communicator& comm, uint64_t seed,
              bool require_owned_starts = true);

  // Random walks over in-neighbours from `starts`: `length` steps of fanout 1 through the owners;
  // at each step a walk returns to its start with probability restart_prob, else moves to a
  // uniform in-neighbour. Walk i's draws are keyed by (seed, epoch, batch, step, starts[i], i's
  // occurrence index among equal starts), so they do not depend on P. Collective.
  WalkResult random_walks(const std::vector<int64_t>& starts, int length, double restart_prob,
                          int64_t epoch, int64_t batch);

  // num_walks walks of walk_length from every seed; per seed the top_k most visited nodes.
  // Collective.
  PinSageResult pinsage_neighbors(const std::vector<int64_t>& seeds, int num_walks, int walk_length,
                                  double restart_prob, int top_k, int64_t epoch = 0,
                                  int64_t batch = 0);

 private:
  const PartitionData& part_;
  Communicator& comm_;
  uint64_t seed_;
  bool require_owned_;
  int rank_ = 0, size_ = 1;
  int64_t begin_ = 0, end_ = 0;
};

}  // namespace dsp
