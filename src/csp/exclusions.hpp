#pragma once
// Link prediction's edge exclusion over the CSP protocol (CollectiveSampler::ExcludedEdges): a
// batch's (dst, src) pairs go to the owners of their dst once per batch (share); each layer an
// owner turns its requesters' pairs into the TaskExclusions of the tasks it serves (served),
// which the backend's sample leaves out of their rows; the backend counts the entries left out.
// Pull mode samples the rows it fetches itself, under its own pairs (own). Private to src/csp.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ccc/communicator.hpp"
#include "csp/backend.hpp"
#include "csp/sampler.hpp"

namespace dsp {

// What is wrong with `ex` for a sampler of `o` over `num_nodes` nodes ("" when nothing).
std::string exclusion_error(const SamplerOptions& o, int64_t num_nodes,
                            const CollectiveSampler::ExcludedEdges& ex);

class EdgeExclusions {
 public:
  // `offsets`: the owners' id ranges (P + 1); `pull`: the sampler's pull mode.
  EdgeExclusions(Communicator& comm, SamplerBackend& backend, std::vector<int64_t> offsets,
                 bool pull);
  // A new batch: no pairs.
  void clear();
  // This rank's pairs of the batch (null: none) to the owners of their dst, which keep them by
  // requester, uploaded once for the batch. Collective (one count exchange, one all_to_all_v).
  void share(const CollectiveSampler::ExcludedEdges* ex);
  // The exclusions of the served tasks [b, e) (served_off: the tasks' offsets per requester,
  // P + 1), or null when this rank has no pairs in the batch.
  const TaskExclusions* served(const std::vector<int64_t>& served_off, int64_t b, int64_t e);
  // Pull mode: this rank's own pairs, packed for one requester (empty: none).
  const std::vector<int64_t>& own() const { return own_; }
  // The backend's counter of entries left out: zeroed, and read (a read only once it was used).
  void zero();
  int64_t read_count() const;
  bool used() const { return used_; }

 private:
  Communicator& comm_;
  SamplerBackend& be_;
  std::vector<int64_t> offsets_;
  bool pull_;
  int size_;
  // The batch's pairs this rank owns the dst of, packed by requester (empty when the batch has
  // none anywhere); pull mode: this rank's own pairs (one requester); one call's served task
  // offsets per requester (host).
  std::vector<int64_t> pairs_, own_, task_off_;
  TaskExclusions tasks_;
  // Backend memory: the served tasks' offsets per requester and the batch's pairs (device
  // backends only), the count of entries left out (every backend).
  std::unique_ptr<BackendBuffer> task_buf_, pair_buf_, count_buf_;
  bool used_ = false;  // the counter may be non-zero
};

}  // namespace dsp
