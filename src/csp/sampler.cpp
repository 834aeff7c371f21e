#include "csp/sampler.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <unordered_map>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/rng.hpp"
#include "core/timer.hpp"
#include "csp/sample_kernels.hpp"

namespace dsp {

using csp::kPurposeNodeWise;

namespace {

using csp::pack_task;
using csp::task_fanout;
using csp::task_id;
constexpr int kMaxFanout = (1 << 22);
// Random walks use their own key domain, so a walk step never reuses a sampling layer's draws.
constexpr uint64_t kWalkSalt = 0x77616c6b'73746570ULL;  // "walkstep"

// Prefix offsets of per-rank counts.
std::vector<int64_t> prefix(const std::vector<int64_t>& c) {
  std::vector<int64_t> o(c.size() + 1, 0);
  for (size_t i = 0; i < c.size(); ++i) o[i + 1] = o[i] + c[i];
  return o;
}

// Elements of `chunks` (laid out by rank with offsets `off`) without rank `self`'s chunk: what an
// all_to_all_v sends when the self part is handled locally.
template <class T>
std::vector<T> without_self(const std::vector<T>& data, const std::vector<int64_t>& off, int self) {
  std::vector<T> out;
  out.reserve(data.size() - (off[self + 1] - off[self]));
  out.insert(out.end(), data.begin(), data.begin() + off[self]);
  out.insert(out.end(), data.begin() + off[self + 1], data.end());
  return out;
}

// all_to_all_v with known receive counts.
template <class T>
std::vector<T> a2a(Communicator& c, const std::vector<T>& send, const std::vector<int64_t>& sc,
                   const std::vector<int64_t>& rc, const char* label) {
  int64_t total = 0;
  for (auto x : rc) total += x;
  std::vector<T> out(static_cast<size_t>(total));
  OpOptions o;
  o.label = label;
  c.all_to_all_v(send.data(), sc, out.data(), rc, dtype_of<T>(), o);
  return out;
}

void row_prefix(const float* w, int64_t deg, double* cum) {
  double acc = 0;
  for (int64_t i = 0; i < deg; ++i) {
    acc += static_cast<double>(w[i]);
    cum[i] = acc;
  }
}

}  // namespace

SampleScheme parse_sample_scheme(const std::string& s) {
  if (s == "node" || s == "node-wise" || s == "nodewise") return SampleScheme::kNodeWise;
  if (s == "layer" || s == "layer-wise" || s == "layerwise") return SampleScheme::kLayerWise;
  DSP_THROW_T(InvalidArgument, "unknown sampling scheme '{}' (node, layer)", s);
}

SampleMode parse_sample_mode(const std::string& s) {
  if (s == "csp") return SampleMode::kCsp;
  if (s == "pull") return SampleMode::kPull;
  DSP_THROW_T(InvalidArgument, "unknown sampling mode '{}' (csp, pull)", s);
}

nlohmann::json SamplerStats::to_json() const {
  return {{"batches", batches},
          {"seeds", seeds},
          {"sampled_edges", sampled_edges},
          {"tasks_local", tasks_local},
          {"tasks_remote", tasks_remote},
          {"t_shuffle", t_shuffle},
          {"t_sample", t_sample},
          {"t_reshuffle", t_reshuffle},
          {"t_relabel", t_relabel},
          {"t_total", t_total},
          {"t_layer", t_layer},
          {"bytes_sent", bytes_sent},
          {"bytes_recv", bytes_recv}};
}

PartitionData single_part(const Csr& g) {
  PartitionData d;
  d.meta.parts = 1;
  d.meta.offsets = {0, g.num_nodes};
  d.meta.num_nodes = g.num_nodes;
  d.meta.num_edges = g.num_edges();
  d.meta.index_dtype = g.num_edges() ? g.index_dtype() : DType::kInt64;
  d.meta.has_weights = g.has_weights();
  PartStats ps;
  ps.begin = 0;
  ps.end = g.num_nodes;
  ps.edges = g.num_edges();
  d.meta.part = {ps};
  d.part = 0;
  d.patch = g;
  std::vector<int64_t> deg(g.num_nodes);
  for (int64_t v = 0; v < g.num_nodes; ++v) deg[v] = g.degree(v);
  d.in_degree = Array::from_vector(std::move(deg));
  return d;
}

CollectiveSampler::CollectiveSampler(const PartitionData& part, Communicator& comm,
                                     SamplerOptions opts)
    : part_(part), comm_(comm), opts_(std::move(opts)) {
  DSP_CHECK_ARG(!opts_.fanouts.empty(), "sampler: at least one layer (fanout) is needed");
  for (int f : opts_.fanouts) {
    DSP_CHECK_ARG(f > 0 && f <= kMaxFanout, "sampler: fanouts must be in [1, {}], got {}",
                  kMaxFanout, f);
  }
  rank_ = comm_.rank();
  size_ = comm_.size();
  DSP_CHECK_ARG(part_.meta.parts == size_ && part_.part == rank_,
                "sampler: partition part {} of {} loaded by rank {} of {}", part_.part,
                part_.meta.parts, rank_, size_);
  offsets_ = part_.meta.offsets;
  begin_ = offsets_[rank_];
  end_ = offsets_[rank_ + 1];
  DSP_CHECK_ARG(part_.meta.num_nodes < (int64_t{1} << 32) - 1,
                "sampler: graphs of up to 2^32-2 nodes are supported, got {}",
                part_.meta.num_nodes);
  DSP_CHECK_ARG(part_.patch.num_nodes == end_ - begin_, "sampler: patch has {} rows for {} nodes",
                part_.patch.num_nodes, end_ - begin_);
  DSP_CHECK_ARG(!opts_.biased || part_.patch.has_weights(),
                "sampler: biased (weighted) sampling needs edge weights, and the graph has none");
  stats_.t_layer.assign(opts_.fanouts.size(), 0.0);
  if (opts_.biased) {
    const Csr& g = part_.patch;
    cum_.resize(g.num_edges());
    const int64_t* ip = g.rowptr();
    const float* w = g.weights.data<float>();
    parallel_for(0, g.num_nodes, 4096, [&](int64_t b, int64_t e) {
      for (int64_t v = b; v < e; ++v) row_prefix(w + ip[v], ip[v + 1] - ip[v], cum_.data() + ip[v]);
    });
    if (opts_.scheme == SampleScheme::kLayerWise) {
      // W_u of remote frontier nodes without a round trip: replicate every node's weight sum once.
      int64_t maxrows = 0;
      for (int p = 0; p < size_; ++p) maxrows = std::max(maxrows, offsets_[p + 1] - offsets_[p]);
      std::vector<double> mine(maxrows, 0.0), all(maxrows * size_);
      for (int64_t v = 0; v < g.num_nodes; ++v) {
        mine[v] = ip[v + 1] > ip[v] ? cum_[ip[v + 1] - 1] : 0.0;
      }
      comm_.all_gather(mine.data(), all.data(), maxrows, DType::kFloat64);
      weight_sum_.resize(part_.meta.num_nodes);
      for (int p = 0; p < size_; ++p) {
        std::copy(all.begin() + p * maxrows,
                  all.begin() + p * maxrows + (offsets_[p + 1] - offsets_[p]),
                  weight_sum_.begin() + offsets_[p]);
      }
    }
  }
  if (opts_.scheme == SampleScheme::kLayerWise && !opts_.biased) {
    DSP_CHECK_ARG(part_.in_degree.defined() && part_.in_degree.dim(0) == part_.meta.num_nodes,
                  "sampler: layer-wise sampling needs the replicated in-degree array");
  }
}

void CollectiveSampler::reset_stats() {
  stats_ = SamplerStats{};
  stats_.t_layer.assign(opts_.fanouts.size(), 0.0);
}

void CollectiveSampler::check_collective(bool ok, const std::string& msg) {
  int64_t bad = ok ? 0 : 1;
  if (size_ > 1) comm_.all_reduce(&bad, 1, DType::kInt64, ReduceOp::kMax);
  if (!ok) DSP_THROW_T(InvalidArgument, "{}", msg);
  if (bad) DSP_THROW_T(InvalidArgument, "sampler: another rank passed invalid input");
}

uint64_t CollectiveSampler::remote_bytes_sent() const {
  if (size_ == 1) return 0;
  CommCounters c = comm_.counters();
  return c.total_sent() - c.bytes_sent[rank_];
}
uint64_t CollectiveSampler::remote_bytes_recv() const {
  if (size_ == 1) return 0;
  CommCounters c = comm_.counters();
  return c.total_recv() - c.bytes_recv[rank_];
}

template <class Id>
void CollectiveSampler::sample_tasks(const int64_t* tasks, int64_t n, uint64_t key,
                                     const int64_t* slot, int32_t* cnt, int64_t* out,
                                     float* outw) const {
  const int64_t* ip = part_.patch.rowptr();
  const Id* idx = part_.patch.num_edges() ? part_.patch.indices.data<Id>() : nullptr;
  const float* w = part_.patch.has_weights() ? part_.patch.weights.data<float>() : nullptr;
  const double* cum = cum_.empty() ? nullptr : cum_.data();
  const bool biased = opts_.biased, replace = opts_.replace;
  const int64_t base = begin_;
  parallel_for(0, n, 4096, [&](int64_t b, int64_t e) {
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
      int c = csp::sample_positions(deg, task_fanout(tasks[i]), biased, replace,
                                    biased ? cum + p0 : nullptr, s, o);
      for (int j = 0; j < c; ++j) __builtin_prefetch(idx + p0 + o[j]);
      cnt[i] = c;
    };
    for (int64_t i = b; i < std::min(e, b + kFar); ++i) {
      __builtin_prefetch(ip + (task_id(tasks[i]) - base));
    }
    for (int64_t i = b; i < std::min(e, b + kNear); ++i) draw(i);
    for (int64_t i = b; i < e; ++i) {
      if (i + kFar < e) __builtin_prefetch(ip + (task_id(tasks[i + kFar]) - base));
      if (i + kNear < e) draw(i + kNear);
      const int64_t p0 = ip[task_id(tasks[i]) - base];
      int64_t* o = out + slot[i];
      const int c = cnt[i];
      if (outw) {
        for (int j = 0; j < c; ++j) outw[slot[i] + j] = w[p0 + o[j]];
      }
      for (int j = 0; j < c; ++j) o[j] = static_cast<int64_t>(idx[p0 + o[j]]);
    }
  });
}

template <class Id>
void CollectiveSampler::sample_pulled(const int64_t* tasks, int64_t n, uint64_t key,
                                      const int64_t* row_off, const int64_t* rows, const float* w,
                                      const int64_t* slot, int32_t* cnt, int64_t* out,
                                      float* outw) const {
  const bool biased = opts_.biased, replace = opts_.replace;
  parallel_for(0, n, 4096, [&](int64_t b, int64_t e) {
    std::vector<double> cum;
    for (int64_t i = b; i < e; ++i) {
      const int64_t v = task_id(tasks[i]);
      const int k = task_fanout(tasks[i]);
      const int64_t p0 = row_off[i], deg = row_off[i + 1] - p0;
      if (biased) {
        // The same sequential double sum as the owner's precomputed prefix: identical picks.
        cum.resize(std::max<int64_t>(deg, 1));
        row_prefix(w + p0, deg, cum.data());
      }
      RngStream s(key, static_cast<uint64_t>(v), kPurposeNodeWise);
      int64_t* o = out + slot[i];
      int c = csp::sample_positions(deg, k, biased, replace, biased ? cum.data() : nullptr, s, o);
      if (outw) {
        for (int j = 0; j < c; ++j) outw[slot[i] + j] = w[p0 + o[j]];
      }
      for (int j = 0; j < c; ++j) o[j] = rows[p0 + o[j]];
      cnt[i] = c;
    }
  });
}

namespace {
// Compacts per-task slots (slot[i], cnt[i]) into contiguous arrays, in task order.
void compact(int64_t n, const int64_t* slot, const int32_t* cnt, const int64_t* data,
             const float* w, std::vector<int64_t>& out, std::vector<float>& outw) {
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) total += cnt[i];
  out.resize(total);
  if (w) outw.resize(total);
  int64_t o = 0;
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(out.data() + o, data + slot[i], cnt[i] * sizeof(int64_t));
    if (w) std::memcpy(outw.data() + o, w + slot[i], cnt[i] * sizeof(float));
    o += cnt[i];
  }
}
}  // namespace

void CollectiveSampler::run_layer(const std::vector<int64_t>& frontier,
                                  const std::vector<int32_t>& fanout, int uniform_fanout,
                                  uint64_t key, LayerOut& out) {
  const int P = size_;
  const int64_t nf = static_cast<int64_t>(frontier.size());
  const bool biased = opts_.biased;
  const bool pull = opts_.mode == SampleMode::kPull && P > 1;
  Stopwatch sw;

  // ---- shuffle: group by owner (frontier order kept within an owner) ----
  std::vector<int32_t> own(nf);
  std::vector<int64_t> gcount(P, 0);
  for (int64_t i = 0; i < nf; ++i) {
    int k = fanout.empty() ? uniform_fanout : fanout[i];
    if (k <= 0) {
      own[i] = -1;  // nothing to draw: an empty row without a task
      continue;
    }
    int64_t v = frontier[i];
    int o = P == 1 ? 0
                   : static_cast<int>(std::upper_bound(offsets_.begin() + 1, offsets_.end(), v) -
                                      (offsets_.begin() + 1));
    own[i] = o;
    ++gcount[o];
  }
  std::vector<int64_t> goff = prefix(gcount);  // grouped order: owner chunks
  std::vector<int64_t> grouped(goff[P]), perm(goff[P]);
  {
    std::vector<int64_t> cur(goff.begin(), goff.end() - 1);
    for (int64_t i = 0; i < nf; ++i) {
      if (own[i] < 0) continue;
      int64_t pos = cur[own[i]]++;
      perm[pos] = i;
      grouped[pos] = pack_task(frontier[i], fanout.empty() ? uniform_fanout : fanout[i]);
    }
  }
  // Grouped order == frontier order (one rank, or everything local, nothing skipped): results can
  // be written straight into `out`.
  bool identity = goff[P] == nf;
  for (int64_t pos = 0; pos < goff[P] && identity; ++pos) identity = perm[pos] == pos;
  stats_.tasks_local += gcount[rank_];
  stats_.tasks_remote += goff[P] - gcount[rank_];

  std::vector<int64_t> send_counts = gcount;
  send_counts[rank_] = 0;
  std::vector<int64_t> recv_counts(P, 0);
  std::vector<int64_t> tasks;  // by source rank; self chunk = local tasks
  std::vector<int64_t> toff;
  if (P == 1) {
    tasks = std::move(grouped);
    grouped.clear();
    toff = {0, static_cast<int64_t>(tasks.size())};
  } else {
    OpOptions o;
    o.label = "csp.shuffle.counts";
    recv_counts = comm_.exchange_counts(send_counts, o);
    std::vector<int64_t> recv =
        a2a(comm_, without_self(grouped, goff, rank_), send_counts, recv_counts, "csp.shuffle");
    std::vector<int64_t> rc = recv_counts;
    rc[rank_] = gcount[rank_];
    toff = prefix(rc);
    tasks.resize(toff[P]);
    int64_t r = 0;
    for (int p = 0; p < P; ++p) {
      if (p == rank_) {
        std::copy(grouped.begin() + goff[p], grouped.begin() + goff[p + 1],
                  tasks.begin() + toff[p]);
      } else {
        std::copy(recv.begin() + r, recv.begin() + r + recv_counts[p], tasks.begin() + toff[p]);
        r += recv_counts[p];
      }
    }
  }
  stats_.t_shuffle += sw.seconds();
  sw.reset();

  // ---- sample: one pass over every task this rank owns (pull: only its own frontier) ----
  const bool idx32 = part_.patch.num_edges() == 0 || part_.patch.index_dtype() == DType::kInt32;
  // Samples tasks t[0, n) into res (compacted in place after sampling into per-task slots).
  // res / slot_ keep their capacity across layers and batches: no page faults on the hot path.
  auto run_local = [&](const int64_t* t, int64_t n, std::vector<int64_t>& res,
                       std::vector<float>& resw, std::vector<int32_t>& cnt) {
    slot_.resize(n + 1);
    int64_t* slot = slot_.data();
    slot[0] = 0;
    for (int64_t i = 0; i < n; ++i) slot[i + 1] = slot[i] + task_fanout(t[i]);
    res.resize(slot[n]);
    if (biased) resw.resize(slot[n]);
    cnt.resize(n);
    if (idx32) {
      sample_tasks<int32_t>(t, n, key, slot, cnt.data(), res.data(),
                            biased ? resw.data() : nullptr);
    } else {
      sample_tasks<int64_t>(t, n, key, slot, cnt.data(), res.data(),
                            biased ? resw.data() : nullptr);
    }
    int64_t o = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (o != slot[i]) {
        std::memmove(res.data() + o, res.data() + slot[i], cnt[i] * sizeof(int64_t));
        if (biased) std::memmove(resw.data() + o, resw.data() + slot[i], cnt[i] * sizeof(float));
      }
      o += cnt[i];
    }
    res.resize(o);
    if (biased) resw.resize(o);
  };

  // Results per grouped position: counts and data in grouped order.
  std::vector<int32_t> gcnt;
  std::vector<int64_t> gdata;
  std::vector<float> gw;
  if (P == 1) {
    if (identity) {
      run_local(tasks.data(), toff[1], out.nbrs, out.weights, gcnt);
    } else {
      run_local(tasks.data(), toff[1], gdata, gw, gcnt);
    }
    stats_.t_sample += sw.seconds();
    sw.reset();
  } else {
    // Owner side: CSP samples all received tasks; pull returns whole rows (degree as the count).
    std::vector<int32_t> tcnt;
    std::vector<int64_t> tdata;
    std::vector<float> tw;
    if (!pull) {
      run_local(tasks.data(), toff[P], tdata, tw, tcnt);
    } else {
      const int64_t n = toff[P];
      tcnt.assign(n, 0);
      const int64_t* ip = part_.patch.rowptr();
      int64_t total = 0;
      for (int p = 0; p < P; ++p) {
        if (p == rank_) continue;
        for (int64_t i = toff[p]; i < toff[p + 1]; ++i) {
          int64_t lv = task_id(tasks[i]) - begin_;
          tcnt[i] = static_cast<int32_t>(ip[lv + 1] - ip[lv]);
          total += tcnt[i];
        }
      }
      tdata.resize(total);
      if (biased) tw.resize(total);
      const float* w = biased ? part_.patch.weights.data<float>() : nullptr;
      int64_t o = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (tcnt[i] == 0) continue;
        int64_t lv = task_id(tasks[i]) - begin_;
        for (int64_t e = ip[lv]; e < ip[lv + 1]; ++e)
          tdata[o + e - ip[lv]] = part_.patch.indices.int_at(e);
        if (biased) std::memcpy(tw.data() + o, w + ip[lv], tcnt[i] * sizeof(float));
        o += tcnt[i];
      }
      // local tasks: sampled directly (no rows move)
      std::vector<int32_t> lc;
      std::vector<int64_t> ld;
      std::vector<float> lw;
      run_local(tasks.data() + toff[rank_], toff[rank_ + 1] - toff[rank_], ld, lw, lc);
      // splice the local results into the self chunk of tcnt/tdata
      int64_t before = 0;
      for (int64_t i = 0; i < toff[rank_]; ++i) before += tcnt[i];
      std::copy(lc.begin(), lc.end(), tcnt.begin() + toff[rank_]);
      tdata.insert(tdata.begin() + before, ld.begin(), ld.end());
      if (biased) tw.insert(tw.begin() + before, lw.begin(), lw.end());
    }
    stats_.t_sample += sw.seconds();
    sw.reset();

    // ---- reshuffle: counts (sizes known: what each requester sent) then the data ----
    std::vector<int64_t> dcount(P, 0);  // data elements per source rank
    for (int p = 0; p < P; ++p) {
      for (int64_t i = toff[p]; i < toff[p + 1]; ++i) dcount[p] += tcnt[i];
    }
    std::vector<int64_t> doff = prefix(dcount);
    std::vector<int64_t> sc_cnt = recv_counts;  // tasks received from p, answered to p
    sc_cnt[rank_] = 0;
    std::vector<int64_t> sc_data = dcount;
    sc_data[rank_] = 0;
    std::vector<int32_t> rcnt =
        a2a(comm_, without_self(tcnt, toff, rank_), sc_cnt, send_counts, "csp.reshuffle.counts");
    std::vector<int64_t> rc_data(P, 0);
    {
      int64_t r = 0;
      for (int p = 0; p < P; ++p) {
        if (p == rank_) continue;
        for (int64_t i = 0; i < send_counts[p]; ++i) rc_data[p] += rcnt[r++];
      }
    }
    std::vector<int64_t> rdata =
        a2a(comm_, without_self(tdata, doff, rank_), sc_data, rc_data, "csp.reshuffle");
    std::vector<float> rw;
    if (biased) rw = a2a(comm_, without_self(tw, doff, rank_), sc_data, rc_data, "csp.reshuffle.w");
    stats_.t_reshuffle += sw.seconds();
    sw.reset();

    if (pull) {
      // Requester side of pull: sample the fetched rows with the owners' exact per-node logic.
      std::vector<int64_t> rtasks = without_self(grouped, goff, rank_);
      const int64_t n = static_cast<int64_t>(rtasks.size());
      std::vector<int64_t> roff(n + 1, 0), slot(n + 1, 0);
      for (int64_t i = 0; i < n; ++i) {
        roff[i + 1] = roff[i] + rcnt[i];
        slot[i + 1] = slot[i] + task_fanout(rtasks[i]);
      }
      std::vector<int64_t> buf(slot[n]);
      std::vector<float> bufw(biased ? slot[n] : 0);
      std::vector<int32_t> c(n);
      sample_pulled<int64_t>(rtasks.data(), n, key, roff.data(), rdata.data(),
                             biased ? rw.data() : nullptr, slot.data(), c.data(), buf.data(),
                             biased ? bufw.data() : nullptr);
      compact(n, slot.data(), c.data(), buf.data(), biased ? bufw.data() : nullptr, rdata, rw);
      rcnt = std::move(c);
      stats_.t_sample += sw.seconds();
      sw.reset();
    }

    // grouped order = remote answers with the self chunk spliced in at rank_'s place
    gcnt.resize(goff[P]);
    int64_t self_before = 0;  // remote data elements from ranks < rank_
    {
      int64_t r = 0;
      for (int p = 0; p < rank_; ++p) {
        for (int64_t i = 0; i < send_counts[p]; ++i) self_before += rcnt[r + i];
        r += send_counts[p];
      }
    }
    std::copy(rcnt.begin(), rcnt.begin() + goff[rank_], gcnt.begin());
    std::copy(tcnt.begin() + toff[rank_], tcnt.begin() + toff[rank_ + 1],
              gcnt.begin() + goff[rank_]);
    std::copy(rcnt.begin() + goff[rank_], rcnt.end(), gcnt.begin() + goff[rank_ + 1]);
    gdata.reserve(rdata.size() + dcount[rank_]);
    gdata.insert(gdata.end(), rdata.begin(), rdata.begin() + self_before);
    gdata.insert(gdata.end(), tdata.begin() + doff[rank_], tdata.begin() + doff[rank_ + 1]);
    gdata.insert(gdata.end(), rdata.begin() + self_before, rdata.end());
    if (biased) {
      gw.reserve(gdata.size());
      gw.insert(gw.end(), rw.begin(), rw.begin() + self_before);
      gw.insert(gw.end(), tw.begin() + doff[rank_], tw.begin() + doff[rank_ + 1]);
      gw.insert(gw.end(), rw.begin() + self_before, rw.end());
    }
  }

  // ---- back to frontier order ----
  out.offsets.assign(nf + 1, 0);
  if (identity) {
    for (int64_t i = 0; i < nf; ++i) out.offsets[i + 1] = out.offsets[i] + gcnt[i];
    if (P > 1) {  // P == 1 wrote into out already
      out.nbrs = std::move(gdata);
      out.weights = std::move(gw);
    }
  } else {
    std::vector<int64_t> src(goff[P] + 1, 0);
    for (int64_t pos = 0; pos < goff[P]; ++pos) {
      src[pos + 1] = src[pos] + gcnt[pos];
      out.offsets[perm[pos] + 1] = gcnt[pos];
    }
    for (int64_t i = 0; i < nf; ++i) out.offsets[i + 1] += out.offsets[i];
    out.nbrs.resize(out.offsets[nf]);
    if (biased) out.weights.resize(out.offsets[nf]);
    for (int64_t pos = 0; pos < goff[P]; ++pos) {
      int64_t d = out.offsets[perm[pos]];
      std::memcpy(out.nbrs.data() + d, gdata.data() + src[pos], gcnt[pos] * sizeof(int64_t));
      if (biased)
        std::memcpy(out.weights.data() + d, gw.data() + src[pos], gcnt[pos] * sizeof(float));
    }
  }
  stats_.t_relabel += sw.seconds();  // reordering is part of block assembly
}

std::vector<int32_t> CollectiveSampler::layerwise_counts(const std::vector<int64_t>& frontier,
                                                         int n, uint64_t key) const {
  const int64_t F = static_cast<int64_t>(frontier.size());
  std::vector<int32_t> c(F, 0);
  if (F == 0) return c;
  std::vector<double> cum(F);
  double acc = 0;
  const int64_t* deg = opts_.biased ? nullptr : part_.in_degree.data<int64_t>();
  for (int64_t i = 0; i < F; ++i) {
    acc += opts_.biased ? weight_sum_[frontier[i]] : static_cast<double>(deg[frontier[i]]);
    cum[i] = acc;
  }
  // One stream per (layer, sample): keyed by the sample's first frontier node, which is the
  // same whatever P is (frontier order is P-invariant).
  RngStream s(key, static_cast<uint64_t>(frontier[0]), csp::kPurposeLayerWise);
  for (int j = 0; j < n; ++j) {
    int64_t i = csp::weighted_one(cum.data(), F, s);
    if (i < 0) break;
    ++c[i];
  }
  return c;
}

Block CollectiveSampler::relabel(const std::vector<int64_t>& dst, const LayerOut& lo, int layer) {
  Stopwatch sw;
  Block b;
  if (new_ratio_.size() != opts_.fanouts.size()) new_ratio_.assign(opts_.fanouts.size(), 1.0);
  const int64_t nd = static_cast<int64_t>(dst.size());
  const int64_t ne = static_cast<int64_t>(lo.nbrs.size());
  // The parallel relabel does about 1.8x the serial work at 2 threads (callgrind: 289M vs 159M
  // instructions on a products-sized batch), so its slower thread does as much as the serial pass:
  // it can only gain from 3 threads on.
  const int threads = num_threads();
  if (threads >= kParallelRelabelMinThreads && ne >= kParallelRelabelMinEdges &&
      nd + ne < (int64_t{1} << 32) - 1) {
    relabel_parallel(dst, lo, layer, threads, b);
  } else {
    relabel_serial(dst, lo, layer, b);
  }
  b.num_src = static_cast<int64_t>(b.src_ids.size());
  if (ne > 0) new_ratio_[layer] = static_cast<double>(b.num_src - nd) / static_cast<double>(ne);
  b.weights = lo.weights;
  stats_.t_relabel += sw.seconds();
  return b;
}

void CollectiveSampler::relabel_serial(const std::vector<int64_t>& dst, const LayerOut& lo,
                                       int layer, Block& b) {
  const int64_t nd = static_cast<int64_t>(dst.size());
  const int64_t ne = static_cast<int64_t>(lo.nbrs.size());
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
  b.src_ids.assign(dst.begin(), dst.end());
  bool ins = false;
  for (int64_t i = 0; i < nd; ++i) {
    csp::relabel_insert(t, mask, shift, dst[i], static_cast<uint32_t>(i), &ins);
  }
  b.indptr = lo.offsets;
  b.indices.resize(ne);
  const int64_t* nb = lo.nbrs.data();
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
void CollectiveSampler::relabel_parallel(const std::vector<int64_t>& dst, const LayerOut& lo,
                                         int layer, int threads, Block& b) {
  const int64_t nd = static_cast<int64_t>(dst.size());
  const int64_t ne = static_cast<int64_t>(lo.nbrs.size());
  const int64_t np = nd + ne;
  const double expect = static_cast<double>(nd) + 1.1 * new_ratio_[layer] * ne;
  uint64_t cap = 1024;
  int bits = 10;
  const uint64_t min_cap = std::max<uint64_t>(uint64_t{1} << 15, 16ULL * kClaimBatch * threads);
  while (static_cast<double>(cap) < 2 * expect || cap < min_cap) {
    cap <<= 1;
    ++bits;
  }
  const int64_t* nb = lo.nbrs.data();
  b.num_dst = nd;
  b.indptr = lo.offsets;
  b.indices.resize(ne);
  int64_t* idx = b.indices.data();
  std::vector<int64_t> firsts(threads + 1, 0);  // per chunk, then prefix offsets
  uint64_t* t = nullptr;
  int64_t mask = 0;
  int team = 1;
  while (true) {
    if (table_.size() < cap) table_.resize(cap);
    t = table_.data();
    mask = static_cast<int64_t>(cap - 1);
    const int shift = 64 - bits;
    const int64_t limit = static_cast<int64_t>(cap / 4 * 3);
    int64_t claimed_total = 0;
    int aborted = 0;
#pragma omp parallel num_threads(threads)
    {
      const int T = omp_get_num_threads(), me = omp_get_thread_num();
      if (me == 0) team = T;
      std::memset(t + cap * me / T, 0, (cap * (me + 1) / T - cap * me / T) * sizeof(uint64_t));
#pragma omp barrier
      // (1) atomic min of positions
      const int64_t pb = np * me / T, pe = np * (me + 1) / T;
      int64_t unpublished = 0;
      bool stop = false, claimed = false, won = false;
      auto count_claim = [&]() {
        if (++unpublished == kClaimBatch) {
          const int64_t total = __atomic_add_fetch(&claimed_total, unpublished, __ATOMIC_RELAXED);
          unpublished = 0;
          if (total > limit) __atomic_store_n(&aborted, 1, __ATOMIC_RELAXED);
          stop = __atomic_load_n(&aborted, __ATOMIC_RELAXED) != 0;
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
#pragma omp barrier
      if (__atomic_load_n(&aborted, __ATOMIC_RELAXED) == 0) {
        // (2) which winners are first occurrences; the first chunk's all are
        int64_t c = 0;
        const int64_t eb = std::max(pb, nd) - nd, ee = std::max(pe, nd) - nd;
        if (me == 0) {
          for (int64_t e = eb; e < ee; ++e) c += (idx[e] & kCandidate) != 0;
        } else {
          constexpr int64_t kAhead2 = 16;
          for (int64_t e = eb; e < ee; ++e) {
            if (e + kAhead2 < ee && (idx[e + kAhead2] & kCandidate)) {
              __builtin_prefetch(t + (idx[e + kAhead2] & mask));
            }
            if (!(idx[e] & kCandidate)) continue;
            if (csp::relabel_slot_value(t[idx[e] & mask]) == static_cast<uint32_t>(nd + e)) {
              ++c;
            } else {
              idx[e] &= mask;
            }
          }
        }
        firsts[me + 1] = c;
      }
    }
    if (!aborted) break;
    cap <<= 1;  // outgrew the table: retry with one twice as large (ids do not depend on it)
    ++bits;
  }
  firsts.resize(team + 1);
  for (int c = 0; c < team; ++c) firsts[c + 1] += firsts[c];
  b.src_ids.resize(nd + firsts[team]);
  int64_t* src = b.src_ids.data();
#pragma omp parallel num_threads(team)
  {
    const int T = omp_get_num_threads(), me = omp_get_thread_num();
    // The chunks are the first region's; should this team be smaller, its first thread does all.
    const int c0 = T == team ? me : (me == 0 ? 0 : team), c1 = T == team ? me + 1 : team;
    for (int c = c0; c < c1; ++c) {
      std::memcpy(src + nd * c / team, dst.data() + nd * c / team,
                  (nd * (c + 1) / team - nd * c / team) * sizeof(int64_t));
      // (3) consecutive ids for this chunk's first occurrences
      const int64_t eb = std::max(np * c / team, nd) - nd,
                    ee = std::max(np * (c + 1) / team, nd) - nd;
      int64_t id = nd + firsts[c];
      for (int64_t e = eb; e < ee; ++e) {
        if (idx[e] & kCandidate) {
          const int64_t h = idx[e] & mask;
          t[h] = (t[h] & ~uint64_t{0xffffffff}) | static_cast<uint64_t>(id);
          src[id] = nb[e];
          idx[e] = id++ | kFinal;
        }
      }
    }
#pragma omp barrier
    // (4) the other picks' ids
    constexpr int64_t kAhead = 16;
    const int64_t eb = ne * me / T, ee = ne * (me + 1) / T;
    for (int64_t e = eb; e < ee; ++e) {
      if (e + kAhead < ee && !(idx[e + kAhead] & kFinal)) {
        __builtin_prefetch(t + (idx[e + kAhead] & mask));
      }
      const int64_t x = idx[e];
      idx[e] = x & kFinal ? x & ~kFinal : csp::relabel_slot_value(t[x & mask]);
    }
  }
}

SampledBatch CollectiveSampler::sample(const std::vector<int64_t>& seeds, int64_t epoch,
                                       int64_t batch) {
  Stopwatch total;
  // Validation before any communication; every rank learns whether any rank failed.
  std::string err;
  {
    std::vector<int64_t> s(seeds);
    std::sort(s.begin(), s.end());
    for (size_t i = 0; i < s.size() && err.empty(); ++i) {
      if (s[i] < 0 || s[i] >= part_.meta.num_nodes) {
        err = fmt::format("sampler: seed {} is not a node id (graph has {} nodes)", s[i],
                          part_.meta.num_nodes);
      } else if (opts_.require_owned_seeds && (s[i] < begin_ || s[i] >= end_)) {
        err = fmt::format("sampler: seed {} is not owned by rank {} (owns [{}, {}))", s[i], rank_,
                          begin_, end_);
      } else if (i > 0 && s[i] == s[i - 1]) {
        err = fmt::format("sampler: seed {} appears more than once in the batch", s[i]);
      }
    }
  }
  check_collective(err.empty(), err);

  const uint64_t sent0 = remote_bytes_sent(), recv0 = remote_bytes_recv();
  const int L = static_cast<int>(opts_.fanouts.size());
  SampledBatch out;
  out.epoch = epoch;
  out.batch = batch;
  out.seeds = seeds;
  std::vector<Block> blocks;
  blocks.reserve(L);
  std::vector<int64_t> frontier = seeds;
  std::vector<int32_t> fan;
  LayerOut& lo = layer_out_;
  for (int l = 0; l < L; ++l) {
    Stopwatch lsw;
    uint64_t key = rng_key(opts_.seed, epoch, batch, l);
    if (opts_.scheme == SampleScheme::kLayerWise) {
      fan = layerwise_counts(frontier, opts_.fanouts[l], key);
    }
    run_layer(frontier, fan, opts_.fanouts[l], key, lo);
    blocks.push_back(relabel(frontier, lo, l));
    stats_.sampled_edges += blocks.back().num_edges();
    if (l + 1 < L) frontier = blocks.back().src_ids;
    stats_.t_layer[l] += lsw.seconds();
  }
  std::reverse(blocks.begin(), blocks.end());
  out.blocks = std::move(blocks);
  stats_.batches += 1;
  stats_.seeds += static_cast<int64_t>(seeds.size());
  stats_.bytes_sent += remote_bytes_sent() - sent0;
  stats_.bytes_recv += remote_bytes_recv() - recv0;
  stats_.t_total += total.seconds();
  return out;
}

// ---------------------------------------------------------------------------------------------
// Random walks: each step is a CSP layer of fanout 1. A walk's restart draw and its neighbour draw
// come from the same stream (draws 0-1 and 2-3), so the requester decides restarts and the owner
// the move, and the result does not depend on who computes what.

WalkResult CollectiveSampler::random_walks(const std::vector<int64_t>& starts, int length,
                                           double restart_prob, int64_t epoch, int64_t batch) {
  std::string err;
  if (length < 0) err = fmt::format("random_walks: length must be >= 0, got {}", length);
  if (!(restart_prob >= 0 && restart_prob <= 1)) {
    err = fmt::format("random_walks: restart probability must be in [0, 1], got {}", restart_prob);
  }
  for (size_t i = 0; i < starts.size() && err.empty(); ++i) {
    int64_t s = starts[i];
    if (s < 0 || s >= part_.meta.num_nodes) {
      err = fmt::format("random_walks: start {} is not a node id", s);
    } else if (opts_.require_owned_seeds && (s < begin_ || s >= end_)) {
      err = fmt::format("random_walks: start {} is not owned by rank {} (owns [{}, {}))", s, rank_,
                        begin_, end_);
    }
  }
  check_collective(err.empty(), err);

  const int64_t W = static_cast<int64_t>(starts.size());
  const int64_t stride = length + 1;
  WalkResult r;
  r.num_walks = W;
  r.length = length;
  r.paths.assign(W * stride, -1);
  std::vector<uint32_t> occ(W);
  {
    std::unordered_map<int64_t, uint32_t> seen;
    for (int64_t i = 0; i < W; ++i) occ[i] = seen[starts[i]]++;
  }
  std::vector<int64_t> cur(starts);
  for (int64_t i = 0; i < W; ++i) r.paths[i * stride] = starts[i];
  const int P = size_;
  const int64_t* ip = part_.patch.rowptr();
  const auto& idx = part_.patch.indices;
  for (int t = 0; t < length; ++t) {
    const uint64_t key = rng_key(opts_.seed ^ kWalkSalt, epoch, batch, t);
    auto stream = [&](int64_t start, uint32_t j) {
      return RngStream(key, static_cast<uint64_t>(start), csp::kPurposeWalk + 4 * j);
    };
    // records (node, start, occurrence) of the walks that move along an edge this step
    std::vector<std::vector<int64_t>> by_owner(P);
    std::vector<std::vector<int64_t>> which(P);
    for (int64_t i = 0; i < W; ++i) {
      if (cur[i] < 0) continue;
      RngStream s = stream(starts[i], occ[i]);
      if (s.uniform01() < restart_prob) {
        cur[i] = starts[i];
        continue;
      }
      int o =
          P == 1 ? 0
                 : static_cast<int>(std::upper_bound(offsets_.begin() + 1, offsets_.end(), cur[i]) -
                                    (offsets_.begin() + 1));
      by_owner[o].insert(by_owner[o].end(), {cur[i], starts[i], static_cast<int64_t>(occ[i])});
      which[o].push_back(i);
    }
    auto step = [&](const int64_t* rec) {
      int64_t lv = rec[0] - begin_;
      int64_t deg = ip[lv + 1] - ip[lv];
      if (deg == 0) return int64_t{-1};
      RngStream s = stream(rec[1], static_cast<uint32_t>(rec[2]));
      (void)s.uniform01();  // draws 0-1: the restart decision
      return idx.int_at(ip[lv] + csp::draw_index(s, deg));
    };
    std::vector<int64_t> sc(P), send;
    for (int p = 0; p < P; ++p) {
      sc[p] = p == rank_ ? 0 : static_cast<int64_t>(by_owner[p].size());
      if (p != rank_) send.insert(send.end(), by_owner[p].begin(), by_owner[p].end());
    }
    std::vector<int64_t> rc(P, 0);
    std::vector<int64_t> recv;
    if (P > 1) {
      rc = comm_.exchange_counts(sc);
      recv = a2a(comm_, send, sc, rc, "walk.shuffle");
    }
    std::vector<int64_t> ans(recv.size() / 3);
    for (size_t i = 0; i < ans.size(); ++i) ans[i] = step(recv.data() + 3 * i);
    for (size_t i = 0; i < which[rank_].size(); ++i) {
      cur[which[rank_][i]] = step(by_owner[rank_].data() + 3 * i);
    }
    if (P > 1) {
      std::vector<int64_t> sc2(P), rc2(P);
      for (int p = 0; p < P; ++p) {
        sc2[p] = rc[p] / 3;
        rc2[p] = sc[p] / 3;
      }
      std::vector<int64_t> back = a2a(comm_, ans, sc2, rc2, "walk.reshuffle");
      int64_t k = 0;
      for (int p = 0; p < P; ++p) {
        if (p == rank_) continue;
        for (int64_t i : which[p]) cur[i] = back[k++];
      }
    }
    for (int64_t i = 0; i < W; ++i) r.paths[i * stride + t + 1] = cur[i];
  }
  return r;
}

PinSageResult CollectiveSampler::pinsage_neighbors(const std::vector<int64_t>& seeds, int num_walks,
                                                   int walk_length, double restart_prob, int top_k,
                                                   int64_t epoch, int64_t batch) {
  check_collective(num_walks > 0 && walk_length > 0 && top_k > 0,
                   fmt::format("pinsage_neighbors: num_walks, walk_length and top_k must be "
                               "positive (got {}, {}, {})",
                               num_walks, walk_length, top_k));
  std::vector<int64_t> starts;
  starts.reserve(seeds.size() * num_walks);
  for (int64_t s : seeds) starts.insert(starts.end(), num_walks, s);
  WalkResult w = random_walks(starts, walk_length, restart_prob, epoch, batch);
  PinSageResult r;
  r.indptr.push_back(0);
  const int64_t stride = walk_length + 1;
  std::unordered_map<int64_t, int64_t> visits;
  std::vector<std::pair<int64_t, int64_t>> items;
  for (size_t i = 0; i < seeds.size(); ++i) {
    visits.clear();
    for (int j = 0; j < num_walks; ++j) {
      const int64_t* p = w.paths.data() + (i * num_walks + j) * stride;
      for (int64_t t = 1; t < stride; ++t) {
        if (p[t] >= 0 && p[t] != seeds[i]) ++visits[p[t]];
      }
    }
    items.assign(visits.begin(), visits.end());
    auto better = [](const std::pair<int64_t, int64_t>& a, const std::pair<int64_t, int64_t>& b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    };
    size_t k = std::min<size_t>(top_k, items.size());
    std::partial_sort(items.begin(), items.begin() + k, items.end(), better);
    for (size_t j = 0; j < k; ++j) {
      r.ids.push_back(items[j].first);
      r.counts.push_back(static_cast<float>(items[j].second));
    }
    r.indptr.push_back(static_cast<int64_t>(r.ids.size()));
  }
  return r;
}

}  // namespace dsp
