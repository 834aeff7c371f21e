#include "csp/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/rng.hpp"
#include "core/timer.hpp"
#include "csp/exclusions.hpp"
#include "csp/layer_scheme.hpp"
#include "csp/rank_check.hpp"
#include "csp/sample_kernels.hpp"
#include "csp/sampler_detail.hpp"
#include "csp/scheme_protocol.hpp"

namespace dsp {

using csp::kPurposeNodeWise;

namespace {

using csp::task_fanout;
using csp::task_id;
using csp_detail::a2a;
using csp_detail::host_view;
using csp_detail::HostFill;
using csp_detail::prefix;
using csp_detail::row_prefix;
using csp_detail::sum;
using csp_detail::upload;

}  // namespace

nlohmann::json SamplerStats::to_json() const {
  return {{"batches", batches},
          {"seeds", seeds},
          {"layer_sources", layer_sources},
          {"sampled_edges", sampled_edges},
          {"tasks_local", tasks_local},
          {"tasks_remote", tasks_remote},
          {"excluded_entries", excluded_entries},
          {"t_shuffle", t_shuffle},
          {"t_sample", t_sample},
          {"t_reshuffle", t_reshuffle},
          {"t_relabel", t_relabel},
          {"t_total", t_total},
          {"t_layer", t_layer},
          {"bytes_sent", bytes_sent},
          {"bytes_recv", bytes_recv},
          {"host_syncs", host.syncs},
          {"host_reads", host.reads},
          {"host_read_bytes", host.read_bytes},
          {"host_allocations", host.allocations},
          {"graph_launches", host.graph_launches}};
}

PartitionData single_part(const Csr& g) {
  PartitionData d;
  d.meta.parts = 1;
  d.meta.offsets = {0, g.num_nodes};
  d.meta.num_nodes = g.num_nodes;
  d.meta.num_edges = g.num_edges();
  d.meta.index_dtype = g.num_edges() ? g.index_dtype() : DType::kInt64;
  d.meta.has_weights = g.has_weights();
  d.meta.has_edge_time = g.has_times();
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

namespace {
// --cuda-graphs captures a device backend's sampling kernels: refused where there are none.
void check_cuda_graphs(const SamplerOptions& o, const SamplerBackend& backend) {
  if (!o.cuda_graphs) return;
  DSP_CHECK_ARG(!(o.labor() && o.labor()->importance != 0),
                "--cuda-graphs: LABOR with importance rounds (--labor-importance) draws on the "
                "host; it runs no sampling kernels to capture");
  DSP_CHECK_ARG(backend.memory() == MemorySpace::kDevice,
                "--cuda-graphs: the {} sampler backend runs no kernels to capture (it needs a "
                "device backend: cuda, or the emulated device)",
                backend.name());
}
}  // namespace

namespace {

// Per patch entry, the inclusive prefix sum of its row's weights (rows in parallel).
std::vector<double> row_prefix_sums(const Csr& g) {
  std::vector<double> cum(g.num_edges());
  const int64_t* ip = g.rowptr();
  const float* w = g.weights.data<float>();
  parallel_for(0, g.num_nodes, 4096, [&](int64_t b, int64_t e) {
    for (int64_t v = b; v < e; ++v) row_prefix(w + ip[v], ip[v + 1] - ip[v], cum.data() + ip[v]);
  });
  return cum;
}

// What a sampler backend reads of this rank's part: the patch rows from global id `begin`, the
// weights' prefix sums (cum, biased sampling only, else null) and the cache list as hot rows.
LocalTopology local_topology(const PartitionData& part, int64_t begin, const double* cum) {
  const Csr& g = part.patch;
  LocalTopology topo;
  topo.num_rows = g.num_nodes;
  topo.num_edges = g.num_edges();
  topo.row_base = begin;
  topo.indptr = g.rowptr();
  topo.indices = g.num_edges() ? g.indices.raw() : nullptr;
  topo.idx32 = g.num_edges() == 0 || g.index_dtype() == DType::kInt32;
  topo.indices_mapped = g.num_edges() && g.indices.is_mapped();
  topo.weights = g.has_weights() ? g.weights.data<float>() : nullptr;
  topo.cum = cum;
  topo.times = g.has_times() ? g.times.data<int64_t>() : nullptr;
  if (part.cached.defined() && part.cached.dim(0) > 0) {
    topo.hot_nodes = part.cached.data<int64_t>();
    topo.num_hot = part.cached.dim(0);
  }
  return topo;
}

}  // namespace

CollectiveSampler::CollectiveSampler(const PartitionData& part, Communicator& comm,
                                     SamplerOptions opts, const SamplerBackendFactory& backend)
    : part_(part), comm_(comm), opts_(std::move(opts)) {
  check_fanouts(opts_.fanouts, "sampler");
  const std::string combination = sampler_combination_error(opts_);
  DSP_CHECK_ARG(combination.empty(), "sampler: {}", combination);
  rank_ = comm_.rank();
  size_ = comm_.size();
  DSP_CHECK_ARG(part_.meta.parts == size_ && part_.part == rank_,
                "sampler: partition part {} of {} loaded by rank {} of {}", part_.part,
                part_.meta.parts, rank_, size_);
  offsets_ = part_.meta.offsets;
  begin_ = offsets_[rank_];
  end_ = offsets_[rank_ + 1];
  if (part_.meta.hetero) {
    typed_ = std::make_unique<TypedScheme>(part_, opts_);
    for (int64_t& o : offsets_) o *= typed_->num_relations();
  }
  if (opts_.temporal())
    temporal_ = std::make_unique<TemporalScheme>(*opts_.temporal(), part_.meta.num_nodes);
  DSP_CHECK_ARG(part_.meta.hetero || opts_.relation_fanouts.empty(),
                "--fanouts: per-relation fanouts need a heterogeneous graph");
  DSP_CHECK_ARG(part_.meta.num_nodes < (int64_t{1} << 32) - 1,
                "sampler: graphs of up to 2^32-2 nodes are supported, got {}",
                part_.meta.num_nodes);
  DSP_CHECK_ARG(part_.patch.num_nodes == end_ - begin_, "sampler: patch has {} rows for {} nodes",
                part_.patch.num_nodes, end_ - begin_);
  DSP_CHECK_ARG(!opts_.biased() || part_.patch.has_weights(),
                "sampler: biased (weighted) sampling needs edge weights, and the graph has none");
  DSP_CHECK_ARG(!opts_.temporal() || part_.patch.has_times(),
                "sampler: --temporal needs edge times (edge_time.npy), and the partition has none");
  stats_.t_layer.assign(opts_.fanouts.size(), 0.0);
  stats_.layer_sources.assign(opts_.fanouts.size(), 0);
  if (opts_.biased()) cum_ = row_prefix_sums(part_.patch);
  scheme_ = make_layer_scheme(opts_, part_, cum_, comm_);  // collective when biased layer-wise
  LocalTopology topo = local_topology(part_, begin_, opts_.biased() ? cum_.data() : nullptr);
  if (part_.meta.hetero) {  // rows are (node, relation) segments: task ids v R + r
    topo.num_rows = part_.patch.num_nodes * typed_->num_relations();
    topo.row_base = begin_ * typed_->num_relations();
    topo.indptr = part_.relation_indptr.data<int64_t>();
    topo.hot_nodes = nullptr;
    topo.num_hot = 0;
  }
  // Layer-wise, LABOR-i and temporal sampling read their blocks' source ids on the host.
  if (scheme_->draws_on_host() || opts_.temporal()) opts_.ids_on_device = false;
  backend_ = backend ? backend(topo, opts_) : make_cpu_sampler_backend(topo, opts_);
  DSP_CHECK(backend_ != nullptr, "sampler: the backend factory returned no backend");
  check_cuda_graphs(opts_, *backend_);
  DSP_CHECK_ARG(size_ == 1 || backend_->memory() == MemorySpace::kHost ||
                    comm_.memory_space() == MemorySpace::kDevice,
                "sampler: the {} backend keeps its tasks and picks in device memory, and the '{}' "
                "communicator moves host memory only (give the sampler a device-space channel: "
                "nccl, or one staged through host memory)",
                backend_->name(), comm_.backend());
  buf_ = std::make_unique<Buffers>(*backend_);
  ex_ =
      std::make_unique<EdgeExclusions>(comm_, *backend_, offsets_, opts_.mode == SampleMode::kPull);
  ex_->zero();
  host0_ = backend_->traffic();  // construction's uploads are not a batch's
}

CollectiveSampler::~CollectiveSampler() = default;

const std::vector<std::vector<int>>& CollectiveSampler::relation_fanouts() const {
  static const std::vector<std::vector<int>> none;
  return typed_ ? typed_->fanouts() : none;
}

void CollectiveSampler::reset_stats() {
  stats_ = SamplerStats{};
  if (ex_) ex_->zero();
  host0_ = backend_ ? backend_->traffic() : HostTraffic{};
  stats_.t_layer.assign(opts_.fanouts.size(), 0.0);
  stats_.layer_sources.assign(opts_.fanouts.size(), 0);
}

// One all_reduce (max) of 2 * bad + any: bad anywhere makes it at least 2, else it is 1 when
// any rank excludes edges. The bytes the batch moves are counted from after it.
void CollectiveSampler::Round::check(const std::string& err, const ExcludedEdges* exclude) {
  const bool has_ex = exclude && !(exclude->dst.empty() && exclude->src.empty());
  const int64_t v = check_on_every_rank(s_.comm_, err, has_ex ? 1 : 0);
  sent0_ = remote_sent();
  recv0_ = remote_recv();
  s_.ex_->clear();
  if (v == 1) s_.ex_->share(has_ex ? exclude : nullptr);
}

SampledBatch CollectiveSampler::Round::finish(std::vector<Block>& blocks,
                                              const std::vector<int64_t>& seeds, int64_t epoch,
                                              int64_t batch) {
  SampledBatch out;
  out.epoch = epoch;
  out.batch = batch;
  out.seeds = seeds;
  std::reverse(blocks.begin(), blocks.end());
  out.blocks = std::move(blocks);
  SamplerStats& st = s_.stats_;
  st.batches += 1;
  st.seeds += static_cast<int64_t>(seeds.size());
  st.bytes_sent += remote_sent() - sent0_;
  st.bytes_recv += remote_recv() - recv0_;
  st.t_total += total_.seconds();
  st.host = s_.backend_->traffic() - s_.host0_;
  return out;
}

uint64_t CollectiveSampler::Round::remote_sent() const {
  if (s_.size_ == 1) return 0;
  CommCounters c = s_.comm_.counters();
  return c.total_sent() - c.bytes_sent[s_.rank_];
}
uint64_t CollectiveSampler::Round::remote_recv() const {
  if (s_.size_ == 1) return 0;
  CommCounters c = s_.comm_.counters();
  return c.total_recv() - c.bytes_recv[s_.rank_];
}

// ---------------------------------------------------------------------------------------------
// One CSP layer in five phases, on buffers in the backend's memory (only per-rank counts are
// host values). Positions: the frontier is grouped by owner rank ("grouped order": owner chunks in
// rank order, frontier order within a chunk); what a rank serves is laid out by requesting rank
// ("served order", its own chunk being its local tasks, which reach it through the all-to-all's
// self part: a local copy).

CollectiveSampler::Buffers::Buffers(const SamplerBackend& be) {
  for (auto* b : {&tasks, &perm, &served, &counts, &nbrs, &weights, &answer_counts, &answer_nbrs,
                  &answer_weights, &offsets, &layer_nbrs, &layer_weights, &fanout, &frontier, &next,
                  &frontier_times, &task_times, &served_times}) {
    *b = be.make_buffer();
  }
}

// The backend's exclusion counter is read here, not per batch; the read is not a batch's.
SamplerStats CollectiveSampler::stats() const {
  SamplerStats s = stats_;
  if (ex_->used()) {
    const HostTraffic before = backend_->traffic();
    s.excluded_entries += ex_->read_count();
    host0_ = backend_->traffic() - (before - host0_);
  }
  return s;
}

// An all-to-all of protocol buffers (backend memory), complete on return.
void CollectiveSampler::exchange(const BackendBuffer& send, const std::vector<int64_t>& sc,
                                 BackendBuffer& recv, const std::vector<int64_t>& rc, DType t,
                                 const char* label) {
  OpOptions o;
  o.label = label;
  o.host_buffers = backend_->memory() == MemorySpace::kHost;
  recv.reserve(static_cast<size_t>(std::max<int64_t>(sum(rc), 1)) * dtype_size(t));
  comm_.all_to_all_v(send.data(), sc, recv.data(), rc, t, o);
  if (!comm_.completes_on_return()) comm_.synchronize(o);
}

// Phase 2 (shuffle): tasks to their owners; served = tasks by requesting rank. With one rank the
// grouped tasks are the served ones.
void CollectiveSampler::shuffle() {
  Buffers& b = *buf_;
  if (size_ == 1) {
    std::swap(b.tasks, b.served);
    if (opts_.temporal()) std::swap(b.task_times, b.served_times);
    served_count_ = grouped_count_;
  } else {
    OpOptions o;
    o.label = "csp.shuffle.counts";
    served_count_ = comm_.exchange_counts(grouped_count_, o);
    exchange(*b.tasks, grouped_count_, *b.served, served_count_, DType::kInt64, "csp.shuffle");
    if (opts_.temporal()) {  // the tasks' times, with the same counts
      exchange(*b.task_times, grouped_count_, *b.served_times, served_count_, DType::kInt64,
               "csp.shuffle.t");
    }
  }
  served_off_ = prefix(served_count_);
}

// Phase 3 (sample): the backend samples every served task. Pull mode instead answers remote
// tasks with whole rows (the degree as the count), for the requester to sample; its own tasks
// are sampled here as in CSP.
void CollectiveSampler::serve(uint64_t key, int max_fanout, int64_t max_picks) {
  Buffers& b = *buf_;
  const int64_t n = served_off_[size_];
  if (opts_.mode != SampleMode::kPull || size_ == 1) {
    const TaskExclusions* ex = ex_->served(served_off_, 0, n);
    if (opts_.temporal()) backend_->set_task_times(b.served_times->as<int64_t>());
    served_picks_ = backend_->sample(b.served->as<int64_t>(), n, max_fanout, max_picks, key,
                                     b.counts->reserve_n<int32_t>(n), *b.nbrs,
                                     opts_.biased() ? b.weights.get() : nullptr, ex);
    backend_->set_task_times(nullptr);
    return;
  }
  serve_pulled(key, max_fanout, max_picks);
}

// Phase 4 (reshuffle): the answers go back to the requesters (counts, whose sizes both sides
// know, then the data): answer_* hold what this rank's tasks got, in grouped order (in pull mode:
// whole rows for remote tasks, sampled next by sample_pulled_rows). The data's sizes: each owner
// sums its served counts per requester (one read) and the sums are exchanged as counts, so a
// requester reads none back.
void CollectiveSampler::reshuffle() {
  Buffers& b = *buf_;
  const std::vector<int64_t> sc_data = backend_->segment_sums(b.counts->as<int32_t>(), served_off_);
  OpOptions o;
  o.label = "csp.reshuffle.sizes";
  const std::vector<int64_t> rc_data = comm_.exchange_counts(sc_data, o);
  exchange(*b.counts, served_count_, *b.answer_counts, grouped_count_, DType::kInt32,
           "csp.reshuffle.counts");
  exchange(*b.nbrs, sc_data, *b.answer_nbrs, rc_data, DType::kInt64, "csp.reshuffle");
  if (opts_.biased()) {
    exchange(*b.weights, sc_data, *b.answer_weights, rc_data, DType::kFloat32, "csp.reshuffle.w");
  }
  answer_picks_ = sum(rc_data);
}

// Phases 1-5 of one layer: the picks of frontier[0, nf) in frontier order (phase 5, un-permute:
// every grouped position's picks written back at its frontier index).
LayerPicks CollectiveSampler::run_layer(const int64_t* frontier, int64_t nf, const int32_t* fanout,
                                        int uniform_fanout, uint64_t key, const int64_t* host_times,
                                        const int64_t* known, int64_t max_picks) {
  Stopwatch sw;
  Buffers& b = *buf_;
  // Phase 1: the frontier's tasks grouped by owner; nodes with fanout 0 get no task.
  backend_->group(frontier, nf, fanout, uniform_fanout, offsets_, b.tasks->reserve_n<int64_t>(nf),
                  b.perm->reserve_n<int64_t>(nf), grouped_count_, known);
  const int64_t ng = sum(grouped_count_);
  if (host_times) group_times(host_times, nf, ng);
  stats_.tasks_local += grouped_count_[rank_];
  stats_.tasks_remote += ng - grouped_count_[rank_];
  shuffle();
  stats_.t_shuffle += sw.seconds();
  sw.reset();
  serve(key, uniform_fanout, max_picks);
  stats_.t_sample += sw.seconds();
  sw.reset();
  if (size_ > 1) {
    reshuffle();
    stats_.t_reshuffle += sw.seconds();
    sw.reset();
    if (opts_.mode == SampleMode::kPull) {
      sample_pulled_rows(key);
      stats_.t_sample += sw.seconds();
      sw.reset();
    }
  } else {
    std::swap(b.counts, b.answer_counts);
    std::swap(b.nbrs, b.answer_nbrs);
    std::swap(b.weights, b.answer_weights);
    answer_picks_ = served_picks_;
  }
  // Grouped order == frontier order (one rank, nothing skipped): the picks stay where they are.
  const bool identity = size_ == 1 && ng == nf;
  BackendBuffer* w = opts_.biased() ? b.layer_weights.get() : nullptr;
  backend_->unpermute(identity ? nullptr : b.perm->as<int64_t>(), ng, nf,
                      b.answer_counts->as<int32_t>(), b.answer_nbrs->as<int64_t>(),
                      opts_.biased() ? b.answer_weights->as<float>() : nullptr, answer_picks_,
                      *b.offsets, *b.layer_nbrs, w);
  LayerPicks out;
  out.offsets = b.offsets->as<int64_t>();
  out.nbrs = (identity ? b.answer_nbrs : b.layer_nbrs)->as<int64_t>();
  if (opts_.biased()) out.weights = (identity ? b.answer_weights : b.layer_weights)->as<float>();
  out.total = answer_picks_;
  out.exact = size_ > 1;  // the received picks, summed on the host (reshuffle, pulled rows)
  stats_.t_relabel += sw.seconds();  // reordering is part of block assembly
  return out;
}

std::string seed_error(const std::vector<int64_t>& seeds, int64_t num_nodes, bool require_owned,
                       int rank, int64_t begin, int64_t end) {
  std::vector<int64_t> s(seeds);
  std::sort(s.begin(), s.end());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] < 0 || s[i] >= num_nodes) {
      return fmt::format("sampler: seed {} is not a node id (graph has {} nodes)", s[i], num_nodes);
    } else if (require_owned && (s[i] < begin || s[i] >= end)) {
      return fmt::format("sampler: seed {} is not owned by rank {} (owns [{}, {}))", s[i], rank,
                         begin, end);
    } else if (i > 0 && s[i] == s[i - 1]) {
      return fmt::format("sampler: seed {} appears more than once in the batch", s[i]);
    }
  }
  return "";
}

// A batch's blocks (sampled from the seeds out) into `out` in input-layer-first order, and its
// totals into the stats: seeds, the remote bytes since (sent0, recv0), wall seconds.
void CollectiveSampler::fetch_rows(const int64_t* f, int64_t nf, std::vector<int64_t>& off,
                                   std::vector<int64_t>& ids) {
  const Csr& g = part_.patch;
  const int64_t* ip = g.rowptr();
  auto append_row = [&](int64_t v, std::vector<int64_t>& out) {
    for (int64_t e = ip[v - begin_]; e < ip[v - begin_ + 1]; ++e)
      out.push_back(g.indices.int_at(e));
  };
  off.assign(nf + 1, 0);
  ids.clear();
  if (size_ == 1) {
    stats_.tasks_local += nf;
    for (int64_t i = 0; i < nf; ++i) {
      append_row(f[i], ids);
      off[i + 1] = static_cast<int64_t>(ids.size());
    }
    return;
  }
  std::vector<int64_t> sc(size_, 0), owner(nf), where(nf), send(nf);
  for (int64_t i = 0; i < nf; ++i) ++sc[owner[i] = csp::owner_of(offsets_.data(), size_, f[i])];
  stats_.tasks_local += sc[rank_];
  stats_.tasks_remote += nf - sc[rank_];
  std::vector<int64_t> at = prefix(sc);
  for (int64_t i = 0; i < nf; ++i) send[where[i] = at[owner[i]]++] = f[i];
  OpOptions o;
  o.label = "csp.labor.rows.counts";
  o.host_buffers = true;
  const std::vector<int64_t> rc = comm_.exchange_counts(sc, o);
  const std::vector<int64_t> req = a2a(comm_, send, sc, rc, "csp.labor.rows.ids");
  std::vector<int64_t> deg(req.size()), rows, row_sc(size_, 0), row_rc(size_, 0);
  const std::vector<int64_t> ro = prefix(rc), so = prefix(sc);
  for (int p = 0; p < size_; ++p) {
    for (int64_t j = ro[p]; j < ro[p + 1]; ++j) {
      deg[j] = ip[req[j] - begin_ + 1] - ip[req[j] - begin_];
      row_sc[p] += deg[j];
      append_row(req[j], rows);
    }
  }
  const std::vector<int64_t> got_deg = a2a(comm_, deg, rc, sc, "csp.labor.rows.degrees");
  for (int p = 0; p < size_; ++p) {
    for (int64_t j = so[p]; j < so[p + 1]; ++j) row_rc[p] += got_deg[j];
  }
  const std::vector<int64_t> got = a2a(comm_, rows, row_sc, row_rc, "csp.labor.rows");
  const std::vector<int64_t> start = prefix(got_deg);
  for (int64_t i = 0; i < nf; ++i) off[i + 1] = off[i] + got_deg[where[i]];
  ids.resize(off[nf]);
  for (int64_t i = 0; i < nf; ++i) {
    std::copy(got.begin() + start[where[i]], got.begin() + start[where[i] + 1],
              ids.begin() + off[i]);
  }
}

SampledBatch CollectiveSampler::sample(const std::vector<int64_t>& seeds, int64_t epoch,
                                       int64_t batch, const ExcludedEdges* exclude) {
  if (typed_) return sample_typed(seeds, epoch, batch, exclude);
  if (!opts_.temporal()) return sample_nodewise(seeds, epoch, batch, exclude);
  DSP_CHECK_ARG(part_.node_time.defined(),
                "sampler: --temporal samples each seed at its node's time, and the partition has "
                "no node times (node_time.npy)");
  const int64_t* nt = part_.node_time.data<int64_t>();
  const int64_t n = part_.meta.num_nodes;
  std::vector<int64_t> times(seeds.size());
  // an id outside the graph keeps a time of 0: sample_temporal names it
  for (size_t i = 0; i < seeds.size(); ++i)
    times[i] = seeds[i] >= 0 && seeds[i] < n ? nt[seeds[i]] : 0;
  return sample_temporal(seeds, times, epoch, batch, exclude);
}

SampledBatch CollectiveSampler::sample_nodewise(const std::vector<int64_t>& seeds, int64_t epoch,
                                                int64_t batch, const ExcludedEdges* exclude) {
  Round round(*this);
  // Validation before any communication; every rank learns whether any rank failed (and whether
  // any rank excludes edges).
  std::string err =
      seed_error(seeds, part_.meta.num_nodes, opts_.require_owned_seeds, rank_, begin_, end_);
  const bool has_ex = exclude && !(exclude->dst.empty() && exclude->src.empty());
  if (err.empty() && has_ex) err = exclusion_error(opts_, part_.meta.num_nodes, *exclude);
  round.check(err, exclude);
  const int L = static_cast<int>(opts_.fanouts.size());
  std::vector<Block> blocks;
  blocks.reserve(L);
  // The frontier: the seeds, then the previous block's sources. A host backend reads them where
  // they are; a device backend gets the seeds uploaded and keeps each next frontier in its memory.
  // Layer-wise counts read them on the host.
  Buffers& bf = *buf_;
  const bool host = backend_->memory() == MemorySpace::kHost;
  const int64_t* frontier = seeds.data();
  if (!host) {
    upload(*backend_, *bf.frontier, seeds);
    frontier = bf.frontier->as<int64_t>();
  }
  const int64_t* host_frontier = seeds.data();
  int64_t nf = static_cast<int64_t>(seeds.size());
  // A device frontier's nodes per owner, so that group reads none back at 2+ ranks: the seeds'
  // counted here, each next frontier's by relabel with its sizes.
  OwnerCounts owners;
  owners.offsets = &offsets_;
  // At 2+ ranks, layers that make every frontier node a task (node-wise ones) know their owner
  // counts from the host (the seeds) and from relabel's sizes read (the next frontiers).
  const bool count_owners_ahead = !host && size_ > 1 && scheme_->tasks_every_node();
  if (count_owners_ahead) count_owners(seeds.data(), nf, owners);
  SchemeProtocol protocol(*this);
  for (int l = 0; l < L; ++l) {
    Stopwatch lsw;
    LayerScheme::Layer in;
    in.frontier = frontier;
    in.host_frontier = host_frontier;
    in.nf = nf;
    in.epoch = epoch;
    in.batch = batch;
    in.l = l;
    in.fanout = opts_.fanouts[l];
    in.key = rng_key(opts_.seed, epoch, batch, l);
    in.known = count_owners_ahead ? owners.counts.data() : nullptr;
    const LayerPicks lo = scheme_->pick(protocol, in);
    Stopwatch rsw;
    blocks.emplace_back();
    const bool next_on_device = !host && l + 1 < L;
    backend_->relabel(frontier, nf, lo, l, blocks.back(), next_on_device ? bf.next.get() : nullptr,
                      next_on_device && count_owners_ahead ? &owners : nullptr);
    host_frontier = blocks.back().src_ids.data();
    nf = blocks.back().num_src;
    if (next_on_device) {
      std::swap(bf.frontier, bf.next);
      frontier = bf.frontier->as<int64_t>();
    } else {
      frontier = host_frontier;
    }
    stats_.t_relabel += rsw.seconds();
    stats_.sampled_edges += blocks.back().num_edges();
    stats_.layer_sources[l] += blocks.back().num_src;
    stats_.t_layer[l] += lsw.seconds();
  }
  // The frontier's buffers swapped L - 1 times: back, so that every batch's layer l runs on the
  // same arrays (a captured sequence names them: cuda_graphs replays from the second batch on).
  if (!host && L % 2 == 0) std::swap(bf.frontier, bf.next);
  return round.finish(blocks, seeds, epoch, batch);
}

}  // namespace dsp
