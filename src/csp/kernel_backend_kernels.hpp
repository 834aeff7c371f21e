#pragma once
// The per-element functors of the device sampler backend (kernel_backend.hpp): the scalars of a
// sample call, the per-task draws (plain and degree-scheduled), the relabel table's steps, the
// grouping by owner and the moves of picks. Each is a DSP_HOST_DEVICE operator() over one
// position, launched by the executor (core/host_exec.hpp or CudaExec), so the CPU tests run
// exactly what a GPU runs.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/group_kernels.hpp"
#include "core/host_device.hpp"
#include "core/recycle_pool.hpp"
#include "core/rng.hpp"
#include "csp/backend.hpp"
#include "csp/degree_schedule.hpp"
#include "csp/sample_kernels.hpp"
#include "csp/sampler.hpp"
#include "csp/temporal_kernels.hpp"

namespace dsp {
namespace kernels {

// The scalars of one sample call, in executor memory, so that a replayed capture of its sequence
// (SamplerOptions::cuda_graphs) reads this call's: the task count (the sequence may run over more
// positions: those past it take no part), the key and LABOR's variates.
struct SampleParams {
  int64_t n;
  uint64_t key;
  csp::LaborVariates labor;
};

struct TaskFanout {
  const SampleParams* params;
  const int64_t* tasks;
  const int64_t* indptr;  // csp::slot_needs_degree's tasks: their room is min(k, degree)
  int64_t row_base;
  bool replace;
  int64_t* fan;
  DSP_HOST_DEVICE void operator()(int64_t i) const {
    if (i >= params->n) {
      fan[i] = 0;
      return;
    }
    const int k = csp::task_fanout(tasks[i]);
    int64_t room = k;
    if (csp::slot_needs_degree(k, replace)) {
      const int64_t r = csp::task_id(tasks[i]) - row_base;
      room = indptr[r + 1] - indptr[r] < k ? indptr[r + 1] - indptr[r] : k;
    }
    fan[i] = room;
  }
};

template <class Id>
struct SampleTask {
  const SampleParams* params;
  const int64_t* tasks;
  const int64_t* indptr;
  const Id* indices;       // the whole neighbour array (executor memory, or host through UVA)
  const Id* hot_indices;   // rows copied to executor memory, or null
  const int64_t* row_loc;  // [rows]: offset of a row in hot_indices, -1 if not there; or null
  int64_t row_base;
  const double* cum;
  const float* weights;
  bool weighted, replace;
  const int64_t* slot;
  int32_t* cnt;
  int64_t* out;  // positions first, converted to ids in place
  float* outw;
  csp::TaskExclusions ex;    // uniform only; ex.tasks null: none
  const int64_t* task_time;  // temporal: task i's seed time (csp::temporal_positions), or null
  const int64_t* times;      // temporal: the edge times of every entry
  csp::TemporalStrategy strategy;
  DSP_HOST_DEVICE void operator()(int64_t i) const { run(i, nullptr, 0); }
  // Task i; its positions go to `shared` (a thread's slot of `slot_cap` positions) when
  // csp::uses_shared_slot says so, else to its output slot, converted to ids in place.
  DSP_HOST_DEVICE void run(int64_t i, int64_t* shared, int slot_cap) const {
    if (i >= params->n) return;
    const uint64_t key = params->key;
    const csp::LaborVariates& labor = params->labor;  // on: LABOR's picks (csp::labor_positions)
    const int64_t v = csp::task_id(tasks[i]);
    const int k = csp::task_fanout(tasks[i]);
    const int64_t p0 = indptr[v - row_base], deg = indptr[v - row_base + 1] - p0;
    RngStream s(key, static_cast<uint64_t>(v), csp::kPurposeNodeWise);
    int64_t* o = out + slot[i];
    int64_t* pos = shared && csp::uses_shared_slot(deg, k, slot_cap) ? shared : o;
    const int64_t loc = row_loc ? row_loc[v - row_base] : -1;
    const Id* row = loc >= 0 ? hot_indices + loc : indices + p0;
    const int c = task_time
                      ? csp::temporal_positions(times + p0, deg, task_time[i], k, strategy, replace,
                                                csp::temporal_stream(key, v, task_time[i]), pos)
                  : labor.on ? csp::labor_positions(row, deg, k, labor, pos)
                  : ex.tasks ? csp::excluding_task(ex, i, v, row, deg, k, replace, s, pos)
                             : csp::sample_positions(deg, k, weighted, replace,
                                                     weighted ? cum + p0 : nullptr, s, pos);
    for (int j = 0; j < c; ++j) {
      if (outw) outw[slot[i] + j] = weights[p0 + pos[j]];
      o[j] = static_cast<int64_t>(row[pos[j]]);
    }
    cnt[i] = c;
  }
};

// Sort key of task i (csp::degree_key of its row's degree).
struct TaskDegreeKey {
  const SampleParams* params;
  const int64_t* tasks;
  const int64_t* indptr;
  int64_t row_base;
  int64_t* keys;
  DSP_HOST_DEVICE void operator()(int64_t i) const {
    if (i >= params->n) {
      keys[i] = 0;  // sorted last (descending, stable)
      return;
    }
    const int64_t r = csp::task_id(tasks[i]) - row_base;
    keys[i] = csp::degree_key(indptr[r + 1] - indptr[r]);
  }
};

// The turbo kernel (csp/degree_schedule.hpp): thread t of block b samples the task at the sorted
// position WarpSnake gives it, with the block's shared memory as kThreads slots of slot_cap
// positions. Results land at the task's own slots, so no merge follows.
template <class Id>
struct TurboSampleTask {
  SampleTask<Id> task;
  const int64_t* order;  // sorted position -> task
  csp::WarpSnake geo;
  int slot_cap;
  DSP_HOST_DEVICE void operator()(int64_t b, int t, void* shared) const {
    const int64_t p = geo.position(b, t);
    if (p < 0) return;
    task.run(order[p], static_cast<int64_t*>(shared) + static_cast<int64_t>(t) * slot_cap,
             slot_cap);
  }
};

struct Iota {
  int64_t* out;
  DSP_HOST_DEVICE void operator()(int64_t i) const { out[i] = i; }
};

struct WidenCounts {
  const int32_t* cnt;
  int64_t* wide;
  const int64_t* live = nullptr;  // or: positions from *live on count 0 (cnt is not read there)
  DSP_HOST_DEVICE void operator()(int64_t i) const { wide[i] = live && i >= *live ? 0 : cnt[i]; }
};

struct CompactPicks {
  const SampleParams* params;
  const int32_t* cnt;
  const int64_t *slot, *out;
  const float* outw;
  const int64_t* offsets;
  int64_t* picks;
  float* picks_w;
  DSP_HOST_DEVICE void operator()(int64_t i) const {
    if (i >= params->n) return;
    const int64_t from = slot[i], to = offsets[i];
    for (int j = 0; j < cnt[i]; ++j) {
      picks[to + j] = out[from + j];
      if (picks_w) picks_w[to + j] = outw[from + j];
    }
  }
};

// relabel's keys (destinations, then picks) and their table. The destination count *nd and the
// picks' offsets are executor memory (a replayed capture reads this call's): the first
// offsets[*nd] of the picks' positions hold picks, and positions past *nd + offsets[*nd] (those of
// the picks' bound, or of a captured shape) take no part.
struct RelabelTable {
  const int64_t* keys;
  uint64_t* table;
  uint64_t mask;
  int shift;
  const int64_t* nd;
  const int64_t* offsets;
  DSP_HOST_DEVICE bool valid(int64_t i) const { return i < *nd + offsets[*nd]; }
  DSP_HOST_DEVICE uint32_t first(int64_t i) const {
    return csp::relabel_find(table, mask, shift, keys[i]);
  }
};

// keys[i]: destination i, then pick i - nd, for the valid positions.
struct RelabelKeys {
  RelabelTable t;
  const int64_t *dst, *nbrs;
  int64_t* keys;
  DSP_HOST_DEVICE void operator()(int64_t i) const {
    if (!t.valid(i)) return;
    const int64_t nd = *t.nd;
    keys[i] = i < nd ? dst[i] : nbrs[i - nd];
  }
};

struct RelabelOffer {
  RelabelTable t;
  DSP_HOST_DEVICE void operator()(int64_t i) const {
    if (t.valid(i)) csp::relabel_offer_min(t.table, t.mask, t.shift, t.keys[i], uint32_t(i));
  }
};

struct RelabelFlag {
  RelabelTable t;
  int64_t* flag;
  DSP_HOST_DEVICE void operator()(int64_t i) const {
    flag[i] = t.valid(i) && t.first(i) == static_cast<uint32_t>(i) ? 1 : 0;
  }
};

// ids[i] = exclusive prefix of the first-occurrence flags at i's first occurrence.
struct RelabelAssign {
  RelabelTable t;
  const int64_t* ids;  // [n + 1]: ids[i] = flags before i
  int64_t* local;
  int64_t* src_ids;
  DSP_HOST_DEVICE void operator()(int64_t i) const {
    if (!t.valid(i)) return;
    const uint32_t first = t.first(i);
    local[i] = ids[first];
    if (first == static_cast<uint32_t>(i)) src_ids[ids[i]] = t.keys[i];
  }
};

// relabel's two sizes (one thread): the picks' exact count and the source count (the flags' sum
// over the m positions).
struct RelabelSizes {
  RelabelTable t;
  const int64_t* ids;  // [m + 1]
  int64_t m;
  int64_t* sizes;
  DSP_HOST_DEVICE void operator()(int64_t) const {
    sizes[0] = t.offsets[*t.nd];
    sizes[1] = ids[m];
  }
};

// Owner rank of frontier node i (csp::owner_of), or -1 when it gets no task (fanout 0) or is past
// the node count *live.
struct GroupOwner {
  const int64_t* live;
  const int64_t* frontier;
  const int32_t* fanout;  // or null: `uniform` for every node
  int uniform;
  const int64_t* offsets;  // [P + 1]
  int P;
  int64_t* owner;
  DSP_HOST_DEVICE void operator()(int64_t i) const {
    if (i >= *live) {
      owner[i] = -1;
      return;
    }
    const int k = fanout ? fanout[i] : uniform;
    owner[i] = k <= 0 ? -1 : (P == 1 ? 0 : csp::owner_of(offsets, P, frontier[i]));
  }
};

// The owner of source i of relabel's list, or -1 past the source count (*count).
struct SourceOwner {
  const int64_t* src;
  const int64_t* count;
  const int64_t* offsets;  // [P + 1]
  int P;
  int64_t* owner;
  DSP_HOST_DEVICE void operator()(int64_t i) const {
    owner[i] = i >= *count ? -1 : (P == 1 ? 0 : csp::owner_of(offsets, P, src[i]));
  }
};

struct GroupScatter {
  const int64_t* frontier;
  const int32_t* fanout;
  int uniform;
  const int64_t* owner;
  int64_t n;
  const int64_t* rank;  // exclusive scan of the flag matrix
  int64_t* tasks;
  int64_t* perm;
  DSP_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t p = owner[i];
    if (p < 0) return;
    const int64_t at = rank[p * n + i];
    tasks[at] = csp::pack_task(frontier[i], fanout ? fanout[i] : uniform);
    perm[at] = i;
  }
};

// Grouped position pos's count at its frontier index (positions from *live take no part).
struct ScatterCounts {
  const int64_t* live;
  const int64_t* perm;
  const int32_t* cnt;
  int64_t* to;  // [nf], zeroed
  DSP_HOST_DEVICE void operator()(int64_t pos) const {
    if (pos < *live) to[perm[pos]] = cnt[pos];
  }
};

// Grouped position pos's picks (from start[pos]) to its frontier index's offset (positions from
// *live take no part).
struct MovePicks {
  const int64_t* live;
  const int64_t* perm;
  const int32_t* cnt;
  const int64_t* start;
  const int64_t* offsets;
  const int64_t* nbrs;
  const float* weights;
  int64_t* out;
  float* outw;
  DSP_HOST_DEVICE void operator()(int64_t pos) const {
    if (pos >= *live) return;
    const int64_t from = start[pos], to = offsets[perm[pos]];
    for (int j = 0; j < cnt[pos]; ++j) {
      out[to + j] = nbrs[from + j];
      if (outw) outw[to + j] = weights[from + j];
    }
  }
};

}  // namespace kernels

}  // namespace dsp
