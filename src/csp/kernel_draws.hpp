#pragma once
// The device sampler's sample step (kernel_backend.hpp): slots = prefix sums of the tasks'
// fanouts; one thread per task draws its positions and writes ids at its slot (or the turbo
// schedule: tasks degree-sorted on the device and dealt to warps and blocks in snake order); the
// counts are scanned into offsets and the picks compacted. With captures, the sequence runs over
// the shape's size m >= n (capture_size) and is replayed, its scalars read from executor memory.
// Private to src/csp.
#include <algorithm>
#include <cstdint>

#include "core/exec_memory.hpp"
#include "csp/degree_schedule.hpp"
#include "csp/kernel_backend_kernels.hpp"
#include "csp/kernel_scratch.hpp"
#include "csp/kernel_topology.hpp"
#include "csp/sampler.hpp"

namespace dsp {

template <class Exec>
class DeviceDraws {
 public:
  DeviceDraws(Exec& ex, SamplerScratch<Exec>& s, SamplerCaptures<Exec>& captures,
              const DeviceTopology<Exec>& topo, const SamplerOptions& opts)
      : ex_(ex),
        s_(s),
        captures_(captures),
        topo_(topo),
        biased_(opts.biased()),
        replace_(opts.replace()),
        turbo_(opts.kernel == SampleKernel::kTurbo),
        strategy_(opts.temporal() ? opts.temporal()->strategy : csp::TemporalStrategy::kUniform) {}
  void set_labor(const csp::LaborVariates& lv) { labor_ = lv; }
  void set_task_times(const int64_t* times) { task_times_ = times; }

  // SamplerBackend::sample: the draws of the n tasks t into nbrs (and weights), their counts into
  // cnt; returns the slots' bound (the exact count stays in executor memory).
  int64_t sample(const int64_t* t, int64_t n, int max_fanout, int64_t max_picks, uint64_t key,
                 int32_t* cnt, BackendBuffer& nbrs, BackendBuffer* weights,
                 const TaskExclusions* ex) {
    const int64_t f = std::max(max_fanout, 0);
    const kernels::SampleParams p{n, key, labor_};
    Call c{upload(ex_, s_.params, &p, 1), t, n, max_fanout, cnt, ex, slot_bound(n, f, max_picks)};
    const int64_t m = SamplerCaptures<Exec>::capture_size(n);
    if (captures_.enabled() && slot_bound(m, f, max_picks) <= kSlotBound) {
      const int64_t direct = c.total;
      c.m = m;
      c.total = slot_bound(m, f, max_picks);
      captures_.replay(ex_, reserve_shape(c, nbrs, weights),
                       [&] { issue_draws(c, issue_slots(c), nbrs, weights); });
      return direct;
    }
    const int64_t* slot = issue_slots(c);
    // The slots are sized by n x max_fanout (no fanout is above it), or by max_picks when that is
    // smaller, where that is at most kSlotBound entries, without reading their sum back; beyond,
    // the sum is read.
    if (c.total > kSlotBound) c.total = read_back(ex_, slot + n);
    issue_draws(c, slot, nbrs, weights);
    return c.total;
  }

 private:
  using Shape = typename SamplerCaptures<Exec>::Shape;
  // sample's slots up to this many entries (128 MiB) are sized by the fanout bound, not read.
  static constexpr int64_t kSlotBound = int64_t{1} << 24;
  // Bits of a degree key (csp::degree_key: at most kDegreeKeyCap).
  static constexpr int kDegreeKeyBits = 12;
  static_assert(csp::kDegreeKeyCap < (int64_t{1} << kDegreeKeyBits), "degree keys need more bits");
  // One sample call: its parameters (executor memory), tasks and counts, and the size m its
  // sequence runs over (n, or the captured shape's) with its slots' `total`.
  struct Call {
    const kernels::SampleParams* params;
    const int64_t* tasks;
    int64_t m;
    int max_fanout;
    int32_t* cnt;
    const TaskExclusions* ex;
    int64_t total;
  };

  // The slots of n tasks of fanouts at most f summing to at most max_picks (when >= 0).
  static int64_t slot_bound(int64_t n, int64_t f, int64_t max_picks) {
    return max_picks >= 0 ? std::min(n * f, max_picks) : n * f;
  }

  // One thread per task in task order, or the turbo schedule: sort keys computed and sorted on the
  // device (a stable descending radix sort: csp::degree_order's order), nothing read back.
  template <class Id>
  void launch(const Call& c, const kernels::SampleTask<Id>& op) {
    const int64_t n = c.m;
    if (!turbo_) {
      ex_.for_each(n, op);
      return;
    }
    auto* keys = reserve<int64_t>(s_.keys, n);
    ex_.for_each(
        n, kernels::TaskDegreeKey{c.params, c.tasks, topo_.indptr(), topo_.host.row_base, keys});
    auto* iota = reserve<int64_t>(s_.owner, n);
    ex_.for_each(n, kernels::Iota{iota});
    auto* order = reserve<int64_t>(s_.order, n);
    ex_.sort_pairs_descending(keys, iota, order, n, kDegreeKeyBits);  // csp::degree_order's order
    const int cap = csp::WarpSnake::shared_slot(c.max_fanout);
    const csp::WarpSnake geo = csp::WarpSnake::of(n);
    ex_.for_each_block(geo.blocks, csp::WarpSnake::kThreads,
                       static_cast<size_t>(cap) * csp::WarpSnake::kThreads * sizeof(int64_t),
                       kernels::TurboSampleTask<Id>{op, order, geo, cap});
  }

  // The fanouts' exclusive prefix (the slots), m + 1 entries.
  const int64_t* issue_slots(const Call& c) {
    auto* fan = reserve<int64_t>(s_.wide, c.m);
    ex_.for_each(c.m, kernels::TaskFanout{c.params, c.tasks, topo_.indptr(), topo_.host.row_base,
                                          replace_, fan});
    return prefix_with_zero(ex_, s_.slot, fan, c.m);
  }

  // The draws into c.total slots, then the compaction: offsets = prefix of the counts, picks
  // moved to their offsets. The pick count is not read: the exact count stays on the device (the
  // offsets' end, which relabel reads with its source count).
  void issue_draws(const Call& c, const int64_t* slot, BackendBuffer& nbrs,
                   BackendBuffer* weights) {
    auto* res = reserve<int64_t>(s_.out, c.total);
    float* resw = biased_ ? reserve<float>(s_.outw, c.total) : nullptr;
    if (topo_.host.idx32) {
      launch(c, task_op<int32_t>(c, slot, res, resw));
    } else {
      launch(c, task_op<int64_t>(c, slot, res, resw));
    }
    auto* fan = reserve<int64_t>(s_.wide, c.m);
    ex_.for_each(c.m, kernels::WidenCounts{c.cnt, fan, &c.params->n});
    auto* off = prefix_with_zero(ex_, s_.offsets, fan, c.m);
    auto* picks = nbrs.reserve_n<int64_t>(c.total);
    float* picks_w = biased_ ? weights->reserve_n<float>(c.total) : nullptr;
    ex_.for_each(c.m, kernels::CompactPicks{c.params, c.cnt, slot, res, resw, off, picks, picks_w});
  }

  // Every array of the sequence reserved for c's shape (issue_slots, issue_draws, launch), and
  // the shape that names them.
  Shape reserve_shape(const Call& c, BackendBuffer& nbrs, BackendBuffer* weights) {
    const int64_t m = c.m, t = c.total;
    const bool w = biased_;
    return {kSeqSample,
            {m, c.max_fanout, t, c.ex ? c.ex->parts : 0},
            ex_.scratch_moves(),
            {c.tasks, c.cnt, c.params, c.ex ? c.ex->tasks : nullptr, c.ex ? c.ex->pairs : nullptr,
             c.ex ? c.ex->excluded : nullptr, task_times_, nbrs.reserve_n<int64_t>(t),
             w ? weights->reserve_n<float>(t) : nullptr, reserve<int64_t>(s_.wide, m),
             reserve<int64_t>(s_.slot, m + 1), reserve<int64_t>(s_.out, t),
             w ? reserve<float>(s_.outw, t) : nullptr, reserve<int64_t>(s_.offsets, m + 1),
             turbo_ ? reserve<int64_t>(s_.keys, m) : nullptr,
             turbo_ ? reserve<int64_t>(s_.order, m) : nullptr,
             turbo_ ? reserve<int64_t>(s_.owner, m) : nullptr}};
  }

  template <class Id>
  kernels::SampleTask<Id> task_op(const Call& c, const int64_t* slot, int64_t* res,
                                  float* resw) const {
    return {c.params,
            c.tasks,
            topo_.indptr(),
            topo_.template indices<Id>(),
            topo_.template hot_indices<Id>(),
            topo_.row_loc(),
            topo_.host.row_base,
            topo_.cum(),
            topo_.weights(),
            biased_,
            replace_,
            slot,
            c.cnt,
            res,
            resw,
            c.ex ? *c.ex : csp::TaskExclusions{},
            task_times_,
            task_times_ ? topo_.times() : nullptr,
            strategy_};
  }

  Exec& ex_;
  SamplerScratch<Exec>& s_;
  SamplerCaptures<Exec>& captures_;
  const DeviceTopology<Exec>& topo_;
  bool biased_, replace_, turbo_;
  csp::TemporalStrategy strategy_;
  csp::LaborVariates labor_;
  const int64_t* task_times_ = nullptr;  // set_task_times (executor memory), or null
};

}  // namespace dsp
