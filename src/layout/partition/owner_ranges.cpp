#include "layout/partition/owner_ranges.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/group_kernels.hpp"

namespace dsp {

int owner_in(const std::vector<int64_t>& offsets, int64_t id) {
  return owner_of(offsets.data(), static_cast<int>(offsets.size()) - 1, id);
}

OwnerRanges::OwnerRanges(std::vector<int64_t> offsets, int ranks, int rank, const char* what)
    : offsets_(std::move(offsets)), rank_(rank) {
  DSP_CHECK_ARG(static_cast<int>(offsets_.size()) == ranks + 1,
                "{}: {} partition offsets for {} ranks (need {})", what, offsets_.size(), ranks,
                ranks + 1);
  DSP_CHECK_ARG(offsets_[0] == 0 && std::is_sorted(offsets_.begin(), offsets_.end()),
                "{}: partition offsets must start at 0 and not decrease", what);
}

void OwnerRanges::group(const int64_t* ids, int64_t n, const char* what, std::vector<int64_t>& send,
                        std::vector<int64_t>& counts, std::vector<int64_t>& pos) const {
  const int P = static_cast<int>(offsets_.size()) - 1;
  const int64_t N = num_ids();
  std::vector<int> own(static_cast<size_t>(n));
  counts.assign(P, 0);
  for (int64_t i = 0; i < n; ++i) {
    DSP_CHECK_ARG(ids[i] >= 0 && ids[i] < N, "{}: id {} at position {} is outside [0, {})", what,
                  ids[i], i, N);
    own[i] = owner(ids[i]);
    ++counts[own[i]];
  }
  std::vector<int64_t> cursor(P, 0);
  for (int p = 1; p < P; ++p) cursor[p] = cursor[p - 1] + counts[p - 1];
  send.resize(static_cast<size_t>(n));
  pos.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    pos[i] = cursor[own[i]]++;
    send[pos[i]] = ids[i];
  }
}

}  // namespace dsp
