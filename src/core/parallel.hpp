#pragma once
// Host parallel loops (OpenMP) for modules that do not link LibTorch.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

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

// For loops whose iterations mostly wait rather than compute: reads of a mapping larger than
// memory, where each missing page is a disk read the faulting thread sleeps on. fn(begin, end) on
// chunks of `grain` elements taken in turn by `depth` threads (the caller's among them), so about
// `depth` reads are outstanding where the rank's own threads would wait for each in turn. The
// threads live for the call (tens of microseconds each, against milliseconds of reads) and
// inherit the caller's CPU binding: they sleep, not compute. Measured (256-byte rows at random
// from a 26 GiB file, page cache dropped, 200,000 rows): 1 thread 8.9k rows/s, 32 threads 75k,
// 128 threads 82k. fn must not throw.
// The depth loops over a mapping beyond memory use (the host feature gather, the CPU sampler).
constexpr int kWaitingDepth = 32;

template <class F>
void waiting_parallel_for(int64_t begin, int64_t end, int64_t grain, int depth, const F& fn) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks = (n + grain - 1) / grain;
  const int threads = static_cast<int>(std::min<int64_t>(std::max(depth, 1), chunks));
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < chunks;) {
      fn(begin + c * grain, std::min(end, begin + (c + 1) * grain));
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads - 1));
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
}

}  // namespace dsp
