// The CPU sampler backend: the local sample and relabel steps of a CSP layer on OpenMP threads
// (backend.hpp). Per-node logic: sample_kernels.hpp.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "core/group_kernels.hpp"
#include "core/host_exec.hpp"
#include "core/huge_pages.hpp"
#include "core/parallel.hpp"
#include "core/rng.hpp"
#include "csp/backend.hpp"
#include "csp/degree_schedule.hpp"
#include "csp/sample_kernels.hpp"
#include "csp/sampler.hpp"
#include "csp/temporal_kernels.hpp"

namespace dsp {
namespace {

using csp::kPurposeNodeWise;
using csp::task_fanout;
using csp::task_id;

class CpuSamplerBackend final : public SamplerBackend {
 public:
  CpuSamplerBackend(const LocalTopology& topo, const SamplerOptions& opts, CpuBackendOptions co)
      : topo_(topo),
        biased_(opts.biased()),
        replace_(opts.replace()),
        turbo_(opts.kernel == SampleKernel::kTurbo),
        strategy_(opts.temporal() ? opts.temporal()->strategy : csp::TemporalStrategy::kUniform),
        grain_(std::max<int64_t>(co.split_grain, 1)) {
    // The arrays a sampled edge reads at random on huge pages (a copy, when memory allows): with
    // 4 KiB pages nearly every neighbour read also misses the TLB.
    indptr_copy_ = huge_page_copy(topo.indptr, (topo.num_rows + 1) * sizeof(int64_t));
    indices_copy_ = huge_page_copy(topo.indices, topo.indices_bytes());
    if (indptr_copy_.data) topo_.indptr = static_cast<const int64_t*>(indptr_copy_.data.get());
    if (indices_copy_.data) topo_.indices = indices_copy_.data.get();
    // Beyond this rank's memory share the neighbour rows are mostly read from disk: the tasks
    // are sampled by kWaitingDepth threads at once (waiting_parallel_for), each waiting on its
    // page, where the rank's own threads would wait for each read in turn. The draws are the
    // same (each task's stream is its own): only which thread waits changes.
    waits_ =
        !indices_copy_.data && topo.indices_mapped && beyond_memory_share(topo.indices_bytes());
    if (!indices_copy_.data && topo.indices_mapped) {
      advise_random_reads(topo.indices, topo.indices_bytes(), "the sampler's neighbour array");
    }
  }
  std::string name() const override { return "cpu"; }
  Device device() const override { return Device::cpu(); }
  MemorySpace memory() const override { return MemorySpace::kHost; }
  std::unique_ptr<BackendBuffer> make_buffer() const override {
    return std::make_unique<BackendBufferOf<HostExec::Buffer>>();
  }
  void to_backend(void* dst, const void* host, size_t bytes) override {
    if (bytes) std::memcpy(dst, host, bytes);
  }
  void to_host(void* host, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(host, src, bytes);
  }
  void group(const int64_t* frontier, int64_t n, const int32_t* fanout, int uniform,
             const std::vector<int64_t>& offsets, int64_t* tasks, int64_t* perm,
             std::vector<int64_t>& counts, const int64_t* known) override;
  int64_t sample(const int64_t* tasks, int64_t n, int max_fanout, int64_t max_picks, uint64_t key,
                 int32_t* counts, BackendBuffer& nbrs, BackendBuffer* weights,
                 const TaskExclusions* ex) override;
  void set_labor(const csp::LaborVariates& lv) override { labor_ = lv; }
  void set_task_times(const int64_t* times) override { task_times_ = times; }
  // The device backend's per-element functors, run in a loop.
  void gather(const int64_t* values, const int64_t* index, int64_t n, int64_t* out) override {
    const kernels::GatherAt op{values, index, out};
    for (int64_t i = 0; i < n; ++i) op(i);
  }
  void pair_keys(const int64_t* offsets, const int64_t* nbrs, const int64_t* tags, int64_t nd,
                 int64_t K, int64_t* out) override {
    const csp::PairKeys op{offsets, nbrs, tags, K, out};
    for (int64_t i = 0; i < nd; ++i) op(i);
  }
  std::vector<int64_t> segment_sums(const int32_t* counts,
                                    const std::vector<int64_t>& off) override;
  void unpermute(const int64_t* perm, int64_t ng, int64_t nf, const int32_t* counts,
                 const int64_t* nbrs, const float* weights, int64_t picks,
                 BackendBuffer& out_offsets, BackendBuffer& out_nbrs,
                 BackendBuffer* out_weights) override;
  void relabel(const int64_t* dst, int64_t nd, const LayerPicks& lo, int layer, Block& b,
               BackendBuffer* src, OwnerCounts* owners) override;

 private:
  template <class Id>
  void sample_tasks(const int64_t* tasks, int64_t n, uint64_t key, const int64_t* slot,
                    bool compact, int32_t* cnt, int64_t* out, float* outw) const;
  bool sample_split(const int64_t* tasks, int64_t n, uint64_t key, const int64_t* slot,
                    int32_t* cnt, int64_t* out, float* outw);
  // The split of tasks over threads: parallel_for's equal chunks, or split_'s bins (turbo).
  template <class F>
  void for_split(int64_t n, const F& fn) const;
  // Not inlined into relabel(): inlined, its probe loop loses registers (callgrind: +5%).
  __attribute__((noinline)) void relabel_serial(const int64_t* dst, int64_t nd,
                                                const LayerPicks& lo, int layer, Block& b);
  void relabel_parallel(const int64_t* dst, int64_t nd, const LayerPicks& lo, int layer,
                        int threads, Block& b);

  LocalTopology topo_;
  HugePageBuffer indptr_copy_, indices_copy_;
  bool waits_ = false;  // the neighbour array is a mapping beyond memory
  bool biased_, replace_, turbo_;
  csp::TemporalStrategy strategy_;
  csp::LaborVariates labor_;
  const int64_t* task_times_ = nullptr;  // set_task_times: temporal tasks' seed times, or null
  int64_t grain_;
  const csp::SnakeSplit* split_ = nullptr;  // set while sample_split runs
  // Set while sample runs: the call's exclusions (or null), and the original index of the task
  // at each position of the tasks sampled (null: the same position; the turbo split's order).
  const TaskExclusions* ex_ = nullptr;
  const int64_t* ex_order_ = nullptr;
  csp::SnakeSplit snake_;
  std::vector<int64_t> split_keys_, split_tasks_, split_slot_;
  std::vector<int32_t> split_cnt_;
  std::vector<uint64_t> table_;    // relabel table, reused across layers and batches
  std::vector<double> new_ratio_;  // per layer: new source ids per pick, last batch
  std::vector<int64_t> slot_;      // per-task output slots, reused
  std::vector<int32_t> owner_;     // group: per frontier node
  std::vector<int64_t> start_;     // unpermute: per grouped position
};

// Task i's positions are drawn into out[slot[i], ...); its ids replace them there, or, with
// `compact` (one chunk: the tasks run in order on one thread), go straight after the previous
// task's ids, so that no compaction pass is needed. That is safe in place: the write offset
// never passes slot[i], and task i's ids end before slot[i + 1], where later tasks' positions are.
template <class Id>
void CpuSamplerBackend::sample_tasks(const int64_t* tasks, int64_t n, uint64_t key,
                                     const int64_t* slot, bool compact, int32_t* cnt, int64_t* out,
                                     float* outw) const {
  const int64_t* ip = topo_.indptr;
  const Id* idx = static_cast<const Id*>(topo_.indices);
  const float* w = topo_.weights;
  const double* cum = topo_.cum;
  const bool biased = biased_, replace = replace_;
  const int64_t base = topo_.row_base;
  const TaskExclusions ex = ex_ ? *ex_ : TaskExclusions{};
  const int64_t* ex_order = ex_order_;
  const csp::LaborVariates labor = labor_;
  const int64_t* task_times = task_times_;
  const int64_t* times = topo_.times;
  const csp::TemporalStrategy strategy = strategy_;
  for_split(n, [&](int64_t b, int64_t e) {
    // Three-stage software pipeline over the latency chain task -> indptr -> row entries, so many
    // misses are in flight at once: the indptr entry of task i+kFar is prefetched; task i+kNear
    // (whose indptr is cached by now) draws its positions, which need only the degree, and
    // prefetches the row entries at those positions; task i turns positions into ids.
    constexpr int64_t kFar = 24, kNear = 12;
    auto draw = [&](int64_t i) {
      const int64_t v = task_id(tasks[i]);
      const int64_t lv = v - base;
      const int64_t p0 = ip[lv], deg = ip[lv + 1] - p0;
      RngStream s(key, static_cast<uint64_t>(v), kPurposeNodeWise);
      int64_t* o = out + slot[i];
      int c;
      if (task_times) {
        const int64_t T = task_times[ex_order ? ex_order[i] : i];
        c = csp::temporal_positions(times + p0, deg, T, task_fanout(tasks[i]), strategy, replace,
                                    csp::temporal_stream(key, v, T), o);
      } else if (labor.on) {
        c = csp::labor_positions(idx + p0, deg, task_fanout(tasks[i]), labor, o);
      } else if (ex.tasks) {
        c = csp::excluding_task(ex, ex_order ? ex_order[i] : i, v, idx + p0, deg,
                                task_fanout(tasks[i]), replace, s, o);
      } else {
        c = csp::sample_positions(deg, task_fanout(tasks[i]), biased, replace,
                                  biased ? cum + p0 : nullptr, s, o);
      }
      for (int j = 0; j < c; ++j) __builtin_prefetch(idx + p0 + o[j]);
      cnt[i] = c;
    };
    for (int64_t i = b; i < std::min(e, b + kFar); ++i) {
      __builtin_prefetch(ip + (task_id(tasks[i]) - base));
    }
    for (int64_t i = b; i < std::min(e, b + kNear); ++i) draw(i);
    int64_t at = slot[b];  // where the next ids go with `compact`
    for (int64_t i = b; i < e; ++i) {
      if (i + kFar < e) __builtin_prefetch(ip + (task_id(tasks[i + kFar]) - base));
      if (i + kNear < e) draw(i + kNear);
      const int64_t p0 = ip[task_id(tasks[i]) - base];
      const int64_t* o = out + slot[i];
      const int64_t to = compact ? at : slot[i];
      const int c = cnt[i];
      if (outw) {
        for (int j = 0; j < c; ++j) outw[to + j] = w[p0 + o[j]];
      }
      for (int j = 0; j < c; ++j) out[to + j] = static_cast<int64_t>(idx[p0 + o[j]]);
      at += c;
    }
  });
}

template <class F>
void CpuSamplerBackend::for_split(int64_t n, const F& fn) const {
  if (waits_) {
    waiting_parallel_for(0, n, 256, kWaitingDepth, fn);
    return;
  }
  if (!split_) {
    parallel_for(0, n, grain_, fn);
    return;
  }
  const int bins = static_cast<int>(split_->bounds.size()) - 1;
  const int64_t* bounds = split_->bounds.data();
#pragma omp parallel for num_threads(bins) schedule(static, 1)
  for (int c = 0; c < bins; ++c) fn(bounds[c], bounds[c + 1]);
}

// The turbo split (degree_schedule.hpp): the tasks in SnakeSplit order, each thread's bin one
// range of it; the slots stay the tasks' own, so only the counts are permuted back. Returns
// whether the picks came out compacted (one chunk).
bool CpuSamplerBackend::sample_split(const int64_t* t, int64_t n, uint64_t key, const int64_t* slot,
                                     int32_t* cnt, int64_t* out, float* outw) {
  const int bins = static_cast<int>(parallel_chunks(n, grain_));
  const bool compact = bins <= 1 && !waits_;
  auto run = [&](const int64_t* tasks, const int64_t* slots, int32_t* counts) {
    if (topo_.idx32) {
      sample_tasks<int32_t>(tasks, n, key, slots, compact, counts, out, outw);
    } else {
      sample_tasks<int64_t>(tasks, n, key, slots, compact, counts, out, outw);
    }
  };
  if (!turbo_ || compact || waits_) {  // turbo's split only balances the threads' work
    run(t, slot, cnt);
    return compact;
  }
  split_keys_.resize(n);
  const int64_t* ip = topo_.indptr;
  const int64_t base = topo_.row_base;
  parallel_for(0, n, grain_, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t r = task_id(t[i]) - base;
      split_keys_[i] = csp::degree_key(ip[r + 1] - ip[r]);
    }
  });
  snake_.build(split_keys_.data(), n, bins);
  const int64_t* order = snake_.order.data();
  split_tasks_.resize(n);
  split_slot_.resize(n);
  split_cnt_.resize(n);
  parallel_for(0, n, grain_, [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) {
      split_tasks_[j] = t[order[j]];
      split_slot_[j] = slot[order[j]];
    }
  });
  split_ = &snake_;
  ex_order_ = order;
  run(split_tasks_.data(), split_slot_.data(), split_cnt_.data());
  split_ = nullptr;
  ex_order_ = nullptr;
  parallel_for(0, n, grain_, [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) cnt[order[j]] = split_cnt_[j];
  });
  return false;
}

// Samples into per-task slots at the fanout prefix, then compacts in place (unless one chunk
// wrote them compacted); the buffers and slot_ keep their capacity across layers and batches (no
// page faults on the hot path).
int64_t CpuSamplerBackend::sample(const int64_t* t, int64_t n, int /*max_fanout*/,
                                  int64_t /*max_picks*/, uint64_t key, int32_t* cnt,
                                  BackendBuffer& nbrs, BackendBuffer* weights,
                                  const TaskExclusions* ex) {
  slot_.resize(n + 1);
  int64_t* slot = slot_.data();
  slot[0] = 0;
  const int64_t* ip = topo_.indptr;
  for (int64_t i = 0; i < n; ++i) {
    const int k = task_fanout(t[i]);
    int64_t room = k;
    if (csp::slot_needs_degree(k, replace_)) {  // min(k, degree) picks: a fanout of -1 asks 2^22
      const int64_t r = csp::task_id(t[i]) - topo_.row_base;
      room = std::min<int64_t>(k, ip[r + 1] - ip[r]);
    }
    slot[i + 1] = slot[i] + room;
  }
  int64_t* res = nbrs.reserve_n<int64_t>(slot[n]);
  float* resw = biased_ ? weights->reserve_n<float>(slot[n]) : nullptr;
  ex_ = ex;
  const bool compacted = sample_split(t, n, key, slot, cnt, res, resw);
  ex_ = nullptr;
  int64_t o = 0;
  for (int64_t i = 0; i < n && compacted; ++i) o += cnt[i];
  for (int64_t i = 0; i < n && !compacted; ++i) {
    if (o != slot[i]) {
      std::memmove(res + o, res + slot[i], cnt[i] * sizeof(int64_t));
      if (resw) std::memmove(resw + o, resw + slot[i], cnt[i] * sizeof(float));
    }
    o += cnt[i];
  }
  return o;
}

void CpuSamplerBackend::group(const int64_t* frontier, int64_t nf, const int32_t* fanout,
                              int uniform, const std::vector<int64_t>& offsets, int64_t* tasks,
                              int64_t* perm, std::vector<int64_t>& counts,
                              const int64_t* /*known*/) {  // host memory: counted as grouped
  const int P = static_cast<int>(offsets.size()) - 1;
  owner_.resize(nf);
  counts.assign(P, 0);
  for (int64_t i = 0; i < nf; ++i) {
    const int k = fanout ? fanout[i] : uniform;
    if (k <= 0) {
      owner_[i] = -1;
      continue;
    }
    const int o = P == 1 ? 0 : csp::owner_of(offsets.data(), P, frontier[i]);
    owner_[i] = o;
    ++counts[o];
  }
  std::vector<int64_t> cur(P, 0);
  for (int p = 1; p < P; ++p) cur[p] = cur[p - 1] + counts[p - 1];
  for (int64_t i = 0; i < nf; ++i) {
    if (owner_[i] < 0) continue;
    const int64_t pos = cur[owner_[i]]++;
    perm[pos] = i;
    tasks[pos] = csp::pack_task(frontier[i], fanout ? fanout[i] : uniform);
  }
}

std::vector<int64_t> CpuSamplerBackend::segment_sums(const int32_t* counts,
                                                     const std::vector<int64_t>& off) {
  std::vector<int64_t> sums(off.size() - 1, 0);
  for (size_t p = 0; p + 1 < off.size(); ++p) {
    for (int64_t i = off[p]; i < off[p + 1]; ++i) sums[p] += counts[i];
  }
  return sums;
}

void CpuSamplerBackend::unpermute(const int64_t* perm, int64_t ng, int64_t nf,
                                  const int32_t* counts, const int64_t* nbrs, const float* weights,
                                  int64_t /*picks: off[nf], known here*/,
                                  BackendBuffer& out_offsets, BackendBuffer& out_nbrs,
                                  BackendBuffer* out_weights) {
  int64_t* off = out_offsets.reserve_n<int64_t>(nf + 1);
  off[0] = 0;
  if (!perm) {
    for (int64_t i = 0; i < nf; ++i) off[i + 1] = off[i] + counts[i];
    return;
  }
  std::fill(off + 1, off + nf + 1, 0);
  start_.resize(ng);
  int64_t at = 0;
  for (int64_t pos = 0; pos < ng; ++pos) {
    start_[pos] = at;
    at += counts[pos];
    off[perm[pos] + 1] = counts[pos];
  }
  for (int64_t i = 0; i < nf; ++i) off[i + 1] += off[i];
  int64_t* out = out_nbrs.reserve_n<int64_t>(off[nf]);
  float* outw = weights ? out_weights->reserve_n<float>(off[nf]) : nullptr;
  for (int64_t pos = 0; pos < ng; ++pos) {
    const int64_t to = off[perm[pos]];
    std::memcpy(out + to, nbrs + start_[pos], counts[pos] * sizeof(int64_t));
    if (outw) std::memcpy(outw + to, weights + start_[pos], counts[pos] * sizeof(float));
  }
}

void CpuSamplerBackend::relabel(const int64_t* dst, int64_t nd, const LayerPicks& lo, int layer,
                                Block& b, BackendBuffer* src, OwnerCounts* owners) {
  if (static_cast<int>(new_ratio_.size()) <= layer) new_ratio_.resize(layer + 1, 1.0);
  const int64_t ne = lo.offsets[nd];  // lo.total may be a bound
  // The parallel relabel does about 1.8x the serial work at 2 threads (callgrind: 289M vs 159M
  // instructions on a products-sized batch), so its slower thread does as much as the serial pass:
  // it can only gain from 3 threads on.
  const int threads = num_threads();
  if (threads >= kParallelRelabelMinThreads && ne >= kParallelRelabelMinEdges &&
      nd + ne < (int64_t{1} << 32) - 1) {
    relabel_parallel(dst, nd, lo, layer, threads, b);
  } else {
    relabel_serial(dst, nd, lo, layer, b);
  }
  b.num_src = static_cast<int64_t>(b.src_ids.size());
  if (ne > 0) new_ratio_[layer] = static_cast<double>(b.num_src - nd) / static_cast<double>(ne);
  b.indptr.assign(lo.offsets, lo.offsets + nd + 1);
  if (lo.weights) {
    b.weights.assign(lo.weights, lo.weights + ne);
  } else {
    b.weights.clear();
  }
  if (src) {
    std::memcpy(src->reserve_n<int64_t>(b.num_src), b.src_ids.data(), b.num_src * sizeof(int64_t));
  }
  if (owners) count_owners(b.src_ids.data(), b.num_src, *owners);
}

void CpuSamplerBackend::relabel_serial(const int64_t* dst, int64_t nd, const LayerPicks& lo,
                                       int layer, Block& b) {
  const int64_t ne = lo.offsets[nd];  // lo.total may be a bound
  // The table is sized for the distinct ids this layer produced in the previous batch (share of
  // new ids per pick), at load <= 1/2, and doubled if a batch outgrows it: a table sized for the
  // worst case (every pick new) would be several times larger and fall out of cache.
  const double expect = static_cast<double>(nd) + 1.1 * new_ratio_[layer] * ne;
  uint64_t cap = 1024;
  int bits = 10;
  while (static_cast<double>(cap) < 2 * expect) {
    cap <<= 1;
    ++bits;
  }
  if (table_.size() < cap) table_.resize(cap);
  std::memset(table_.data(), 0, cap * sizeof(uint64_t));
  uint64_t* t = table_.data();
  uint64_t mask = cap - 1;
  int shift = 64 - bits;
  uint64_t limit = cap / 4 * 3;  // grow beyond load 3/4
  b.num_dst = nd;
  b.src_ids.reserve(static_cast<size_t>(expect) + 16);
  b.src_ids.assign(dst, dst + nd);
  bool ins = false;
  for (int64_t i = 0; i < nd; ++i) {
    csp::relabel_insert(t, mask, shift, dst[i], static_cast<uint32_t>(i), &ins);
  }
  b.indices.resize(ne);
  const int64_t* nb = lo.nbrs;
  constexpr int64_t kAhead = 12;
  for (int64_t e = 0; e < ne; ++e) {
    if (e + kAhead < ne) __builtin_prefetch(t + csp::relabel_hash(nb[e + kAhead], shift));
    uint32_t next = static_cast<uint32_t>(b.src_ids.size());
    uint32_t id = csp::relabel_insert(t, mask, shift, nb[e], next, &ins);
    if (ins) {
      b.src_ids.push_back(nb[e]);
      if (b.src_ids.size() > limit) {
        // Rehash into a table twice as large; ids do not change.
        cap <<= 1;
        ++bits;
        if (table_.size() < cap) table_.resize(cap);
        std::memset(table_.data(), 0, cap * sizeof(uint64_t));
        t = table_.data();
        mask = cap - 1;
        shift = 64 - bits;
        limit = cap / 4 * 3;
        for (size_t j = 0; j < b.src_ids.size(); ++j) {
          csp::relabel_insert(t, mask, shift, b.src_ids[j], static_cast<uint32_t>(j), &ins);
        }
      }
    }
    b.indices[e] = id;
  }
}

namespace {

// Phase 1 of the parallel relabel: offers position `pos` as the first occurrence of `key`. The slot
// of a key ends up holding its minimal position: slots of one key compare by their low 32 bits,
// so a compare-exchange loop lowering the 64-bit value is an atomic min of the position. Returns
// the key's slot; *claimed is set when this call took an empty slot, *won when the slot held
// `pos` right after this call (claimed, or lowered to it).
inline uint64_t offer_first(uint64_t* t, uint64_t mask, int shift, int64_t key, uint32_t pos,
                            bool* claimed, bool* won) {
  const uint64_t mine = csp::relabel_slot(key, pos);
  const uint64_t want = static_cast<uint64_t>(key + 1);
  uint64_t h = csp::relabel_hash(key, shift);
  uint64_t s = __atomic_load_n(t + h, __ATOMIC_RELAXED);
  while (true) {
    if (s == csp::kEmptySlot) {
      if (__atomic_compare_exchange_n(t + h, &s, mine, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        *claimed = *won = true;
        return h;
      }
      continue;  // lost the race: s is what the winner stored (maybe this very key)
    }
    if ((s >> 32) == want) {
      *claimed = false;
      *won = false;
      while (s > mine) {
        if (__atomic_compare_exchange_n(t + h, &s, mine, false, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
          *won = true;
          break;
        }
      }
      return h;
    }
    h = (h + 1) & mask;
    s = __atomic_load_n(t + h, __ATOMIC_RELAXED);
  }
}

// Flags in b.indices during the parallel relabel, above the slot index (< 2^33) / the id.
constexpr int64_t kCandidate = int64_t{1} << 62;  // phase 1 won; phase 2: first occurrence
constexpr int64_t kFinal = int64_t{1} << 61;      // the entry is the pick's id already
constexpr int kClaimBatch = 64;                   // claims a thread makes before publishing them

// The parallel relabel's table: cap = 2^bits slots (the caller's vector), and the count of
// claimed slots past which a pass stops (load 3/4).
struct RelabelTable {
  uint64_t* t;
  uint64_t cap;
  int shift;  // 64 - bits
  int64_t limit;
};

// The table's bits: as the serial path sizes it (load <= 1/2 for `expect` distinct ids), and at
// least min_cap slots.
inline int parallel_table_bits(double expect, uint64_t min_cap) {
  uint64_t cap = 1024;
  int bits = 10;
  while (static_cast<double>(cap) < 2 * expect || cap < min_cap) {
    cap <<= 1;
    ++bits;
  }
  return bits;
}

// Phase 1 for one thread's positions [pb, pe): offers each position to its key's slot; each
// pick keeps its slot index in idx[e], flagged kCandidate when its offer won. Claims of empty
// slots are published to *claimed_total every kClaimBatch; once the total passes the table's
// limit, *aborted is set and every thread stops at its next publication.
DSP_FORCEINLINE void offer_positions(const RelabelTable& tab, const int64_t* dst, int64_t nd,
                                     const int64_t* nb, int64_t pb, int64_t pe, int64_t* idx,
                                     int64_t* claimed_total, int* aborted) {
  uint64_t* t = tab.t;
  const uint64_t cap = tab.cap;
  const int shift = tab.shift;
  const int64_t limit = tab.limit;
  int64_t unpublished = 0;
  bool stop = false, claimed = false, won = false;
  auto count_claim = [&]() {
    if (++unpublished == kClaimBatch) {
      const int64_t total = __atomic_add_fetch(claimed_total, unpublished, __ATOMIC_RELAXED);
      unpublished = 0;
      if (total > limit) __atomic_store_n(aborted, 1, __ATOMIC_RELAXED);
      stop = __atomic_load_n(aborted, __ATOMIC_RELAXED) != 0;
    }
  };
  constexpr int64_t kAhead = 12;
  for (int64_t p = pb; p < std::min(pe, nd) && !stop; ++p) {
    if (p + kAhead < nd) __builtin_prefetch(t + csp::relabel_hash(dst[p + kAhead], shift));
    offer_first(t, cap - 1, shift, dst[p], static_cast<uint32_t>(p), &claimed, &won);
    if (claimed) count_claim();
  }
  for (int64_t p = std::max(pb, nd); p < pe && !stop; ++p) {
    const int64_t e = p - nd;
    if (p + kAhead < pe) __builtin_prefetch(t + csp::relabel_hash(nb[e + kAhead], shift));
    const uint64_t h =
        offer_first(t, cap - 1, shift, nb[e], static_cast<uint32_t>(p), &claimed, &won);
    idx[e] = static_cast<int64_t>(h) | (won ? kCandidate : 0);
    if (claimed) count_claim();
  }
}

// Phase 2 for the picks [eb, ee) of a chunk after the first: counts the winners that are still
// their slot's position (their key's first occurrence) and unflags the others, undercut by an
// earlier chunk.
DSP_FORCEINLINE int64_t count_first_occurrences(const uint64_t* t, int64_t mask, int64_t nd,
                                                int64_t eb, int64_t ee, int64_t* idx) {
  int64_t c = 0;
  constexpr int64_t kAhead = 16;
  for (int64_t e = eb; e < ee; ++e) {
    if (e + kAhead < ee && (idx[e + kAhead] & kCandidate)) {
      __builtin_prefetch(t + (idx[e + kAhead] & mask));
    }
    if (!(idx[e] & kCandidate)) continue;
    if (csp::relabel_slot_value(t[idx[e] & mask]) == static_cast<uint32_t>(nd + e)) {
      ++c;
    } else {
      idx[e] &= mask;
    }
  }
  return c;
}

// Phase 3 for the picks [eb, ee) of one chunk: gives its first occurrences consecutive ids from
// `id`, in order, writing each id into its slot and the pick's key into src[id].
DSP_FORCEINLINE void number_first_occurrences(uint64_t* t, int64_t mask, const int64_t* nb,
                                              int64_t eb, int64_t ee, int64_t id, int64_t* idx,
                                              int64_t* src) {
  for (int64_t e = eb; e < ee; ++e) {
    if (idx[e] & kCandidate) {
      const int64_t h = idx[e] & mask;
      t[h] = (t[h] & ~uint64_t{0xffffffff}) | static_cast<uint64_t>(id);
      src[id] = nb[e];
      idx[e] = id++ | kFinal;
    }
  }
}

// Phase 4 for the picks [eb, ee): every pick not numbered in phase 3 reads its id from its slot.
DSP_FORCEINLINE void read_ids(const uint64_t* t, int64_t mask, int64_t eb, int64_t ee,
                              int64_t* idx) {
  constexpr int64_t kAhead = 16;
  for (int64_t e = eb; e < ee; ++e) {
    if (e + kAhead < ee && !(idx[e + kAhead] & kFinal)) {
      __builtin_prefetch(t + (idx[e + kAhead] & mask));
    }
    const int64_t x = idx[e];
    idx[e] = x & kFinal ? x & ~kFinal : csp::relabel_slot_value(t[x & mask]);
  }
}

// Phases 1 and 2 on `threads` threads, each zeroing its share of the table first. Returns false
// when the claims passed the table's limit (the pass stopped early); otherwise firsts[c + 1] is
// chunk c's count of first occurrences and *team the number of threads that ran.
bool offer_pass(const RelabelTable& tab, const int64_t* dst, int64_t nd, const int64_t* nb,
                int64_t ne, int64_t* idx, int threads, std::vector<int64_t>& firsts, int* team) {
  uint64_t* t = tab.t;
  const uint64_t cap = tab.cap;
  const int64_t mask = static_cast<int64_t>(cap - 1);
  const int64_t np = nd + ne;
  int64_t claimed_total = 0;
  int aborted = 0;
#pragma omp parallel num_threads(threads)
  {
    const int T = omp_get_num_threads(), me = omp_get_thread_num();
    if (me == 0) *team = T;
    std::memset(t + cap * me / T, 0, (cap * (me + 1) / T - cap * me / T) * sizeof(uint64_t));
#pragma omp barrier
    // (1) atomic min of positions
    const int64_t pb = np * me / T, pe = np * (me + 1) / T;
    offer_positions(tab, dst, nd, nb, pb, pe, idx, &claimed_total, &aborted);
#pragma omp barrier
    if (__atomic_load_n(&aborted, __ATOMIC_RELAXED) == 0) {
      // (2) which winners are first occurrences; the first chunk's all are
      int64_t c = 0;
      const int64_t eb = std::max(pb, nd) - nd, ee = std::max(pe, nd) - nd;
      if (me == 0) {
        for (int64_t e = eb; e < ee; ++e) c += (idx[e] & kCandidate) != 0;
      } else {
        c = count_first_occurrences(t, mask, nd, eb, ee, idx);
      }
      firsts[me + 1] = c;
    }
  }
  return !aborted;
}

// Phases 3 and 4 on the `team` threads of offer_pass, firsts now the chunks' prefix offsets; the
// destination nodes' ids are their positions, copied into src alongside.
void assign_ids(const RelabelTable& tab, const int64_t* dst, int64_t nd, const int64_t* nb,
                int64_t ne, int64_t* idx, int team, const std::vector<int64_t>& firsts,
                int64_t* src) {
  uint64_t* t = tab.t;
  const int64_t mask = static_cast<int64_t>(tab.cap - 1);
  const int64_t np = nd + ne;
#pragma omp parallel num_threads(team)
  {
    const int T = omp_get_num_threads(), me = omp_get_thread_num();
    // The chunks are the first region's; should this team be smaller, its first thread does all.
    const int c0 = T == team ? me : (me == 0 ? 0 : team), c1 = T == team ? me + 1 : team;
    for (int c = c0; c < c1; ++c) {
      std::memcpy(src + nd * c / team, dst + nd * c / team,
                  (nd * (c + 1) / team - nd * c / team) * sizeof(int64_t));
      // (3) consecutive ids for this chunk's first occurrences
      const int64_t eb = std::max(np * c / team, nd) - nd,
                    ee = std::max(np * (c + 1) / team, nd) - nd;
      number_first_occurrences(t, mask, nb, eb, ee, nd + firsts[c], idx, src);
    }
#pragma omp barrier
    // (4) the other picks' ids
    read_ids(t, mask, ne * me / T, ne * (me + 1) / T, idx);
  }
}

}  // namespace

// The CUDA kernel's scheme (cuda/sample_kernels.cu) on OpenMP threads. Positions are 0..nd-1 for
// the destination nodes, then nd + e for pick e; thread c of T takes the c-th of T equal chunks of
// positions in every phase. (1) Every position offers itself to its key's slot with an atomic min,
// so afterwards a slot holds its key's first position; each pick keeps its slot index in
// b.indices, flagged when its offer won. (2) Each thread finds which of its winners are their
// key's first occurrence (a winner can still have been undercut by a smaller position of an
// earlier chunk; the first chunk's winners cannot) and counts them. (3) After a prefix sum over
// the chunk counts, each thread gives its first occurrences consecutive ids from its chunk's
// offset, in order, writing the id into the slot (each slot has one writer: its first occurrence)
// and the key into src_ids. (4) Every other pick reads its id from its slot. Destination nodes are
// distinct and precede every pick, so each is its key's first occurrence and its position already
// is its id. The ids are the ranks of first occurrences in position order: exactly the serial
// first-seen order, whatever the number of threads.
//
// The table is sized as in the serial path; claims of empty slots are counted (published every
// kClaimBatch claims per thread), and if the load passes 3/4 the pass stops and restarts with a
// table twice as large. The published count lags the true one by under 2 * kClaimBatch per
// thread, which the minimum capacity below keeps within the last quarter, so probes always end.
void CpuSamplerBackend::relabel_parallel(const int64_t* dst, int64_t nd, const LayerPicks& lo,
                                         int layer, int threads, Block& b) {
  const int64_t ne = lo.offsets[nd];  // lo.total may be a bound
  const double expect = static_cast<double>(nd) + 1.1 * new_ratio_[layer] * ne;
  const uint64_t min_cap = std::max<uint64_t>(uint64_t{1} << 15, 16ULL * kClaimBatch * threads);
  int bits = parallel_table_bits(expect, min_cap);
  b.num_dst = nd;
  b.indices.resize(ne);
  int64_t* idx = b.indices.data();
  std::vector<int64_t> firsts(threads + 1, 0);  // per chunk, then prefix offsets
  RelabelTable tab{};
  int team = 1;
  while (true) {
    const uint64_t cap = uint64_t{1} << bits;
    if (table_.size() < cap) table_.resize(cap);
    tab = RelabelTable{table_.data(), cap, 64 - bits, static_cast<int64_t>(cap / 4 * 3)};
    if (offer_pass(tab, dst, nd, lo.nbrs, ne, idx, threads, firsts, &team)) break;
    ++bits;  // outgrew the table: retry with one twice as large (ids do not depend on it)
  }
  firsts.resize(team + 1);
  for (int c = 0; c < team; ++c) firsts[c + 1] += firsts[c];
  b.src_ids.resize(nd + firsts[team]);
  assign_ids(tab, dst, nd, lo.nbrs, ne, idx, team, firsts, b.src_ids.data());
}

}  // namespace

void count_owners(const int64_t* nodes, int64_t n, OwnerCounts& owners) {
  const std::vector<int64_t>& off = *owners.offsets;
  const int P = static_cast<int>(off.size()) - 1;
  owners.counts.assign(P, 0);
  for (int64_t i = 0; i < n; ++i)
    ++owners.counts[P == 1 ? 0 : csp::owner_of(off.data(), P, nodes[i])];
}

std::unique_ptr<SamplerBackend> make_cpu_sampler_backend(const LocalTopology& topo,
                                                         const SamplerOptions& opts) {
  return std::make_unique<CpuSamplerBackend>(topo, opts, CpuBackendOptions{});
}

SamplerBackendFactory cpu_sampler_backend(CpuBackendOptions co) {
  return [co](const LocalTopology& topo, const SamplerOptions& opts) {
    return std::unique_ptr<SamplerBackend>(std::make_unique<CpuSamplerBackend>(topo, opts, co));
  };
}

}  // namespace dsp
