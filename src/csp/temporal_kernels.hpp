#pragma once
// Per-node logic of temporal neighbour sampling (GraphBolt's TemporalNeighborSampler), written once
// for the CPU loop and the CUDA kernels as sample_kernels.hpp is; no CUDA includes.
//
// Every seed carries a time T. An entry of a node's in-neighbour row, the edge u -> v of time
// t (edge_time.npy), is eligible for T iff t < T (strictly: an edge at exactly T is not yet there).
// A task samples among its row's eligible entries only:
//   uniform  fanout k without replacement (every eligible entry when at most k are), or k
//            independent picks with replacement (none when no entry is eligible), as the
//            node-wise uniform step draws over a row of that many entries;
//   recent   the k eligible entries with the largest times, ties broken by the lower row
//            position; no draws.
// Picks are row positions, sorted (rows being sorted by neighbour id, also by neighbour). Every
// picked neighbour inherits its task's T for the next hop, so a task is an (id, T) pair.
//
// Draws come from one RngStream per (key, node id, T) (temporal_stream): the step key of
// sample_kernels.hpp with T mixed in, so the picks of (v, T1) and (v, T2) are independent and the
// whole sample is a pure function of (seed, epoch, batch, layer, id, T).
#include <cstdint>

#include "core/host_device.hpp"
#include "core/rng.hpp"
#include "csp/sample_kernels.hpp"

namespace dsp::csp {

// The stream purpose of temporal tasks ("temp"), distinct from kPurposeNodeWise and the others.
constexpr uint32_t kPurposeTemporal = 0x7465'6d70u;

enum class TemporalStrategy : int { kUniform = 0, kRecent = 1 };

// The stream of task (v, T) under the step key rng_key(seed, epoch, batch, layer).
DSP_HOST_DEVICE DSP_FORCEINLINE RngStream temporal_stream(uint64_t key, int64_t v, int64_t T) {
  return RngStream(mix64(key ^ mix64(static_cast<uint64_t>(T))), static_cast<uint64_t>(v),
                   kPurposeTemporal);
}

// The number of entries of a row (times t[0, deg)) eligible for T.
DSP_HOST_DEVICE DSP_FORCEINLINE int64_t count_eligible(const int64_t* t, int64_t deg, int64_t T) {
  int64_t m = 0;
  for (int64_t j = 0; j < deg; ++j) m += t[j] < T;
  return m;
}

// Maps ranks pos[0, n) among the row's eligible entries (non-decreasing, each below their count)
// in place to row positions: rank r becomes the position of the r-th eligible entry. One walk.
DSP_HOST_DEVICE DSP_FORCEINLINE void eligible_to_positions(const int64_t* t, int64_t T,
                                                           int64_t* pos, int n) {
  int64_t j = -1, rank = -1;
  for (int i = 0; i < n; ++i) {
    while (rank < pos[i]) {
      ++j;
      rank += t[j] < T;
    }
    pos[i] = j;
  }
}

// Uniform temporal sampling of one task: k positions among the entries eligible for T, drawn as
// uniform_without / uniform_with draw over a row of that many entries (so all of them when at most
// k are, without replacement), mapped to row positions. Writes at most k sorted positions; returns
// their number. The draws are s's from its position (s does not advance).
DSP_HOST_DEVICE inline int temporal_uniform(const int64_t* t, int64_t deg, int64_t T, int k,
                                            bool replace, const RngStream& s, int64_t* pos) {
  const int64_t m = count_eligible(t, deg, T);
  if (k <= 0 || m <= 0) return 0;
  const int c = replace ? uniform_with(m, k, s, pos) : uniform_without(m, k, s, pos);
  eligible_to_positions(t, T, pos, c);
  return c;
}

// Recent temporal sampling of one task: the min(k, eligible) eligible entries with the largest
// times, ties broken by the lower row position, written sorted by position; returns their number.
// pos[0, n) is kept ordered by preference (time descending, then position) while the row is
// scanned, so a later entry of equal time never displaces an earlier one.
DSP_HOST_DEVICE inline int temporal_recent(const int64_t* t, int64_t deg, int64_t T, int k,
                                           int64_t* pos) {
  if (k <= 0) return 0;
  int n = 0;
  for (int64_t j = 0; j < deg; ++j) {
    const int64_t tj = t[j];
    if (tj >= T) continue;
    if (n == k && !(tj > t[pos[n - 1]])) continue;
    int i = n < k ? n++ : n - 1;  // the slot to fill: a new one, or the least preferred's
    while (i > 0 && tj > t[pos[i - 1]]) {
      pos[i] = pos[i - 1];
      --i;
    }
    pos[i] = j;
  }
  sort_small(pos, n);
  return n;
}

// The temporal step of one task (v, T) with fanout k over v's row (times t[0, deg)): writes at
// most k sorted row positions into pos and returns their number. `s` is temporal_stream(key, v,
// T); recent draws nothing.
DSP_HOST_DEVICE inline int temporal_positions(const int64_t* t, int64_t deg, int64_t T, int k,
                                              TemporalStrategy strategy, bool replace,
                                              const RngStream& s, int64_t* pos) {
  if (strategy == TemporalStrategy::kRecent) return temporal_recent(t, deg, T, k, pos);
  return temporal_uniform(t, deg, T, k, replace, s, pos);
}

}  // namespace dsp::csp
