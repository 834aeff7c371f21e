#pragma once
// Host parallel loops (OpenMP) for modules that do not link LibTorch.
#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace dsp {

inline int num_threads() { return omp_get_max_threads(); }

// The number of chunks parallel_for cuts n elements into.
inline int64_t parallel_chunks(int64_t n, int64_t grain) {
  return std::min<int64_t>(num_threads(), (n + grain - 1) / std::max<int64_t>(grain, 1));
}

// Calls fn(begin, end) on disjoint chunks of [begin, end) of at least `grain` elements, in
// parallel. fn must not throw (exceptions cannot cross an OpenMP region): collect errors instead.
template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& fn) {
  int64_t n = end - begin;
  if (n <= 0) return;
  int64_t chunks = parallel_chunks(n, grain);
  if (chunks <= 1) {
    fn(begin, end);
    return;
  }
#pragma omp parallel for num_threads(chunks) schedule(static, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t b = begin + n * c / chunks, e = begin + n * (c + 1) / chunks;
    fn(b, e);
  }
}

}  // namespace dsp
