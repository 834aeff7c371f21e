#pragma once
// Stable grouping by a small category on an executor (core/host_exec.hpp), written once for the
// sampler's owner grouping (csp/kernel_backend.hpp) and the device feature store's classification
// (layout/store/kernel_features.hpp): with cat[i] in [0, C) (or outside: in no group), the
// exclusive scan of the category-major C x n flag matrix (FlagCategories) gives element i of
// category c its grouped position, rank[c * n + i] (the elements of lower categories, then c's
// before i: stable within a category), and rank at c * n, c = 0..C, the C + 1 group bounds
// (GatherAt). C is a few ranks or kinds, so the matrix is a few times n.
#include <cstdint>

#include "core/host_device.hpp"

namespace dsp {

// The part owning node v under partition offsets (offsets[p] <= v < offsets[p + 1], P + 1
// entries): a binary search for the last offset at most v.
DSP_HOST_DEVICE DSP_FORCEINLINE int owner_of(const int64_t* offsets, int P, int64_t v) {
  int lo = 0, hi = P - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (offsets[mid] <= v) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

namespace kernels {

// flag[c * n + i] = 1 when element i is in category c.
struct FlagCategories {
  const int64_t* cat;
  int64_t n;
  int64_t* flag;
  DSP_HOST_DEVICE void operator()(int64_t k) const { flag[k] = cat[k % n] == k / n ? 1 : 0; }
};

// out[i] = from[at[i]].
struct GatherAt {
  const int64_t* from;
  const int64_t* at;
  int64_t* out;
  DSP_HOST_DEVICE void operator()(int64_t i) const { out[i] = from[at[i]]; }
};

}  // namespace kernels
}  // namespace dsp
