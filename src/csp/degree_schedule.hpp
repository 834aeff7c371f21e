#pragma once
// Degree-sorted task scheduling (TurboGNN, Wu et al., IEEE TC 2023, Algorithm 2), written once for
// the CUDA "turbo" sampling kernel (kernel_backend.hpp: TurboSampleTask) and the CPU backend's
// split of tasks across threads (cpu_backend.cpp).
//
// Tasks are sorted by the degree of their row, descending (a counting sort: stable, so ties keep
// task order), then dealt to bins in snake order: sorted units 0..m-1 go to bins 0..m-1, units
// m..2m-1 to bins m-1..0, and so on. With costs non-increasing along the sorted order, any two
// bins' total costs differ by at most the largest cost (each pair of rounds cancels its order;
// tests/csp/test_degree_schedule.cpp checks it). A schedule only decides who samples which task:
// every task still draws from its own RngStream (sample_kernels.hpp), so the picks, and the
// blocks, are the default kernel's whatever the schedule.
//
// On the GPU a unit is a warp's worth (kLanes) of consecutive sorted tasks, so the lanes of a warp
// have similar degrees and finish together; units are dealt to blocks in snake order, one per warp
// (round w = warp w), so blocks are balanced and no block waits on one heavy warp. Tasks whose row
// is longer than their fanout (TurboGNN's high-degree partition: they draw, and Floyd's membership
// checks read the position buffer O(k^2) times) keep that buffer in shared memory when the fanout
// fits a thread's slot; the others write their positions straight to the output as the default
// kernel does.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/host_device.hpp"

namespace dsp::csp {

// Sort keys are degrees clamped here: sampling cost is flat in the degree once the row is a few
// fanouts long (Floyd: k draws whatever the degree), and the counting sort needs few buckets.
constexpr int64_t kDegreeKeyCap = 4095;

DSP_HOST_DEVICE DSP_FORCEINLINE int64_t degree_key(int64_t deg) {
  return deg < kDegreeKeyCap ? deg : kDegreeKeyCap;
}

// The bin of sorted unit u when units are dealt to `bins` bins in snake order.
DSP_HOST_DEVICE DSP_FORCEINLINE int64_t snake_bin(int64_t u, int64_t bins) {
  const int64_t round = u / bins, p = u % bins;
  return (round & 1) ? bins - 1 - p : p;
}

// The inverse: the unit bin `bin` receives in round `round`.
DSP_HOST_DEVICE DSP_FORCEINLINE int64_t snake_unit(int64_t bin, int64_t round, int64_t bins) {
  return round * bins + ((round & 1) ? bins - 1 - bin : bin);
}

// The turbo kernel's launch: blocks of kWarps warps; warp w of block b takes sorted unit
// snake_unit(b, w, blocks), its lane l the task at sorted position unit * kLanes + l.
struct WarpSnake {
  static constexpr int kLanes = 32;
  static constexpr int kWarps = 4;
  static constexpr int kThreads = kLanes * kWarps;
  // Bytes of shared memory a block may take without opting in (every CUDA GPU since sm_20).
  static constexpr size_t kSharedBytes = 48 * 1024;

  int64_t n = 0;       // tasks
  int64_t blocks = 0;  // ceil(units / kWarps)

  static WarpSnake of(int64_t n) {
    const int64_t units = (n + kLanes - 1) / kLanes;
    return {n, (units + kWarps - 1) / kWarps};
  }
  // The sorted position thread `t` of block `b` samples, or -1 when it has none.
  DSP_HOST_DEVICE DSP_FORCEINLINE int64_t position(int64_t b, int t) const {
    const int64_t p = snake_unit(b, t / kLanes, blocks) * kLanes + t % kLanes;
    return p < n ? p : -1;
  }
  // Positions a thread's shared slot holds: the largest fanout of the batch if kThreads slots of
  // it fit kSharedBytes, else as many as fit (tasks with a larger fanout use global memory).
  static int shared_slot(int max_fanout) {
    const int fit = static_cast<int>(kSharedBytes / (kThreads * sizeof(int64_t)));
    return std::max(0, std::min(max_fanout, fit));
  }
};

// Whether a task samples its positions in its thread's shared slot of `slot` positions.
DSP_HOST_DEVICE DSP_FORCEINLINE bool uses_shared_slot(int64_t deg, int k, int slot) {
  return deg > k && k <= slot;
}

// order[j] = the task at sorted position j: keys descending, ties in task order. Keys must be in
// [0, kDegreeKeyCap]. `count` is scratch.
inline void degree_order(const int64_t* keys, int64_t n, std::vector<int64_t>& order,
                         std::vector<int64_t>& count) {
  count.assign(kDegreeKeyCap + 2, 0);
  for (int64_t i = 0; i < n; ++i) ++count[kDegreeKeyCap - keys[i] + 1];
  for (int64_t k = 1; k <= kDegreeKeyCap + 1; ++k) count[k] += count[k - 1];
  order.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[count[kDegreeKeyCap - keys[i]]++] = i;
}

// The CPU split of n tasks over `bins` threads: order is a permutation of [0, n), bin c's tasks
// at order[bounds[c], bounds[c + 1]), the bins dealt in snake order from the degree-sorted tasks
// (so each bin's tasks are in descending key order). `count` is scratch.
struct SnakeSplit {
  std::vector<int64_t> order, bounds, sorted, count;

  void build(const int64_t* keys, int64_t n, int bins) {
    degree_order(keys, n, sorted, count);
    const int64_t rounds = n / bins, rest = n % bins;
    bounds.assign(static_cast<size_t>(bins) + 1, 0);
    for (int c = 0; c < bins; ++c) {
      // the last, partial round reaches bins [0, rest) when even, [bins - rest, bins) when odd
      const bool extra = (rounds & 1) ? c >= bins - rest : c < rest;
      bounds[c + 1] = bounds[c] + rounds + (extra ? 1 : 0);
    }
    count.assign(bounds.begin(), bounds.end() - 1);  // next free position of each bin
    order.resize(static_cast<size_t>(n));
    for (int64_t u = 0; u < n; ++u) order[count[snake_bin(u, bins)]++] = sorted[u];
  }
};

}  // namespace dsp::csp
