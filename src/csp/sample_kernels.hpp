#pragma once
// Per-node sampling and relabelling logic, written once for the CPU loop and the CUDA kernels
// (src/csp/cuda/*.cu include this header), so the CPU tests check exactly what the GPU runs.
// No CUDA includes: everything here is plain integer / IEEE arithmetic that host and device
// evaluate identically.
//
// Every function draws from one RngStream built by the caller as
//   RngStream(rng_key(seed, epoch, batch, layer), global node id, purpose)
// so a node's picks depend only on those values, never on the rank, thread or task order.
//
// Positions are indices into the node's adjacency row; results are always sorted by position,
// which (rows being ascending by neighbour id) also sorts them by neighbour id. That makes the
// output order a function of the draws alone.
#include <cmath>
#include <cstdint>

#include "core/group_kernels.hpp"
#include "core/host_device.hpp"
#include "core/rng.hpp"

namespace dsp::csp {

// Stream purposes (the RngStream `purpose` word): distinct uses of one (key, node) never share
// draws.
constexpr uint32_t kPurposeNodeWise = 0;
constexpr uint32_t kPurposeLayerWise = 1;
constexpr uint32_t kPurposeWalk = 2;
constexpr uint32_t kPurposeLabor = 3;

// A sampling task travels as one int64: global id in the low 40 bits, fanout above (< 2^23).
constexpr int kTaskShift = 40;
constexpr int64_t kTaskIdMask = (int64_t{1} << kTaskShift) - 1;
DSP_HOST_DEVICE DSP_FORCEINLINE int64_t pack_task(int64_t v, int64_t k) {
  return v | (k << kTaskShift);
}
DSP_HOST_DEVICE DSP_FORCEINLINE int64_t task_id(int64_t t) { return t & kTaskIdMask; }
// Temporal sampling's (id, time index k of K) pair as one relabel key: id * K + k.
DSP_HOST_DEVICE DSP_FORCEINLINE int64_t pair_key(int64_t id, int64_t k, int64_t K) {
  return id * K + k;
}
// Destination i's picks' pair keys, out[j] = pair_key(nbrs[j], tags[i], K) for its picks j
// (SamplerBackend::pair_keys; one destination per thread on a device).
struct PairKeys {
  const int64_t *offsets, *nbrs, *tags;
  int64_t K;
  int64_t* out;
  DSP_HOST_DEVICE void operator()(int64_t i) const {
    for (int64_t j = offsets[i]; j < offsets[i + 1]; ++j) out[j] = pair_key(nbrs[j], tags[i], K);
  }
};
DSP_HOST_DEVICE DSP_FORCEINLINE int task_fanout(int64_t t) {
  return static_cast<int>(t >> kTaskShift);
}
// The picks a task of fanout k over `deg` entries gets room for: k, or, past kDegreeSlotsAbove
// without replacement (which takes min(k, deg): a fanout of -1 asks for 2^22), its degree when
// smaller. Below the threshold no degree is read for it.
constexpr int kDegreeSlotsAbove = 256;
DSP_HOST_DEVICE DSP_FORCEINLINE bool slot_needs_degree(int k, bool replace) {
  return !replace && k > kDegreeSlotsAbove;
}

// The rank owning node v under the partition offsets, and the binary search
// (core/group_kernels.hpp).
using ::dsp::first_above;
using ::dsp::owner_of;

// The draws of a stream from its position on, for a task that knows about how many it will take
// (`expected`): up to four Philox blocks are computed at once (RngStream::blocks), so a task's
// draws cost about a third of one block after another. Draw for draw equal to the stream's own
// next_u32 from the same position; the stream itself does not advance.
class TaskDraws {
 public:
  DSP_HOST_DEVICE TaskDraws(const RngStream& s, uint32_t expected)
      : s_(s), pos_(s.position()), end_(s.position() + expected) {}
  DSP_HOST_DEVICE DSP_FORCEINLINE uint32_t next_u32() {
    if (pos_ >= hi_) refill();
    return buf_[pos_++ - lo_];
  }
  DSP_HOST_DEVICE uint64_t next_u64() {
    const uint64_t hi = next_u32();
    return (hi << 32) | next_u32();
  }

 private:
  // The block holding draw pos_ and the next ones the task still expects, up to 4 in all (one
  // at a time past the expected draws: a rejection's extra draws).
  DSP_HOST_DEVICE void refill() {
    const uint32_t b = pos_ >> 2;
    lo_ = b << 2;
    const uint32_t want = end_ > lo_ ? (end_ - lo_ + 3) >> 2 : 1;
    switch (want >= 4 ? 4 : want) {
      case 4:
        s_.blocks<4>(b, buf_);
        hi_ = lo_ + 16;
        break;
      case 3:
        s_.blocks<3>(b, buf_);
        hi_ = lo_ + 12;
        break;
      case 2:
        s_.blocks<2>(b, buf_);
        hi_ = lo_ + 8;
        break;
      default:
        s_.blocks<1>(b, buf_);
        hi_ = lo_ + 4;
        break;
    }
  }
  const RngStream& s_;
  uint32_t pos_, end_, lo_ = 0, hi_ = 0;
  uint32_t buf_[16];
};

// Unbiased integer in [0, bound), 1 <= bound < 2^32: Lemire's multiply-shift with rejection, so it
// is exact (no modulo bias) and costs one 32-bit draw except with probability bound / 2^32.
// Draws: an RngStream or TaskDraws.
template <class Draws>
DSP_HOST_DEVICE DSP_FORCEINLINE uint32_t draw_below(Draws& s, uint32_t bound) {
  uint64_t m = static_cast<uint64_t>(s.next_u32()) * bound;
  uint32_t lo = static_cast<uint32_t>(m);
  if (lo < bound) {
    uint32_t t = static_cast<uint32_t>(-bound) % bound;
    while (lo < t) {
      m = static_cast<uint64_t>(s.next_u32()) * bound;
      lo = static_cast<uint32_t>(m);
    }
  }
  return static_cast<uint32_t>(m >> 32);
}

// Above 2^32 - 1: RngStream::uniform_int's 64-bit draw modulo the bound.
template <class Draws>
DSP_HOST_DEVICE DSP_FORCEINLINE int64_t draw_index(Draws& s, int64_t bound) {
  if (bound <= 0xffffffffLL) return draw_below(s, static_cast<uint32_t>(bound));
  return static_cast<int64_t>(s.next_u64() % static_cast<uint64_t>(bound));
}

DSP_HOST_DEVICE DSP_FORCEINLINE void sort_small(int64_t* a, int n) {
  for (int i = 1; i < n; ++i) {
    int64_t x = a[i];
    int j = i - 1;
    while (j >= 0 && a[j] > x) {
      a[j + 1] = a[j];
      --j;
    }
    a[j + 1] = x;
  }
}

// Branch-free sorting of a[0, N) for N = 4, 8 or 16 (Batcher's odd-even merge sort: 5, 19 and 63
// compare-exchanges): no data-dependent branch, so none is mispredicted, where insertion sort
// mispredicts about once per element.
DSP_HOST_DEVICE DSP_FORCEINLINE void cmp_swap(int64_t& x, int64_t& y) {
  const int64_t lo = x < y ? x : y, hi = x < y ? y : x;
  x = lo;
  y = hi;
}
template <int N>
DSP_HOST_DEVICE DSP_FORCEINLINE void sort_network(int64_t* a) {
  static_assert(N == 4 || N == 8 || N == 16, "networks of 4, 8 and 16 inputs");
  cmp_swap(a[0], a[1]);
  cmp_swap(a[2], a[3]);
  cmp_swap(a[0], a[2]);
  cmp_swap(a[1], a[3]);
  cmp_swap(a[1], a[2]);
  if (N == 4) return;
  cmp_swap(a[4], a[5]);
  cmp_swap(a[6], a[7]);
  cmp_swap(a[4], a[6]);
  cmp_swap(a[5], a[7]);
  cmp_swap(a[5], a[6]);
  cmp_swap(a[0], a[4]);
  cmp_swap(a[2], a[6]);
  cmp_swap(a[2], a[4]);
  cmp_swap(a[1], a[5]);
  cmp_swap(a[3], a[7]);
  cmp_swap(a[3], a[5]);
  cmp_swap(a[1], a[2]);
  cmp_swap(a[3], a[4]);
  cmp_swap(a[5], a[6]);
  if (N == 8) return;
  cmp_swap(a[8], a[9]);
  cmp_swap(a[10], a[11]);
  cmp_swap(a[8], a[10]);
  cmp_swap(a[9], a[11]);
  cmp_swap(a[9], a[10]);
  cmp_swap(a[12], a[13]);
  cmp_swap(a[14], a[15]);
  cmp_swap(a[12], a[14]);
  cmp_swap(a[13], a[15]);
  cmp_swap(a[13], a[14]);
  cmp_swap(a[8], a[12]);
  cmp_swap(a[10], a[14]);
  cmp_swap(a[10], a[12]);
  cmp_swap(a[9], a[13]);
  cmp_swap(a[11], a[15]);
  cmp_swap(a[11], a[13]);
  cmp_swap(a[9], a[10]);
  cmp_swap(a[11], a[12]);
  cmp_swap(a[13], a[14]);
  cmp_swap(a[0], a[8]);
  cmp_swap(a[4], a[12]);
  cmp_swap(a[4], a[8]);
  cmp_swap(a[2], a[10]);
  cmp_swap(a[6], a[14]);
  cmp_swap(a[6], a[10]);
  cmp_swap(a[2], a[4]);
  cmp_swap(a[6], a[8]);
  cmp_swap(a[10], a[12]);
  cmp_swap(a[1], a[9]);
  cmp_swap(a[5], a[13]);
  cmp_swap(a[5], a[9]);
  cmp_swap(a[3], a[11]);
  cmp_swap(a[7], a[15]);
  cmp_swap(a[7], a[11]);
  cmp_swap(a[3], a[5]);
  cmp_swap(a[7], a[9]);
  cmp_swap(a[11], a[13]);
  cmp_swap(a[1], a[2]);
  cmp_swap(a[3], a[4]);
  cmp_swap(a[5], a[6]);
  cmp_swap(a[7], a[8]);
  cmp_swap(a[9], a[10]);
  cmp_swap(a[11], a[12]);
  cmp_swap(a[13], a[14]);
}

// Floyd's algorithm (below) for k <= N, N = 4, 8 or 16, unrolled over the N lanes so that every
// index is a constant and the picks stay in registers: pick n checks only the n picks before it
// (no branch to mispredict but `n < k`, the same for every task of a layer), and the dependency
// from one pick to the next is a compare and a select, not a store and reload. Lanes from k on
// hold INT64_MAX, which sorts after every pick. The same picks, in the same order, as the
// general loop.
template <int N>
DSP_HOST_DEVICE inline int floyd_small(int64_t deg, int k, TaskDraws& s, int64_t* pos) {
  int64_t a[N];
  DSP_UNROLL
  for (int n = 0; n < N; ++n) {
    if (n < k) {
      const int64_t j = deg - k + n;
      const int64_t t = draw_index(s, j + 1);
      bool seen = false;
      DSP_UNROLL
      for (int i = 0; i < n; ++i) seen |= a[i] == t;
      a[n] = seen ? j : t;
    } else {
      a[n] = INT64_MAX;
    }
  }
  sort_network<N>(a);
  DSP_UNROLL
  for (int i = 0; i < N; ++i) {
    if (i < k) pos[i] = a[i];
  }
  return k;
}

// k distinct positions of [0, deg), uniformly (every k-subset equally likely), by Robert Floyd's
// algorithm: k draws whatever the degree, O(k^2) membership checks on a k-sized buffer (k is a
// fanout, small). When deg <= k every position is taken. Writes pos[0, n) sorted; returns n.
// The draws are s's from its position (TaskDraws); s does not advance.
DSP_HOST_DEVICE inline int uniform_without(int64_t deg, int k, const RngStream& stream,
                                           int64_t* pos) {
  if (deg <= k) {
    for (int64_t i = 0; i < deg; ++i) pos[i] = i;
    return static_cast<int>(deg);
  }
  TaskDraws s(stream, static_cast<uint32_t>(k));
  if (k <= 4) return floyd_small<4>(deg, k, s, pos);
  if (k <= 8) return floyd_small<8>(deg, k, s, pos);
  if (k <= 16) return floyd_small<16>(deg, k, s, pos);
  int n = 0;
  for (int64_t j = deg - k; j < deg; ++j) {
    int64_t t = draw_index(s, j + 1);
    bool seen = false;
    for (int i = 0; i < n; ++i) seen |= pos[i] == t;
    pos[n++] = seen ? j : t;
  }
  sort_small(pos, n);
  return n;
}

// k independent uniform positions of [0, deg) (repeats possible); none when deg == 0. The draws
// are s's from its position (TaskDraws); s does not advance.
DSP_HOST_DEVICE inline int uniform_with(int64_t deg, int k, const RngStream& stream, int64_t* pos) {
  if (deg <= 0) return 0;
  TaskDraws s(stream, static_cast<uint32_t>(k));
  for (int i = 0; i < k; ++i) pos[i] = draw_index(s, deg);
  sort_small(pos, k);
  return k;
}

// One position drawn with probability w_i / total by inverse CDF; -1 if total <= 0. u*total can
// round up to total, so the overflow case falls back to the last positive-weight entry.
DSP_HOST_DEVICE DSP_FORCEINLINE int64_t weighted_one(const double* cum, int64_t deg, RngStream& s) {
  double total = cum[deg - 1];
  if (!(total > 0)) return -1;
  // the first entry whose prefix is above the draw (zero-weight entries are never returned) or,
  // when the draw rounded up to the total, the first whose prefix reaches it (the last increment)
  const int64_t i = first_above(cum, 0, deg, s.uniform01() * total, true);
  return i < deg ? i : first_above(cum, 0, deg - 1, total, false);
}

DSP_HOST_DEVICE DSP_FORCEINLINE double weight_at(const double* cum, int64_t i) {
  return i == 0 ? cum[0] : cum[i] - cum[i - 1];
}

// k positions drawn independently with probability w_i / sum(w) (inverse CDF over the row's
// prefix sums: O(k log deg)). None when the row has no positive weight.
DSP_HOST_DEVICE inline int weighted_with(const double* cum, int64_t deg, int k, RngStream& s,
                                         int64_t* pos) {
  if (deg <= 0 || !(cum[deg - 1] > 0)) return 0;
  for (int i = 0; i < k; ++i) pos[i] = weighted_one(cum, deg, s);
  sort_small(pos, k);
  return k;
}

// The positions of [0, deg) with a positive weight, in order, into pos; returns their number.
DSP_HOST_DEVICE DSP_FORCEINLINE int positive_positions(const double* cum, int64_t deg,
                                                       int64_t* pos) {
  int n = 0;
  for (int64_t i = 0; i < deg; ++i) {
    if (weight_at(cum, i) > 0) pos[n++] = i;
  }
  return n;
}

// The total weight of the entries of [0, deg) not among pos[0, n) (sorted, so "picked?" is a
// merge-like walk).
DSP_HOST_DEVICE DSP_FORCEINLINE double remaining_weight(const double* cum, int64_t deg,
                                                        const int64_t* pos, int n) {
  double remaining = 0;
  for (int64_t i = 0, j = 0; i < deg; ++i) {
    if (j < n && pos[j] == i) {
      ++j;
      continue;
    }
    remaining += weight_at(cum, i);
  }
  return remaining;
}

// The entry not among pos[0, n) (sorted) at which the running sum of those entries' positive
// weights first exceeds x, in [0, their total); the last such entry should rounding leave none.
DSP_HOST_DEVICE DSP_FORCEINLINE int64_t remaining_at(const double* cum, int64_t deg,
                                                     const int64_t* pos, int n, double x) {
  double acc = 0;
  int64_t last = -1;
  for (int64_t i = 0, j = 0; i < deg; ++i) {
    if (j < n && pos[j] == i) {
      ++j;
      continue;
    }
    double w = weight_at(cum, i);
    if (!(w > 0)) continue;
    last = i;
    acc += w;
    if (acc > x) break;
  }
  return last;
}

// Weighted sampling without replacement, as successive sampling: each next pick is drawn among
// the not-yet-picked entries with probability w_i / (sum of their weights), stopping after k picks
// or when no positive weight remains (zero-weight entries are never picked). So a row with at
// most k positive weights is taken whole. Each pick first tries up to 8 inverse-CDF draws over the
// whole row, rejecting repeats (O(log deg) each); if all 8 repeat, one linear pass draws directly
// among the remaining entries. Either way the pick has exactly the successive-sampling law, since
// a rejected draw conditioned on not repeating is a draw among the remaining entries.
DSP_HOST_DEVICE inline int weighted_without(const double* cum, int64_t deg, int k, RngStream& s,
                                            int64_t* pos) {
  if (deg <= 0) return 0;
  if (deg <= k) return positive_positions(cum, deg, pos);
  int n = 0;
  while (n < k) {
    int64_t pick = -1;
    for (int attempt = 0; attempt < 8 && pick < 0; ++attempt) {
      int64_t i = weighted_one(cum, deg, s);
      if (i < 0) return n;
      bool seen = false;
      for (int j = 0; j < n; ++j) seen |= pos[j] == i;
      if (!seen) pick = i;
    }
    if (pick < 0) {
      // pos[0, n) is kept sorted here.
      const double remaining = remaining_weight(cum, deg, pos, n);
      if (!(remaining > 0)) break;
      pick = remaining_at(cum, deg, pos, n, s.uniform01() * remaining);
    }
    pos[n++] = pick;
    sort_small(pos, n);
  }
  return n;
}

// The node-wise step for one task: k positions of a row of `deg` entries; cum (inclusive prefix
// sums of the row's weights) is needed only when weighted. Returns the number of positions. The
// draws start at s's position; the uniform schemes leave s where it was, the weighted ones
// advance it: callers use one fresh stream per task.
DSP_HOST_DEVICE inline int sample_positions(int64_t deg, int k, bool weighted, bool replace,
                                            const double* cum, RngStream& s, int64_t* pos) {
  if (k <= 0 || deg <= 0) return 0;
  if (weighted)
    return replace ? weighted_with(cum, deg, k, s, pos) : weighted_without(cum, deg, k, s, pos);
  return replace ? uniform_with(deg, k, s, pos) : uniform_without(deg, k, s, pos);
}

// ---- Edge exclusion (link prediction) ----
// The pairs one sample call's tasks leave out of their rows, in the backend's memory. Task i of
// the call belongs to requester q = owner_of(tasks, parts, i) (tasks: parts + 1 offsets, from 0);
// q's pairs are j in [pairs[q], pairs[q + 1]), with dst pairs[parts + 1 + j] and src
// pairs[parts + 1 + M + j], M = pairs[parts]: sorted by (dst, src) and distinct per requester.
// Task i of node v leaves out every entry of v's row equal to the src of one of q's pairs with
// dst v, and adds how many it left out to *excluded.
struct TaskExclusions {
  const int64_t* tasks = nullptr;  // [parts + 1]
  const int64_t* pairs = nullptr;  // [parts + 1 + 2M]
  int parts = 0;
  uint64_t* excluded = nullptr;  // entries left out, accumulated (atomically)
};

// Task i's (node v's) excluded src ids, ascending: *n of them from the returned pointer.
DSP_HOST_DEVICE inline const int64_t* excluded_srcs(const TaskExclusions& ex, int64_t i, int64_t v,
                                                    int64_t* n) {
  const int q = owner_of(ex.tasks, ex.parts, i);
  const int64_t* dst = ex.pairs + ex.parts + 1;
  const int64_t a = first_above(dst, ex.pairs[q], ex.pairs[q + 1], v, false);
  *n = first_above(dst, a, ex.pairs[q + 1], v, true) - a;
  return dst + ex.pairs[ex.parts] + a;
}

// The positions in a row (deg entries, ascending ids) of its entries equal to one of src[0, ns)
// (ascending, distinct), ascending, one per next(); deg once there are no more.
template <class Id>
struct ExcludedPositions {
  const Id* row;
  int64_t deg;
  const int64_t* src;
  int64_t ns;
  int64_t j = 0, at = 0;  // the next src to look for; the next row position
  DSP_HOST_DEVICE int64_t next() {
    while (at < deg) {
      if (j > 0 && static_cast<int64_t>(row[at]) == src[j - 1]) return at++;
      if (j == ns) break;
      at = first_above(row, at, deg, src[j++], false);
    }
    return deg;
  }
};

// The uniform node-wise step of a task whose row of `deg` entries leaves out the entries equal
// to src[0, ns) (ExcludedPositions; *nx gets their number): k positions drawn over the deg - nx
// remaining ones exactly as sample_positions draws over a row of that length (all of them when
// deg - nx <= k), then mapped past the excluded entries by one merge-like walk. With nx == 0 it
// is sample_positions(deg, k, false, replace, ...) itself. Writes at most k sorted positions.
template <class Id>
DSP_HOST_DEVICE inline int uniform_excluding(const Id* row, int64_t deg, int k, bool replace,
                                             const int64_t* src, int64_t ns, const RngStream& s,
                                             int64_t* pos, int64_t* nx) {
  const ExcludedPositions<Id> first{row, deg, src, ns};
  ExcludedPositions<Id> it = first;
  int64_t x = 0;
  while (it.next() < deg) ++x;
  *nx = x;
  const int64_t m = deg - x;
  if (k <= 0 || m <= 0) return 0;
  const int c = replace ? uniform_with(m, k, s, pos) : uniform_without(m, k, s, pos);
  it = first;
  int64_t skipped = 0, e = x ? it.next() : deg;  // excluded entries before the mapped position
  for (int i = 0; i < c; ++i) {
    while (e <= pos[i] + skipped) {
      ++skipped;
      e = it.next();
    }
    pos[i] += skipped;
  }
  return c;
}

// Task i (node v, row of deg entries) under the exclusions ex: uniform_excluding of its
// requester's pairs, its count added to *ex.excluded.
template <class Id>
DSP_HOST_DEVICE inline int excluding_task(const TaskExclusions& ex, int64_t i, int64_t v,
                                          const Id* row, int64_t deg, int k, bool replace,
                                          const RngStream& s, int64_t* pos) {
  int64_t ns = 0, nx = 0;
  const int64_t* src = excluded_srcs(ex, i, v, &ns);
  const int c = uniform_excluding(row, deg, k, replace, src, ns, s, pos, &nx);
  if (nx) atomic_add_u64(ex.excluded, static_cast<uint64_t>(nx));
  return c;
}

// ---- LABOR (layer-neighbour sampling, Balin & Catalyurek, NeurIPS'23) ----
// Every neighbour t of a layer has one random variate r_t, shared by all the seeds whose rows
// hold t, so seeds with overlapping neighbourhoods pick the same nodes. r_t depends on the
// variates' keys and on t's global id only (never on the rank or task), so every owner computes
// the same r_t without communication. As GraphBolt's LayerNeighborSampler (sequential Poisson
// sampling), a seed of degree d and fanout k keeps the min(k, d) neighbours of smallest
// r_t / pi_t; with LABOR-0's uniform pi those are the k smallest r_t.
//
// The variates' keys: key0 alone gives r_t = stream(key0, t)'s first draw. With batch dependency
// (key1 != key0), r_t = Phi(c0 z0_t + c1 z1_t) with z the standard normals of the two keys'
// streams and (c0, c1) = (cos, sin)(pi x / 2), x in [0, 1) the batch's place between the two keys
// (DGL's continuous seed): consecutive batches' variates change slowly.
struct LaborVariates {
  bool on = false;
  uint64_t key0 = 0, key1 = 0;
  double c0 = 1, c1 = 0;
};

// A standard normal from draws 0-3 of the stream (Box-Muller over two 53-bit uniforms).
DSP_HOST_DEVICE inline double labor_normal(RngStream& s) {
  const double u1 = (static_cast<double>(s.next_u64() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  const double u2 = static_cast<double>(s.next_u64() >> 11) * (1.0 / 9007199254740992.0);
  return ::sqrt(-2.0 * ::log(u1)) * ::cos(6.283185307179586 * u2);
}

// r_t as a 32-bit fixed-point fraction: r_t = (labor_variate + 0.5) / 2^32.
DSP_HOST_DEVICE inline uint32_t labor_variate(const LaborVariates& lv, int64_t t) {
  RngStream s0(lv.key0, static_cast<uint64_t>(t), kPurposeLabor);
  if (lv.key1 == lv.key0) return s0.next_u32();
  RngStream s1(lv.key1, static_cast<uint64_t>(t), kPurposeLabor);
  const double z = lv.c0 * labor_normal(s0) + lv.c1 * labor_normal(s1);
  const double r = 0.5 * ::erfc(-z * 0.7071067811865476);
  const double f = ::floor(r * 4294967296.0);
  return f <= 0 ? 0u : f >= 4294967295.0 ? 0xffffffffu : static_cast<uint32_t>(f);
}

// LABOR-0's node-wise step: the min(k, deg) positions of row[0, deg) (global neighbour ids) with
// the smallest variates, ties to the lower position; writes them sorted into pos, returns their
// number. pos[0, k) holds, while scanning, the kept (variate << 32 | position) keys ascending: a
// later entry displaces the largest, so a row costs deg variates and about k log(deg / k)
// insertions. Rows of up to 2^31 entries.
template <class Id>
DSP_HOST_DEVICE inline int labor_positions(const Id* row, int64_t deg, int k,
                                           const LaborVariates& lv, int64_t* pos) {
  if (k <= 0 || deg <= 0) return 0;
  if (deg <= k) {
    for (int64_t i = 0; i < deg; ++i) pos[i] = i;
    return static_cast<int>(deg);
  }
  int n = 0;
  for (int64_t j = 0; j < deg; ++j) {
    const int64_t key = static_cast<int64_t>(
        (static_cast<uint64_t>(labor_variate(lv, static_cast<int64_t>(row[j]))) << 31) |
        static_cast<uint64_t>(j));
    if (n == k && key >= pos[k - 1]) continue;
    int i = n < k ? n++ : k - 1;
    while (i > 0 && pos[i - 1] > key) {
      pos[i] = pos[i - 1];
      --i;
    }
    pos[i] = key;
  }
  for (int i = 0; i < n; ++i) pos[i] &= 0x7fffffffLL;
  sort_small(pos, n);
  return n;
}

// ---- relabelling: an open-addressing (linear probing) table of 64-bit slots ----
// A slot holds (key + 1) << 32 | value, 0 = empty, so keys (global ids) must be < 2^32 - 1 and
// values < 2^32. Capacity is a power of two; the table is sized to the batch, so it stays in cache.
constexpr uint64_t kEmptySlot = 0;

DSP_HOST_DEVICE DSP_FORCEINLINE uint64_t relabel_hash(int64_t key, int shift) {
  return (static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ULL) >> shift;
}
DSP_HOST_DEVICE DSP_FORCEINLINE uint64_t relabel_slot(int64_t key, uint64_t value) {
  return (static_cast<uint64_t>(key + 1) << 32) | value;
}
DSP_HOST_DEVICE DSP_FORCEINLINE int64_t relabel_slot_key(uint64_t slot) {
  return static_cast<int64_t>(slot >> 32) - 1;
}
DSP_HOST_DEVICE DSP_FORCEINLINE uint32_t relabel_slot_value(uint64_t slot) {
  return static_cast<uint32_t>(slot);
}

// Host/sequential insert-or-find: returns the value stored for key, storing `value` (and setting
// *inserted) when absent.
DSP_HOST_DEVICE DSP_FORCEINLINE uint32_t relabel_insert(uint64_t* slots, uint64_t mask, int shift,
                                                        int64_t key, uint32_t value,
                                                        bool* inserted) {
  uint64_t h = relabel_hash(key, shift);
  const uint64_t want = static_cast<uint64_t>(key + 1);
  while (true) {
    uint64_t s = slots[h];
    if (s == kEmptySlot) {
      slots[h] = relabel_slot(key, value);
      *inserted = true;
      return value;
    }
    if ((s >> 32) == want) {
      *inserted = false;
      return relabel_slot_value(s);
    }
    h = (h + 1) & mask;
  }
}

DSP_HOST_DEVICE DSP_FORCEINLINE uint32_t relabel_find(const uint64_t* slots, uint64_t mask,
                                                      int shift, int64_t key) {
  uint64_t h = relabel_hash(key, shift);
  const uint64_t want = static_cast<uint64_t>(key + 1);
  while (true) {
    uint64_t s = slots[h];
    if ((s >> 32) == want || s == kEmptySlot) return relabel_slot_value(s);
    h = (h + 1) & mask;
  }
}

// Concurrent insert of the device relabel (any order, any concurrency): offers position `pos` as
// the first occurrence of `key`. Slots of one key differ only in their low 32 bits, so a 64-bit
// atomic minimum keeps the smallest position: afterwards every key's slot holds its first one.
DSP_HOST_DEVICE DSP_FORCEINLINE void relabel_offer_min(uint64_t* slots, uint64_t mask, int shift,
                                                       int64_t key, uint32_t pos) {
  const uint64_t mine = relabel_slot(key, pos);
  const uint64_t want = static_cast<uint64_t>(key + 1);
  uint64_t h = relabel_hash(key, shift);
  while (true) {
    const uint64_t prev = atomic_cas_u64(slots + h, kEmptySlot, mine);
    if (prev == kEmptySlot) return;
    if ((prev >> 32) == want) {
      atomic_min_u64(slots + h, mine);
      return;
    }
    h = (h + 1) & mask;
  }
}

}  // namespace dsp::csp
