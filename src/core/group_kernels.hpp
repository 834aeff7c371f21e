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

// The first index in a[lo, hi) (ascending) whose value is above v (upper) / not below v (lower):
// hi when there is none. Every binary search of the device path is this one.
template <class T, class V>
DSP_HOST_DEVICE DSP_FORCEINLINE int64_t first_above(const T* a, int64_t lo, int64_t hi, V v,
                                                    bool upper) {
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    const V x = static_cast<V>(a[mid]);
    if (upper ? x <= v : x < v) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// The part owning node v under partition offsets (offsets[p] <= v < offsets[p + 1], P + 1
// entries): the last offset at most v.
DSP_HOST_DEVICE DSP_FORCEINLINE int owner_of(const int64_t* offsets, int P, int64_t v) {
  return static_cast<int>(first_above(offsets, 1, P, v, true) - 1);
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
