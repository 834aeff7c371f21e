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

SampleKernel parse_sample_kernel(const std::string& s) {
  if (s == "default") return SampleKernel::kDefault;
  if (s == "turbo") return SampleKernel::kTurbo;
  DSP_THROW_T(InvalidArgument, "unknown sampling kernel '{}' (default, turbo)", s);
}

const char* sample_kernel_name(SampleKernel k) {
  return k == SampleKernel::kTurbo ? "turbo" : "default";
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
                                     SamplerOptions opts, const SamplerBackendFactory& backend)
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
  const Csr& g = part_.patch;
  LocalTopology topo;
  topo.num_rows = g.num_nodes;
  topo.num_edges = g.num_edges();
  topo.row_base = begin_;
  topo.indptr = g.rowptr();
  topo.indices = g.num_edges() ? g.indices.raw() : nullptr;
  topo.idx32 = g.num_edges() == 0 || g.index_dtype() == DType::kInt32;
  topo.indices_mapped = g.num_edges() && g.indices.is_mapped();
  topo.weights = g.has_weights() ? g.weights.data<float>() : nullptr;
  topo.cum = opts_.biased ? cum_.data() : nullptr;
  if (part_.cached.defined() && part_.cached.dim(0) > 0) {
    topo.hot_nodes = part_.cached.data<int64_t>();
    topo.num_hot = part_.cached.dim(0);
  }
  backend_ = backend ? backend(topo, opts_) : make_cpu_sampler_backend(topo, opts_);
  DSP_CHECK(backend_ != nullptr, "sampler: the backend factory returned no backend");
}

CollectiveSampler::~CollectiveSampler() = default;

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

// ---------------------------------------------------------------------------------------------
// One CSP layer in five phases. Positions: the frontier is grouped by owner rank ("grouped
// order": owner chunks in rank order, frontier order within a chunk); what a rank serves is laid
// out by requesting rank ("served order", its own chunk being its local tasks).

// Phase 1: the frontier's tasks grouped by owner (a range check on the partition offsets).
// Nodes with fanout 0 get no task and an empty row.
void CollectiveSampler::group_by_owner(const std::vector<int64_t>& frontier,
                                       const std::vector<int32_t>& fanout, int uniform_fanout,
                                       Grouped& g) const {
  const int P = size_;
  const int64_t nf = static_cast<int64_t>(frontier.size());
  std::vector<int32_t> own(nf);
  g.count.assign(P, 0);
  for (int64_t i = 0; i < nf; ++i) {
    const int k = fanout.empty() ? uniform_fanout : fanout[i];
    if (k <= 0) {
      own[i] = -1;
      continue;
    }
    const int64_t v = frontier[i];
    const int o = P == 1 ? 0
                         : static_cast<int>(std::upper_bound(offsets_.begin() + 1, offsets_.end(),
                                                             v) -
                                            (offsets_.begin() + 1));
    own[i] = o;
    ++g.count[o];
  }
  g.off = prefix(g.count);
  g.tasks.resize(g.off[P]);
  g.perm.resize(g.off[P]);
  std::vector<int64_t> cur(g.off.begin(), g.off.end() - 1);
  for (int64_t i = 0; i < nf; ++i) {
    if (own[i] < 0) continue;
    const int64_t pos = cur[own[i]]++;
    g.perm[pos] = i;
    g.tasks[pos] = pack_task(frontier[i], fanout.empty() ? uniform_fanout : fanout[i]);
  }
  // Grouped order == frontier order (one rank, or everything local, nothing skipped): results
  // need no un-permuting.
  g.identity = g.off[P] == nf;
  for (int64_t pos = 0; pos < g.off[P] && g.identity; ++pos) g.identity = g.perm[pos] == pos;
}

// Phase 2 (shuffle): remote tasks to their owners; served = tasks by requesting rank, the self
// chunk being this rank's own tasks. With one rank the grouped tasks are all served here: they
// move over (the later phases of a world of one need only the grouping's counts and order).
void CollectiveSampler::shuffle(Grouped& g, Served& s) {
  const int P = size_;
  s.recv_counts.assign(P, 0);
  if (P == 1) {
    std::swap(s.tasks, g.tasks);
    s.off = {0, static_cast<int64_t>(s.tasks.size())};
    return;
  }
  std::vector<int64_t> send_counts = g.count;
  send_counts[rank_] = 0;
  OpOptions o;
  o.label = "csp.shuffle.counts";
  s.recv_counts = comm_.exchange_counts(send_counts, o);
  std::vector<int64_t> recv =
      a2a(comm_, without_self(g.tasks, g.off, rank_), send_counts, s.recv_counts, "csp.shuffle");
  std::vector<int64_t> rc = s.recv_counts;
  rc[rank_] = g.count[rank_];
  s.off = prefix(rc);
  s.tasks.resize(s.off[P]);
  int64_t r = 0;
  for (int p = 0; p < P; ++p) {
    if (p == rank_) {
      std::copy(g.tasks.begin() + g.off[p], g.tasks.begin() + g.off[p + 1],
                s.tasks.begin() + s.off[p]);
    } else {
      std::copy(recv.begin() + r, recv.begin() + r + s.recv_counts[p], s.tasks.begin() + s.off[p]);
      r += s.recv_counts[p];
    }
  }
}

// Phase 3 (sample): the backend samples every served task. Pull mode instead answers remote
// tasks with whole rows (the degree as the count), for the requester to sample; its own tasks
// are sampled here as in CSP.
void CollectiveSampler::serve(const Served& s, uint64_t key, TaskPicks& out) {
  const bool pull = opts_.mode == SampleMode::kPull && size_ > 1;
  if (!pull) {
    backend_->sample(s.tasks.data(), s.off[size_], key, out);
    return;
  }
  const int64_t n = s.off[size_];
  const int64_t self_b = s.off[rank_], self_e = s.off[rank_ + 1];
  TaskPicks local;
  backend_->sample(s.tasks.data() + self_b, self_e - self_b, key, local);
  const int64_t* ip = part_.patch.rowptr();
  const float* w = opts_.biased ? part_.patch.weights.data<float>() : nullptr;
  out.counts.assign(n, 0);
  out.nbrs.clear();
  out.weights.clear();
  for (int64_t i = 0; i < n; ++i) {
    if (i == self_b) {
      std::copy(local.counts.begin(), local.counts.end(), out.counts.begin() + self_b);
      out.nbrs.insert(out.nbrs.end(), local.nbrs.begin(), local.nbrs.end());
      out.weights.insert(out.weights.end(), local.weights.begin(), local.weights.end());
    }
    if (i >= self_b && i < self_e) continue;
    const int64_t lv = task_id(s.tasks[i]) - begin_;
    out.counts[i] = static_cast<int32_t>(ip[lv + 1] - ip[lv]);
    for (int64_t e = ip[lv]; e < ip[lv + 1]; ++e) out.nbrs.push_back(part_.patch.indices.int_at(e));
    if (w) out.weights.insert(out.weights.end(), w + ip[lv], w + ip[lv + 1]);
  }
  if (self_b == n) {  // the self chunk is last and empty loops never reached it
    out.nbrs.insert(out.nbrs.end(), local.nbrs.begin(), local.nbrs.end());
    out.weights.insert(out.weights.end(), local.weights.begin(), local.weights.end());
  }
}

// Phase 4 (reshuffle): the answers to remote requests go back (counts, whose sizes both sides
// know, then the data); `answers` holds what this rank's own remote tasks got, in grouped order
// without the self chunk (in pull mode: whole rows, sampled next by sample_pulled_rows).
void CollectiveSampler::reshuffle(const Grouped& g, const Served& s, const TaskPicks& served,
                                  TaskPicks& answers) {
  const int P = size_;
  std::vector<int64_t> dcount(P, 0);  // data elements per requesting rank
  {
    int64_t k = 0;
    for (int p = 0; p < P; ++p) {
      for (int64_t i = s.off[p]; i < s.off[p + 1]; ++i) dcount[p] += served.counts[k++];
    }
  }
  std::vector<int64_t> doff = prefix(dcount);
  std::vector<int64_t> send_counts = g.count;  // what this rank asked of each owner
  send_counts[rank_] = 0;
  std::vector<int64_t> sc_cnt = s.recv_counts, sc_data = dcount;
  sc_cnt[rank_] = 0;
  sc_data[rank_] = 0;
  answers.counts = a2a(comm_, without_self(served.counts, s.off, rank_), sc_cnt, send_counts,
                       "csp.reshuffle.counts");
  std::vector<int64_t> rc_data(P, 0);
  {
    int64_t r = 0;
    for (int p = 0; p < P; ++p) {
      if (p == rank_) continue;
      for (int64_t i = 0; i < send_counts[p]; ++i) rc_data[p] += answers.counts[r++];
    }
  }
  answers.nbrs = a2a(comm_, without_self(served.nbrs, doff, rank_), sc_data, rc_data,
                     "csp.reshuffle");
  if (opts_.biased) {
    answers.weights = a2a(comm_, without_self(served.weights, doff, rank_), sc_data, rc_data,
                          "csp.reshuffle.w");
  }
}

// Pull mode, requester side: samples the fetched rows with the owners' exact per-node logic.
void CollectiveSampler::sample_pulled_rows(const Grouped& g, uint64_t key, TaskPicks& rows) {
  std::vector<int64_t> rtasks = without_self(g.tasks, g.off, rank_);
  const int64_t n = static_cast<int64_t>(rtasks.size());
  std::vector<int64_t> roff(n + 1, 0), slot(n + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    roff[i + 1] = roff[i] + rows.counts[i];
    slot[i + 1] = slot[i] + task_fanout(rtasks[i]);
  }
  std::vector<int64_t> buf(slot[n]);
  std::vector<float> bufw(opts_.biased ? slot[n] : 0);
  std::vector<int32_t> c(n);
  sample_pulled<int64_t>(rtasks.data(), n, key, roff.data(), rows.nbrs.data(),
                         opts_.biased ? rows.weights.data() : nullptr, slot.data(), c.data(),
                         buf.data(), opts_.biased ? bufw.data() : nullptr);
  compact(n, slot.data(), c.data(), buf.data(), opts_.biased ? bufw.data() : nullptr, rows.nbrs,
          rows.weights);
  rows.counts = std::move(c);
}

// Phase 5 (un-permute): the remote answers with the self chunk spliced in at this rank's place
// give every grouped position its picks; they are written back in frontier order.
void CollectiveSampler::unpermute(const Grouped& g, const Served& s, TaskPicks& served,
                                  TaskPicks& answers, int64_t nf, LayerPicks& out) {
  const int P = size_;
  out.offsets.assign(nf + 1, 0);
  if (P == 1 && g.identity) {
    for (int64_t i = 0; i < nf; ++i) out.offsets[i + 1] = out.offsets[i] + served.counts[i];
    std::swap(out.nbrs, served.nbrs);  // keeps both buffers' capacity for the next layer
    std::swap(out.weights, served.weights);
    return;
  }
  // Grouped counts, and where each grouped position's picks start in `answers` or `served`.
  const int64_t ng = g.off[P];
  const int64_t self_b = s.off[rank_];
  int64_t self_data = 0;  // served data before the self chunk
  for (int64_t i = 0; i < self_b; ++i) self_data += served.counts[i];
  std::vector<int32_t> cnt(ng);
  std::vector<const int64_t*> from(ng);
  std::vector<const float*> from_w(ng, nullptr);
  const bool biased = opts_.biased;
  int64_t a = 0, d = 0;
  for (int64_t pos = 0; pos < ng; ++pos) {
    const bool self = pos >= g.off[rank_] && pos < g.off[rank_ + 1];
    if (self) {
      const int64_t i = self_b + (pos - g.off[rank_]);
      cnt[pos] = served.counts[i];
      from[pos] = served.nbrs.data() + self_data;
      if (biased) from_w[pos] = served.weights.data() + self_data;
      self_data += cnt[pos];
    } else {
      cnt[pos] = answers.counts[a++];
      from[pos] = answers.nbrs.data() + d;
      if (biased) from_w[pos] = answers.weights.data() + d;
      d += cnt[pos];
    }
  }
  for (int64_t pos = 0; pos < ng; ++pos) out.offsets[g.perm[pos] + 1] = cnt[pos];
  for (int64_t i = 0; i < nf; ++i) out.offsets[i + 1] += out.offsets[i];
  out.nbrs.resize(out.offsets[nf]);
  out.weights.resize(biased ? out.offsets[nf] : 0);
  for (int64_t pos = 0; pos < ng; ++pos) {
    const int64_t at = out.offsets[g.perm[pos]];
    std::memcpy(out.nbrs.data() + at, from[pos], cnt[pos] * sizeof(int64_t));
    if (biased) std::memcpy(out.weights.data() + at, from_w[pos], cnt[pos] * sizeof(float));
  }
}

void CollectiveSampler::run_layer(const std::vector<int64_t>& frontier,
                                  const std::vector<int32_t>& fanout, int uniform_fanout,
                                  uint64_t key, LayerPicks& out) {
  Stopwatch sw;
  Grouped& g = grouped_;
  group_by_owner(frontier, fanout, uniform_fanout, g);
  stats_.tasks_local += g.count[rank_];
  stats_.tasks_remote += g.off[size_] - g.count[rank_];
  Served& s = served_;
  shuffle(g, s);
  stats_.t_shuffle += sw.seconds();
  sw.reset();
  serve(s, key, served_picks_);
  stats_.t_sample += sw.seconds();
  sw.reset();
  if (size_ > 1) {
    reshuffle(g, s, served_picks_, answers_);
    stats_.t_reshuffle += sw.seconds();
    sw.reset();
    if (opts_.mode == SampleMode::kPull) {
      sample_pulled_rows(g, key, answers_);
      stats_.t_sample += sw.seconds();
      sw.reset();
    }
  }
  unpermute(g, s, served_picks_, answers_, static_cast<int64_t>(frontier.size()), out);
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
  LayerPicks& lo = layer_out_;
  for (int l = 0; l < L; ++l) {
    Stopwatch lsw;
    uint64_t key = rng_key(opts_.seed, epoch, batch, l);
    if (opts_.scheme == SampleScheme::kLayerWise) {
      fan = layerwise_counts(frontier, opts_.fanouts[l], key);
    }
    run_layer(frontier, fan, opts_.fanouts[l], key, lo);
    Stopwatch rsw;
    blocks.emplace_back();
    backend_->relabel(frontier, lo, l, blocks.back());
    stats_.t_relabel += rsw.seconds();
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
