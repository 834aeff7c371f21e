#pragma once
// Contiguous id ranges owned by ranks, as a partition renumbers its nodes: rank p owns the ids
// [offsets[p], offsets[p + 1]). The one place that finds an id's owner and groups a request by
// owner (PartitionMeta::owner, the embedding table's rounds).
#include <cstdint>
#include <vector>

namespace dsp {

// The rank owning `id` (in [0, offsets[P])) under `offsets` (P + 1 entries, from 0,
// non-decreasing): the last p with offsets[p] <= id, by core/group_kernels.hpp's owner_of (the one
// the device kernels run).
int owner_in(const std::vector<int64_t>& offsets, int64_t id);

class OwnerRanges {
 public:
  // offsets: `ranks` + 1 entries, from 0, non-decreasing (InvalidArgument naming `what`
  // otherwise); `rank`: this rank.
  OwnerRanges(std::vector<int64_t> offsets, int ranks, int rank, const char* what);
  int64_t begin() const { return offsets_[rank_]; }  // this rank's first id
  int64_t end() const { return offsets_[rank_ + 1]; }
  int64_t num_ids() const { return offsets_.back(); }
  int owner(int64_t id) const { return owner_in(offsets_, id); }
  // A request ids[0, n) grouped by owner: send (the ids in owner order, counts[p] of rank p's),
  // pos[i] = the position of ids[i] in send (stable within an owner). An id outside [0,
  // num_ids()) is InvalidArgument "WHAT: id X at position I is outside [0, N)".
  void group(const int64_t* ids, int64_t n, const char* what, std::vector<int64_t>& send,
             std::vector<int64_t>& counts, std::vector<int64_t>& pos) const;

 private:
  std::vector<int64_t> offsets_;
  int rank_;
};

}  // namespace dsp
