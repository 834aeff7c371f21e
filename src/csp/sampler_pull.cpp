// Pull mode (SampleMode::kPull) of the collective sampler: the owners answer remote tasks with
// whole in-neighbour rows (serve_pulled, the protocol's phase 3), which the requester samples
// itself after the reshuffle (sample_pulled_rows) with the owners' exact per-node logic, so the
// blocks equal CSP's; what CSP sends is the picks, what pull sends is the rows. The protocol's
// other phases are sampler.cpp's.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

#include "core/parallel.hpp"
#include "core/rng.hpp"
#include "csp/exclusions.hpp"
#include "csp/sample_kernels.hpp"
#include "csp/sampler.hpp"
#include "csp/sampler_detail.hpp"

namespace dsp {

namespace {

using csp::task_fanout;
using csp::task_id;
using csp_detail::host_view;
using csp_detail::HostFill;
using csp_detail::prefix;
using csp_detail::row_prefix;
using csp_detail::upload;

// Task i's fetched row: ids[off[i], off[i + 1]), with its weights w (biased) at the same places.
struct PulledRows {
  const int64_t* off;
  const int64_t* ids;
  const float* w;
};
// Where task i's picks go: at slot[i] of out (and of outw when biased), their count in cnt[i].
struct PulledPicks {
  const int64_t* slot;
  int32_t* cnt;
  int64_t* out;
  float* outw;
};

// The owner's draws of tasks[0, n) over their fetched rows: the same per-node logic and streams.
void sample_rows_of(const int64_t* tasks, int64_t n, uint64_t key, const SamplerOptions& o,
                    PulledRows r, PulledPicks p, const TaskExclusions* ex) {
  const bool biased = o.biased(), replace = o.replace();
  parallel_for(0, n, 4096, [&](int64_t b, int64_t e) {
    std::vector<double> cum;
    for (int64_t i = b; i < e; ++i) {
      const int64_t v = task_id(tasks[i]);
      const int k = task_fanout(tasks[i]);
      const int64_t p0 = r.off[i], deg = r.off[i + 1] - p0;
      if (biased) {
        // The same sequential double sum as the owner's precomputed prefix: identical picks.
        cum.resize(std::max<int64_t>(deg, 1));
        row_prefix(r.w + p0, deg, cum.data());
      }
      RngStream s(key, static_cast<uint64_t>(v), csp::kPurposeNodeWise);
      int64_t* out = p.out + p.slot[i];
      const int c = ex ? csp::excluding_task(*ex, i, v, r.ids + p0, deg, k, replace, s, out)
                       : csp::sample_positions(deg, k, biased, replace,
                                               biased ? cum.data() : nullptr, s, out);
      if (p.outw) {
        for (int j = 0; j < c; ++j) p.outw[p.slot[i] + j] = r.w[p0 + out[j]];
      }
      for (int j = 0; j < c; ++j) out[j] = r.ids[p0 + out[j]];
      p.cnt[i] = c;
    }
  });
}

// Compacts per-task slots (slot[i], cnt[i]) into contiguous arrays, in task order.
void compact(int64_t n, const int64_t* slot, const int32_t* cnt, const int64_t* data,
             const float* w, int64_t* out, float* outw) {
  int64_t o = 0;
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(out + o, data + slot[i], cnt[i] * sizeof(int64_t));
    if (w) std::memcpy(outw + o, w + slot[i], cnt[i] * sizeof(float));
    o += cnt[i];
  }
}

}  // namespace

// Pull mode, owner side: its own tasks sampled as in CSP, every remote task answered with its
// whole row (the degree as the count, and the row's weights when biased).
void CollectiveSampler::serve_pulled(uint64_t key, int max_fanout, int64_t max_picks) {
  Buffers& b = *buf_;
  const int64_t n = served_off_[size_];
  const int64_t self_b = served_off_[rank_], self_e = served_off_[rank_ + 1];
  backend_->sample(b.served->as<int64_t>() + self_b, self_e - self_b, max_fanout, max_picks, key,
                   b.answer_counts->reserve_n<int32_t>(n), *b.answer_nbrs,
                   opts_.biased() ? b.answer_weights.get() : nullptr,
                   ex_->served(served_off_, self_b, self_e));
  std::vector<int64_t> ht, ln;
  std::vector<int32_t> lc;
  std::vector<float> lw;
  const int64_t* tasks = host_view(*backend_, *b.served, n, ht);
  const int32_t* lcnt = host_view(*backend_, *b.answer_counts, self_e - self_b, lc);
  const int64_t nl = std::accumulate(lcnt, lcnt + (self_e - self_b), int64_t{0});  // exact
  const int64_t* lnb = host_view(*backend_, *b.answer_nbrs, nl, ln);
  const float* lwt = opts_.biased() ? host_view(*backend_, *b.answer_weights, nl, lw) : nullptr;
  const int64_t* ip = part_.patch.rowptr();
  const float* w = opts_.biased() ? part_.patch.weights.data<float>() : nullptr;
  HostFill<int32_t> counts(*backend_, *b.counts, n);
  int32_t* c = counts.data();
  int64_t total = nl, self_at = 0;  // picks in all; where the self chunk's go
  for (int64_t i = 0; i < n; ++i) {
    if (i >= self_b && i < self_e) {
      c[i] = lcnt[i - self_b];
      continue;
    }
    const int64_t lv = task_id(tasks[i]) - begin_;
    c[i] = static_cast<int32_t>(ip[lv + 1] - ip[lv]);
    total += c[i];
    if (i < self_b) self_at += c[i];
  }
  HostFill<int64_t> nbrs(*backend_, *b.nbrs, total);
  HostFill<float> weights(*backend_, *b.weights, w ? total : 0);
  int64_t at = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i == self_b) {
      std::copy(lnb, lnb + nl, nbrs.data() + self_at);
      if (w) std::copy(lwt, lwt + nl, weights.data() + self_at);
      at += nl;
    }
    if (i >= self_b && i < self_e) continue;
    const int64_t lv = task_id(tasks[i]) - begin_;
    for (int64_t e = ip[lv]; e < ip[lv + 1]; ++e) nbrs.data()[at++] = part_.patch.indices.int_at(e);
    if (w) std::copy(w + ip[lv], w + ip[lv + 1], weights.data() + at - c[i]);
  }
  counts.done();
  nbrs.done();
  if (w) weights.done();
  served_picks_ = total;
}

// Pull mode, requester side: samples the fetched rows (grouped positions outside the self chunk)
// with the owners' exact per-node logic; the self chunk was sampled by its owner, this rank.
void CollectiveSampler::sample_pulled_rows(uint64_t key) {
  Buffers& b = *buf_;
  const std::vector<int64_t> goff = prefix(grouped_count_);
  const int64_t ng = goff[size_], self_b = goff[rank_], self_e = goff[rank_ + 1];
  std::vector<int64_t> ht, hn;
  std::vector<int32_t> hc;
  std::vector<float> hw;
  const int64_t* tasks = host_view(*backend_, *b.tasks, ng, ht);
  const int32_t* rc = host_view(*backend_, *b.answer_counts, ng, hc);
  const int64_t* rows = host_view(*backend_, *b.answer_nbrs, answer_picks_, hn);
  const float* rw =
      opts_.biased() ? host_view(*backend_, *b.answer_weights, answer_picks_, hw) : nullptr;
  std::vector<int64_t> roff(ng + 1, 0), slot(ng + 1, 0);
  for (int64_t i = 0; i < ng; ++i) {
    const bool self = i >= self_b && i < self_e;
    roff[i + 1] = roff[i] + rc[i];
    const int k = task_fanout(tasks[i]);  // remote: its whole row came, rc[i] entries
    const bool by_row = self || csp::slot_needs_degree(k, opts_.replace());
    slot[i + 1] = slot[i] + (by_row ? std::min<int64_t>(rc[i], self ? rc[i] : k) : k);
  }
  std::vector<int64_t> buf(slot[ng]);
  std::vector<float> bufw(rw ? slot[ng] : 0);
  std::vector<int32_t> c(ng);
  uint64_t excluded = 0;  // this rank's own pairs (EdgeExclusions::own), one requester
  const std::vector<int64_t>& own = ex_->own();
  for (const auto& [from, to] : {std::pair{int64_t{0}, self_b}, std::pair{self_e, ng}}) {
    const int64_t part_tasks[2] = {0, to - from};
    const TaskExclusions part{part_tasks, own.data(), 1, &excluded};
    sample_rows_of(tasks + from, to - from, key, opts_, {roff.data() + from, rows, rw},
                   {slot.data() + from, c.data() + from, buf.data(), rw ? bufw.data() : nullptr},
                   own.empty() ? nullptr : &part);
  }
  stats_.excluded_entries += static_cast<int64_t>(excluded);
  for (int64_t i = self_b; i < self_e; ++i) {
    c[i] = rc[i];
    std::copy(rows + roff[i], rows + roff[i + 1], buf.begin() + slot[i]);
    if (rw) std::copy(rw + roff[i], rw + roff[i + 1], bufw.begin() + slot[i]);
  }
  // `rows` is read no more: the answers can be overwritten
  const int64_t total = std::accumulate(c.begin(), c.end(), int64_t{0});
  HostFill<int64_t> nbrs(*backend_, *b.answer_nbrs, total);
  HostFill<float> weights(*backend_, *b.answer_weights, rw ? total : 0);
  compact(ng, slot.data(), c.data(), buf.data(), rw ? bufw.data() : nullptr, nbrs.data(),
          rw ? weights.data() : nullptr);
  upload(*backend_, *b.answer_counts, c);
  nbrs.done();
  if (rw) weights.done();
  answer_picks_ = total;
}

}  // namespace dsp
