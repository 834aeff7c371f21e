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
#include "csp/sample_kernels.hpp"

namespace dsp {

using csp::kPurposeNodeWise;

namespace {

using csp::task_fanout;
using csp::task_id;
// Random walks use their own key domain, so a walk step never reuses a sampling layer's draws.
constexpr uint64_t kWalkSalt = 0x77616c6b'73746570ULL;  // "walkstep"

// Prefix offsets of per-rank counts.
std::vector<int64_t> prefix(const std::vector<int64_t>& c) {
  std::vector<int64_t> o(c.size() + 1, 0);
  for (size_t i = 0; i < c.size(); ++i) o[i + 1] = o[i] + c[i];
  return o;
}

// all_to_all_v of host vectors with known receive counts (walks).
template <class T>
std::vector<T> a2a(Communicator& c, const std::vector<T>& send, const std::vector<int64_t>& sc,
                   const std::vector<int64_t>& rc, const char* label) {
  int64_t total = 0;
  for (auto x : rc) total += x;
  std::vector<T> out(static_cast<size_t>(total));
  OpOptions o;
  o.label = label;
  o.host_buffers = true;
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

const Names<SamplerKind>& names_of(SamplerKind) {
  using K = SamplerKind;
  static const Names<K> n("sampler", {{K::kNeighbor, "neighbor"},
                                      {K::kLabor, "labor"},
                                      {K::kLayer, "layer"},
                                      {K::kNeighbor, "neighbour"}});
  return n;
}

const Names<SampleScheme>& names_of(SampleScheme) {
  using S = SampleScheme;
  static const Names<S> n("sampling scheme", {{S::kNodeWise, "node"},
                                              {S::kLayerWise, "layer"},
                                              {S::kNodeWise, "node-wise"},
                                              {S::kNodeWise, "nodewise"},
                                              {S::kLayerWise, "layer-wise"},
                                              {S::kLayerWise, "layerwise"}});
  return n;
}

const Names<SampleMode>& names_of(SampleMode) {
  static const Names<SampleMode> n("sampling mode",
                                   {{SampleMode::kCsp, "csp"}, {SampleMode::kPull, "pull"}});
  return n;
}

const Names<SampleKernel>& names_of(SampleKernel) {
  static const Names<SampleKernel> n(
      "sampling kernel", {{SampleKernel::kDefault, "default"}, {SampleKernel::kTurbo, "turbo"}});
  return n;
}

const Names<LayerDraws>& names_of(LayerDraws) {
  static const Names<LayerDraws> n(
      "layer draws", {{LayerDraws::kWith, "with"}, {LayerDraws::kWithout, "without"}});
  return n;
}

const Names<TemporalKind>& names_of(TemporalKind) {
  using T = TemporalKind;
  static const Names<T> n("temporal sampling",
                          {{T::kOff, "off"}, {T::kUniform, "uniform"}, {T::kRecent, "recent"}});
  return n;
}

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

SamplerKind SamplerOptions::kind() const {
  if (labor) return SamplerKind::kLabor;
  return scheme == SampleScheme::kLayerWise ? SamplerKind::kLayer : SamplerKind::kNeighbor;
}

std::string sampler_combination_error(const SamplerOptions& o) {
  const bool all = std::find(o.fanouts.begin(), o.fanouts.end(), kAllNeighbours) != o.fanouts.end();
  if (all && (o.scheme == SampleScheme::kLayerWise || o.replace)) {
    return "--fanouts -1 (all neighbours) samples node-wise without replacement (--sampler layer "
           "and --replace draw a number of picks: give that number)";
  }
  if (all && o.labor && o.labor_importance != 0) {
    return "--labor-importance with --fanouts -1: every neighbour is taken, there is nothing to "
           "weigh (give a fanout, or leave --labor-importance out)";
  }
  if (o.temporal) {
    if (o.labor || o.scheme != SampleScheme::kNodeWise || o.biased) {
      return "--temporal samples node-wise among the edges before each seed's time, uniformly or "
             "the most recent (biased, layer-wise and LABOR sampling are not supported with it)";
    }
    if (o.mode == SampleMode::kPull) return "--temporal: the pull mode is not supported";
  }
  if (o.labor) {
    if (o.scheme != SampleScheme::kNodeWise || o.biased || o.replace) {
      return "--sampler labor: LABOR samples node-wise, uniformly and without replacement "
             "(biased, with-replacement and layer-wise LABOR are not supported)";
    }
    if (o.mode == SampleMode::kPull) return "--sampler labor: the pull mode is not supported";
    if (o.labor_importance < -1) {
      return fmt::format("--labor-importance: rounds must be >= 0 or * (got {})",
                         o.labor_importance);
    }
    if (o.labor_batch_dependency < 1) {
      return fmt::format("--labor-batch-dependency: must be >= 1 (got {})",
                         o.labor_batch_dependency);
    }
  } else if (o.labor_importance != 0 || o.labor_layer_dependency || o.labor_batch_dependency != 1) {
    return "--labor-importance, --labor-layer-dependency and --labor-batch-dependency need "
           "--sampler labor";
  }
  if (!o.layer_replace) {
    if (o.scheme != SampleScheme::kLayerWise) return "--layer-draws without needs --sampler layer";
    if (o.biased || o.replace) {
      return "--layer-draws without: layer-wise sampling without replacement is uniform and takes "
             "distinct neighbours (biased sampling and --replace are not supported with it)";
    }
  }
  return "";
}

void SamplerOptions::validate() const {
  check_fanouts(fanouts, "--fanouts");
  const std::string err = sampler_combination_error(*this);
  DSP_CHECK_ARG(err.empty(), "{}", err);
}

namespace {
int parse_labor_rounds(const std::string& s) {
  if (s == "*") return -1;
  const int r = options::from_text<int>(s, "--labor-importance");
  DSP_CHECK_ARG(r >= 0, "--labor-importance: rounds must be >= 0 or * (got {})", s);
  return r;
}
std::string labor_rounds_text(int r) { return r < 0 ? "*" : std::to_string(r); }

// The options of the sampler's kind: --sampler and LABOR's (declared here once; dsp train, the
// benches and the Loader embed them).
std::vector<Option<SamplerOptions>> sampler_kind_options() {
  using S = SamplerOptions;
  Option<S> kind = options::declare<S>(
      "--sampler", "sampler",
      "neighbor (default: fanouts[l] neighbours of every node), labor (LABOR: as many, chosen "
      "by per-node variates shared across the layer's seeds, so fewer distinct nodes), or layer "
      "(layer-wise: fanouts[l] draws per layer over the frontier)");
  kind.type = options::type_of<SamplerKind>();
  auto set_kind = [](S& o, SamplerKind k) {
    o.labor = k == SamplerKind::kLabor;
    o.scheme = k == SamplerKind::kLayer ? SampleScheme::kLayerWise : SampleScheme::kNodeWise;
  };
  kind.parse = [set_kind](S& o, const std::string& s) {
    set_kind(o, parse_choice<SamplerKind>(s));
  };
  kind.read = [set_kind](S& o, const nlohmann::json& v) {
    set_kind(o, parse_choice<SamplerKind>(v.get<std::string>()));
  };
  kind.write = [](const S& o) { return nlohmann::json(name_of(o.kind())); };
  Option<S> rounds = options::declare<S>(
      "--labor-importance", "labor_importance",
      "LABOR-i: 0 (default, uniform), i rounds of importance sampling, or * (until it converges); "
      "with i != 0 sampled edges carry weights the models' aggregations use");
  rounds.type = "TEXT";
  rounds.parse = [](S& o, const std::string& s) { o.labor_importance = parse_labor_rounds(s); };
  rounds.read = [](S& o, const nlohmann::json& v) {
    o.labor_importance =
        parse_labor_rounds(v.is_string() ? v.get<std::string>() : std::to_string(v.get<int>()));
  };
  rounds.write = [](const S& o) { return nlohmann::json(labor_rounds_text(o.labor_importance)); };
  Option<S> draws = options::declare<S>(
      "--layer-draws", "layer_draws",
      "with (default) or without: --sampler layer's draws over the frontier with replacement, "
      "or without, over the union of its in-edges (each node at most its degree, distinct "
      "neighbours)");
  draws.type = options::type_of<LayerDraws>();
  auto parse_draws = [](const std::string& s) {
    return parse_choice<LayerDraws>(s) == LayerDraws::kWith;
  };
  draws.parse = [parse_draws](S& o, const std::string& s) { o.layer_replace = parse_draws(s); };
  draws.read = [parse_draws](S& o, const nlohmann::json& v) {
    o.layer_replace = parse_draws(v.get<std::string>());
  };
  draws.write = [](const S& o) {
    return nlohmann::json(name_of(o.layer_replace ? LayerDraws::kWith : LayerDraws::kWithout));
  };
  Option<S> temporal = options::declare<S>(
      "--temporal", "temporal",
      "off (default), uniform or recent: temporal neighbour sampling, every seed at its time T "
      "(a node's node_time.npy) sampling only in-edges of time < T (edge_time.npy), uniformly or "
      "the fanout latest; picks inherit T");
  temporal.type = options::type_of<TemporalKind>();
  auto parse_temporal = [](S& o, const std::string& v) {
    const TemporalKind t = parse_choice<TemporalKind>(v);
    o.temporal = t != TemporalKind::kOff;
    o.temporal_strategy = t == TemporalKind::kRecent ? csp::TemporalStrategy::kRecent
                                                     : csp::TemporalStrategy::kUniform;
  };
  temporal.parse = parse_temporal;
  temporal.read = [parse_temporal](S& o, const nlohmann::json& v) {
    parse_temporal(o, v.get<std::string>());
  };
  temporal.write = [](const S& o) {
    return nlohmann::json(name_of(temporal_kind(o.temporal, o.temporal_strategy)));
  };
  return {
      kind,
      rounds,
      options::toggle<S>(
          "--labor-layer-dependency", "labor_layer_dependency",
          "LABOR: every layer uses the same variates (fewer nodes)",
          [](S & o) -> auto& { return o.labor_layer_dependency; }),
      options::value<S>(
          "--labor-batch-dependency", "labor_batch_dependency",
          "LABOR: K > 1 lets the variates drift over K consecutive batches "
          "(more overlap between batches; default 1: independent)",
          [](S & o) -> auto& { return o.labor_batch_dependency; }),
      draws,
      temporal,
  };
}
}  // namespace

namespace {
// --cuda-graphs captures a device backend's sampling kernels: refused where there are none.
void check_cuda_graphs(const SamplerOptions& o, const SamplerBackend& backend) {
  if (!o.cuda_graphs) return;
  DSP_CHECK_ARG(!(o.labor && o.labor_importance != 0),
                "--cuda-graphs: LABOR with importance rounds (--labor-importance) draws on the "
                "host; it runs no sampling kernels to capture");
  DSP_CHECK_ARG(backend.memory() == MemorySpace::kDevice,
                "--cuda-graphs: the {} sampler backend runs no kernels to capture (it needs a "
                "device backend: cuda, or the emulated device)",
                backend.name());
}
}  // namespace

const OptionTable<SamplerOptions>& sampler_options_table() {
  static const OptionTable<SamplerOptions> table = [] {
    using S = SamplerOptions;
    Option<S> kernel = options::value<S>(
        "--sample-kernel", "sample_kernel",
        "default, or turbo: tasks degree-sorted and dealt in snake order (TurboGNN): to warps and "
        "blocks with shared-memory positions on a GPU, to threads on the CPU; the same blocks "
        "either way",
        [](S & o) -> auto& { return o.kernel; });
    Option<S> fanouts = options::declare<S>(
        "--fanouts", "fanouts",
        "neighbours sampled per node, from the seeds out; one per layer, -1 for all of them "
        "(default 15,10,5; dsp train --task link: 15,10). On a "
        "heterogeneous graph each relation takes them, or per relation: "
        "\"writes:10,cites:15;writes:5,cites:10\" (layers split by ';', '*' for the relations "
        "not named, the others none) or a JSON map {\"writes\": [10, 5], ...}");
    fanouts.type = "LIST";
    fanouts.parse = [](S& o, const std::string& s) { parse_fanouts_option(s, o); };
    fanouts.read = [](S& o, const nlohmann::json& v) {
      if (v.is_array()) {
        o.fanouts = v.get<std::vector<int>>();
        o.relation_fanouts.clear();
      } else {
        parse_fanouts_option(v.is_string() ? v.get<std::string>() : v.dump(), o);
      }
    };
    fanouts.write = [](const S& o) {
      return o.relation_fanouts.empty() ? nlohmann::json(o.fanouts)
                                        : nlohmann::json(o.relation_fanouts);
    };
    Option<S> graphs = options::toggle<S>(
        "--cuda-graphs", "cuda_graphs",
        "device sampler: capture each shape of a layer's sampling kernels once and replay it as "
        "one CUDA Graph launch (the same blocks; the CPU sampler refuses it)",
        [](S & o) -> auto& { return o.cuda_graphs; });
    OptionTable<S> t{fanouts, kernel, graphs};
    for (Option<S>& o : sampler_kind_options()) t.push_back(std::move(o));
    return t;
  }();
  return table;
}

void check_fanouts(const std::vector<int>& fanouts, const std::string& what) {
  DSP_CHECK_ARG(!fanouts.empty(), "{}: at least one layer (fanout) is needed", what);
  for (int f : fanouts) {
    DSP_CHECK_ARG(f == kAllNeighbours || (f > 0 && f <= kMaxFanout),
                  "{}: fanouts must be -1 (all neighbours) or in [1, {}], got {}", what,
                  kMaxFanout, f);
  }
}

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

// W_u of every node (its total in-weight), replicated on every rank by one all_gather of each
// rank's row sums (cum: the patch's row_prefix_sums): layer-wise sampling reads remote frontier
// nodes' without a round trip.
std::vector<double> replicate_weight_sums(const Csr& g, const std::vector<double>& cum,
                                          const std::vector<int64_t>& offsets, int64_t num_nodes,
                                          Communicator& comm) {
  const int size = comm.size();
  const int64_t* ip = g.rowptr();
  int64_t maxrows = 0;
  for (int p = 0; p < size; ++p) maxrows = std::max(maxrows, offsets[p + 1] - offsets[p]);
  std::vector<double> mine(maxrows, 0.0), all(maxrows * size);
  for (int64_t v = 0; v < g.num_nodes; ++v) {
    mine[v] = ip[v + 1] > ip[v] ? cum[ip[v + 1] - 1] : 0.0;
  }
  OpOptions o;
  o.host_buffers = true;
  comm.all_gather(mine.data(), all.data(), maxrows, DType::kFloat64, o);
  std::vector<double> sums(num_nodes);
  for (int p = 0; p < size; ++p) {
    std::copy(all.begin() + p * maxrows, all.begin() + p * maxrows + (offsets[p + 1] - offsets[p]),
              sums.begin() + offsets[p]);
  }
  return sums;
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
  if (part_.meta.hetero) init_hetero();
  DSP_CHECK_ARG(part_.meta.hetero || opts_.relation_fanouts.empty(),
                "--fanouts: per-relation fanouts need a heterogeneous graph");
  DSP_CHECK_ARG(part_.meta.num_nodes < (int64_t{1} << 32) - 1,
                "sampler: graphs of up to 2^32-2 nodes are supported, got {}",
                part_.meta.num_nodes);
  DSP_CHECK_ARG(part_.patch.num_nodes == end_ - begin_, "sampler: patch has {} rows for {} nodes",
                part_.patch.num_nodes, end_ - begin_);
  DSP_CHECK_ARG(!opts_.biased || part_.patch.has_weights(),
                "sampler: biased (weighted) sampling needs edge weights, and the graph has none");
  DSP_CHECK_ARG(!opts_.temporal || part_.patch.has_times(),
                "sampler: --temporal needs edge times (edge_time.npy), and the partition has none");
  stats_.t_layer.assign(opts_.fanouts.size(), 0.0);
  stats_.layer_sources.assign(opts_.fanouts.size(), 0);
  if (opts_.biased) {
    cum_ = row_prefix_sums(part_.patch);
    if (opts_.scheme == SampleScheme::kLayerWise) {
      weight_sum_ = replicate_weight_sums(part_.patch, cum_, offsets_, part_.meta.num_nodes, comm_);
    }
  }
  if (opts_.scheme == SampleScheme::kLayerWise && !opts_.biased) {
    DSP_CHECK_ARG(part_.in_degree.defined() && part_.in_degree.dim(0) == part_.meta.num_nodes,
                  "sampler: layer-wise sampling needs the replicated in-degree array");
  }
  LocalTopology topo = local_topology(part_, begin_, opts_.biased ? cum_.data() : nullptr);
  if (part_.meta.hetero) {  // rows are (node, relation) segments: task ids v R + r
    topo.num_rows = part_.patch.num_nodes * num_rel_;
    topo.row_base = begin_ * num_rel_;
    topo.indptr = part_.relation_indptr.data<int64_t>();
    topo.hot_nodes = nullptr;
    topo.num_hot = 0;
  }
  // Layer-wise, LABOR-i and temporal sampling read their blocks' source ids on the host.
  if (draws_on_host() || opts_.temporal) opts_.ids_on_device = false;
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
  zero_excluded();
  host0_ = backend_->traffic();  // construction's uploads are not a batch's
}

CollectiveSampler::~CollectiveSampler() = default;

void CollectiveSampler::reset_stats() {
  stats_ = SamplerStats{};
  if (backend_) zero_excluded();
  host0_ = backend_ ? backend_->traffic() : HostTraffic{};
  stats_.t_layer.assign(opts_.fanouts.size(), 0.0);
  stats_.layer_sources.assign(opts_.fanouts.size(), 0);
}

void CollectiveSampler::check_collective(bool ok, const std::string& msg) {
  check_collective_any(ok, msg, false);
}

// One all_reduce (max) of 2 * bad + any: bad anywhere makes it at least 2, else it is 1 when
// any rank set `any`.
bool CollectiveSampler::check_collective_any(bool ok, const std::string& msg, bool any) {
  int64_t v = (ok ? 0 : 2) + (any ? 1 : 0);
  OpOptions o;
  o.host_buffers = true;
  if (size_ > 1) comm_.all_reduce(&v, 1, DType::kInt64, ReduceOp::kMax, o);
  if (!ok) DSP_THROW_T(InvalidArgument, "{}", msg);
  if (v >= 2) DSP_THROW_T(InvalidArgument, "sampler: another rank passed invalid input");
  return v == 1;
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
                                      const int64_t* slot, int32_t* cnt, int64_t* out, float* outw,
                                      const TaskExclusions* ex) const {
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
      const int c =
          ex ? csp::excluding_task(*ex, i, v, rows + p0, deg, k, replace, s, o)
             : csp::sample_positions(deg, k, biased, replace, biased ? cum.data() : nullptr, s, o);
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
             const float* w, int64_t* out, float* outw) {
  int64_t o = 0;
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(out + o, data + slot[i], cnt[i] * sizeof(int64_t));
    if (w) std::memcpy(outw + o, w + slot[i], cnt[i] * sizeof(float));
    o += cnt[i];
  }
}
}  // namespace

// ---------------------------------------------------------------------------------------------
// One CSP layer in five phases, on buffers in the backend's memory (only per-rank counts are
// host values). Positions: the frontier is grouped by owner rank ("grouped order": owner chunks in
// rank order, frontier order within a chunk); what a rank serves is laid out by requesting rank
// ("served order", its own chunk being its local tasks, which reach it through the all-to-all's
// self part: a local copy).

namespace {
// A buffer's first n elements readable on the host: the buffer itself for a host backend.
template <class T>
const T* host_view(SamplerBackend& be, const BackendBuffer& buf, int64_t n, std::vector<T>& tmp) {
  if (be.memory() == MemorySpace::kHost) return buf.as<T>();
  tmp.resize(n);
  be.to_host(tmp.data(), buf.data(), n * sizeof(T));
  return tmp.data();
}
// Host memory that becomes a buffer's first n elements: the buffer itself for a host backend,
// else a host array copied over by done(). (Pull mode's host steps.)
template <class T>
class HostFill {
 public:
  HostFill(SamplerBackend& be, BackendBuffer& buf, int64_t n) : be_(be), buf_(buf), n_(n) {
    if (be.memory() == MemorySpace::kHost) {
      p_ = buf.reserve_n<T>(n);
    } else {
      tmp_.resize(n);
      p_ = tmp_.data();
    }
  }
  T* data() { return p_; }
  void done() {
    if (be_.memory() == MemorySpace::kHost) return;
    be_.to_backend(buf_.reserve_n<T>(n_), p_, n_ * sizeof(T));
  }

 private:
  SamplerBackend& be_;
  BackendBuffer& buf_;
  int64_t n_;
  T* p_ = nullptr;
  std::vector<T> tmp_;
};
// v into buf; with `own_only`, for the backend's own later calls only (to_backend_async: no wait).
template <class T>
void upload(SamplerBackend& be, BackendBuffer& buf, const std::vector<T>& v,
            bool own_only = false) {
  T* d = buf.reserve_n<T>(static_cast<int64_t>(v.size()));
  if (own_only) {
    be.to_backend_async(d, v.data(), v.size() * sizeof(T));
  } else {
    be.to_backend(d, v.data(), v.size() * sizeof(T));
  }
}
int64_t sum(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{0});
}
}  // namespace

CollectiveSampler::Buffers::Buffers(const SamplerBackend& be) {
  for (auto* b :
       {&tasks,          &perm,        &served,         &counts,   &nbrs,       &weights,
        &answer_counts,  &answer_nbrs, &answer_weights, &offsets,  &layer_nbrs, &layer_weights,
        &fanout,         &frontier,    &next,           &ex_tasks, &ex_pairs,   &ex_count,
        &frontier_times, &task_times,  &served_times,   &key_dst,  &key_picks,  &key_tags}) {
    *b = be.make_buffer();
  }
}

void CollectiveSampler::zero_excluded() {
  upload(*backend_, *buf_->ex_count, std::vector<uint64_t>{0}, true);
  ex_used_ = false;
}

// The backend's exclusion counter is read here, not per batch; the read is not a batch's.
SamplerStats CollectiveSampler::stats() const {
  SamplerStats s = stats_;
  if (ex_used_) {
    const HostTraffic before = backend_->traffic();
    std::vector<uint64_t> tmp;
    s.excluded_entries += static_cast<int64_t>(*host_view(*backend_, *buf_->ex_count, 1, tmp));
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
    if (opts_.temporal) std::swap(b.task_times, b.served_times);
    served_count_ = grouped_count_;
  } else {
    OpOptions o;
    o.label = "csp.shuffle.counts";
    served_count_ = comm_.exchange_counts(grouped_count_, o);
    exchange(*b.tasks, grouped_count_, *b.served, served_count_, DType::kInt64, "csp.shuffle");
    if (opts_.temporal) {  // the tasks' times, with the same counts
      exchange(*b.task_times, grouped_count_, *b.served_times, served_count_, DType::kInt64,
               "csp.shuffle.t");
    }
  }
  served_off_ = prefix(served_count_);
}

// ---------------------------------------------------------------------------------------------
// Edge exclusion (sample with ExcludedEdges): the pairs go to the owners of their dst once per
// batch; each layer, an owner turns the pairs of each requester into its served tasks' excluded
// row positions, which the backend's sample leaves out.

std::string CollectiveSampler::exclusion_error(const ExcludedEdges& ex) const {
  if (ex.dst.empty() && ex.src.empty()) return "";
  if (opts_.biased || opts_.scheme != SampleScheme::kNodeWise) {
    return "sampler: edge exclusion supports node-wise uniform sampling; biased and layer-wise "
           "sampling are not supported";
  }
  if (opts_.labor) {
    return "sampler: edge exclusion (link prediction) is not supported with --sampler labor";
  }
  if (ex.dst.size() != ex.src.size()) {
    return fmt::format("sampler: excluded edges: {} dst ids and {} src ids (one of each per edge)",
                       ex.dst.size(), ex.src.size());
  }
  if (!ex.rel.empty()) {
    return "sampler: excluded edges name relations, but the graph is homogeneous";
  }
  const int64_t n = part_.meta.num_nodes;
  for (size_t i = 0; i < ex.dst.size(); ++i) {
    if (ex.dst[i] < 0 || ex.dst[i] >= n || ex.src[i] < 0 || ex.src[i] >= n) {
      return fmt::format(
          "sampler: excluded edge {} -> {} is not between node ids (graph has {} "
          "nodes)",
          ex.src[i], ex.dst[i], n);
    }
  }
  return "";
}

namespace {
// Pairs per requester, each sorted and made distinct, packed as TaskExclusions::pairs reads them:
// P + 1 offsets, then every dst, then every src.
std::vector<int64_t> pack_pairs(std::vector<std::vector<std::pair<int64_t, int64_t>>>& by) {
  const int P = static_cast<int>(by.size());
  std::vector<int64_t> off(P + 1, 0);
  for (int q = 0; q < P; ++q) {
    std::sort(by[q].begin(), by[q].end());
    by[q].erase(std::unique(by[q].begin(), by[q].end()), by[q].end());
    off[q + 1] = off[q] + static_cast<int64_t>(by[q].size());
  }
  const int64_t M = off[P];
  std::vector<int64_t> out(P + 1 + 2 * M);
  std::copy(off.begin(), off.end(), out.begin());
  for (int q = 0; q < P; ++q) {
    for (int64_t j = 0; j < off[q + 1] - off[q]; ++j) {
      out[P + 1 + off[q] + j] = by[q][j].first;
      out[P + 1 + M + off[q] + j] = by[q][j].second;
    }
  }
  return out;
}
}  // namespace

void CollectiveSampler::share_exclusions(const ExcludedEdges* ex) {
  const int64_t m = ex ? static_cast<int64_t>(ex->dst.size()) : 0;
  std::vector<int64_t> sc(size_, 0), owner(m);
  for (int64_t i = 0; i < m; ++i) {
    owner[i] = size_ == 1 ? 0 : csp::owner_of(offsets_.data(), size_, ex->dst[i]);
    sc[owner[i]] += 2;
  }
  std::vector<int64_t> at = prefix(sc), send(2 * m);
  for (int64_t i = 0; i < m; ++i) {
    send[at[owner[i]]++] = ex->dst[i];
    send[at[owner[i]]++] = ex->src[i];
  }
  std::vector<int64_t> rc = sc, recv;
  if (size_ == 1) {
    recv = std::move(send);
  } else {
    OpOptions o;
    o.label = "csp.exclude.counts";
    o.host_buffers = true;
    rc = comm_.exchange_counts(sc, o);
    recv = a2a(comm_, send, sc, rc, "csp.exclude");
  }
  const std::vector<int64_t> ro = prefix(rc);
  std::vector<std::vector<std::pair<int64_t, int64_t>>> by(size_);
  for (int q = 0; q < size_; ++q) {
    for (int64_t j = ro[q]; j < ro[q + 1]; j += 2) by[q].emplace_back(recv[j], recv[j + 1]);
  }
  ex_pairs_ = pack_pairs(by);
  if (backend_->memory() != MemorySpace::kHost) upload(*backend_, *buf_->ex_pairs, ex_pairs_, true);
  if (opts_.mode == SampleMode::kPull && size_ > 1 && m > 0) {
    // pull mode samples the rows it fetches itself, under its own pairs
    std::vector<std::vector<std::pair<int64_t, int64_t>>> own(1);
    for (int64_t i = 0; i < m; ++i) own[0].emplace_back(ex->dst[i], ex->src[i]);
    ex_own_ = pack_pairs(own);
  }
}

// The exclusions of the served tasks [b, e): their requesters' pairs (ex_pairs_), the tasks'
// offsets per requester uploaded (P + 1 words, no read); null when this rank has no pairs.
const TaskExclusions* CollectiveSampler::served_exclusions(int64_t b, int64_t e) {
  if (ex_pairs_.empty() || ex_pairs_[size_] == 0 || e == b) return nullptr;
  ex_task_off_.resize(size_ + 1);
  for (int q = 0; q <= size_; ++q) {
    ex_task_off_[q] = std::clamp<int64_t>(served_off_[q] - b, 0, e - b);
  }
  const bool host = backend_->memory() == MemorySpace::kHost;
  if (!host) upload(*backend_, *buf_->ex_tasks, ex_task_off_, true);
  ex_used_ = true;
  ex_tasks_ = {host ? ex_task_off_.data() : buf_->ex_tasks->as<int64_t>(),
               host ? ex_pairs_.data() : buf_->ex_pairs->as<int64_t>(), size_,
               buf_->ex_count->as<uint64_t>()};
  return &ex_tasks_;
}

// Phase 3 (sample): the backend samples every served task. Pull mode instead answers remote
// tasks with whole rows (the degree as the count), for the requester to sample; its own tasks
// are sampled here as in CSP.
void CollectiveSampler::serve(uint64_t key, int max_fanout, int64_t max_picks) {
  Buffers& b = *buf_;
  const int64_t n = served_off_[size_];
  if (opts_.mode != SampleMode::kPull || size_ == 1) {
    const TaskExclusions* ex = served_exclusions(0, n);
    if (opts_.temporal) backend_->set_task_times(b.served_times->as<int64_t>());
    served_picks_ = backend_->sample(b.served->as<int64_t>(), n, max_fanout, max_picks, key,
                                     b.counts->reserve_n<int32_t>(n), *b.nbrs,
                                     opts_.biased ? b.weights.get() : nullptr, ex);
    backend_->set_task_times(nullptr);
    return;
  }
  serve_pulled(key, max_fanout, max_picks);
}

// Pull mode, owner side: its own tasks sampled as in CSP, every remote task answered with its
// whole row (the degree as the count, and the row's weights when biased).
void CollectiveSampler::serve_pulled(uint64_t key, int max_fanout, int64_t max_picks) {
  Buffers& b = *buf_;
  const int64_t n = served_off_[size_];
  const int64_t self_b = served_off_[rank_], self_e = served_off_[rank_ + 1];
  backend_->sample(b.served->as<int64_t>() + self_b, self_e - self_b, max_fanout, max_picks, key,
                   b.answer_counts->reserve_n<int32_t>(n), *b.answer_nbrs,
                   opts_.biased ? b.answer_weights.get() : nullptr,
                   served_exclusions(self_b, self_e));
  std::vector<int64_t> ht, ln;
  std::vector<int32_t> lc;
  std::vector<float> lw;
  const int64_t* tasks = host_view(*backend_, *b.served, n, ht);
  const int32_t* lcnt = host_view(*backend_, *b.answer_counts, self_e - self_b, lc);
  const int64_t nl = std::accumulate(lcnt, lcnt + (self_e - self_b), int64_t{0});  // exact
  const int64_t* lnb = host_view(*backend_, *b.answer_nbrs, nl, ln);
  const float* lwt = opts_.biased ? host_view(*backend_, *b.answer_weights, nl, lw) : nullptr;
  const int64_t* ip = part_.patch.rowptr();
  const float* w = opts_.biased ? part_.patch.weights.data<float>() : nullptr;
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
  if (opts_.biased) {
    exchange(*b.weights, sc_data, *b.answer_weights, rc_data, DType::kFloat32, "csp.reshuffle.w");
  }
  answer_picks_ = sum(rc_data);
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
      opts_.biased ? host_view(*backend_, *b.answer_weights, answer_picks_, hw) : nullptr;
  std::vector<int64_t> roff(ng + 1, 0), slot(ng + 1, 0);
  for (int64_t i = 0; i < ng; ++i) {
    const bool self = i >= self_b && i < self_e;
    roff[i + 1] = roff[i] + rc[i];
    const int k = task_fanout(tasks[i]);  // remote: its whole row came, rc[i] entries
    const bool by_row = self || csp::slot_needs_degree(k, opts_.replace);
    slot[i + 1] = slot[i] + (by_row ? std::min<int64_t>(rc[i], self ? rc[i] : k) : k);
  }
  std::vector<int64_t> buf(slot[ng]);
  std::vector<float> bufw(rw ? slot[ng] : 0);
  std::vector<int32_t> c(ng);
  uint64_t excluded = 0;  // this rank's own pairs (ex_own_), one requester
  for (const auto& [from, to] : {std::pair{int64_t{0}, self_b}, std::pair{self_e, ng}}) {
    const int64_t part_tasks[2] = {0, to - from};
    const TaskExclusions part{part_tasks, ex_own_.data(), 1, &excluded};
    sample_pulled<int64_t>(tasks + from, to - from, key, roff.data() + from, rows, rw,
                           slot.data() + from, c.data() + from, buf.data(),
                           rw ? bufw.data() : nullptr, ex_own_.empty() ? nullptr : &part);
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
  BackendBuffer* w = opts_.biased ? b.layer_weights.get() : nullptr;
  backend_->unpermute(identity ? nullptr : b.perm->as<int64_t>(), ng, nf,
                      b.answer_counts->as<int32_t>(), b.answer_nbrs->as<int64_t>(),
                      opts_.biased ? b.answer_weights->as<float>() : nullptr, answer_picks_,
                      *b.offsets, *b.layer_nbrs, w);
  LayerPicks out;
  out.offsets = b.offsets->as<int64_t>();
  out.nbrs = (identity ? b.answer_nbrs : b.layer_nbrs)->as<int64_t>();
  if (opts_.biased) out.weights = (identity ? b.answer_weights : b.layer_weights)->as<float>();
  out.total = answer_picks_;
  out.exact = size_ > 1;  // the received picks, summed on the host (reshuffle, pulled rows)
  stats_.t_relabel += sw.seconds();  // reordering is part of block assembly
  return out;
}

// ---------------------------------------------------------------------------------------------
// LABOR. LABOR-0 is CSP's layer with the backend's per-task labor_positions; with importance
// sampling the requester fetches its frontier's rows and computes DGL's probabilities and the
// picks itself (labor_importance_picks), since they depend on the whole frontier.

namespace {
constexpr uint64_t kLaborSalt = 0x6c61626f'72766172ULL;  // "laborvar"
constexpr double kLaborEps = 1e-4;                       // DGL's convergence tolerance
constexpr int kLaborMaxRounds = 1000;                    // LABOR-*'s and each c_s solve's cap

// The c_s of row [b, e) (unique-neighbour index u[j], their q) that makes the variance of its
// Horvitz-Thompson estimate d^2 / min(k, d) (DGL's fixed point, Eq. 22 of arXiv:2210.13339),
// from the guess c.
double solve_row_c(const int64_t* u, int64_t b, int64_t e, int k, const std::vector<double>& q,
                   double c) {
  const double d = static_cast<double>(e - b);
  const double target = d * d / std::min(static_cast<double>(k), d);
  for (int it = 0; it < kLaborMaxRounds; ++it) {
    double v = 0;
    for (int64_t j = b; j < e; ++j) v += 1.0 / std::min(1.0, c * q[u[j]]);
    c *= v / target;
    if (std::min(v, target) / std::max(v, target) >= 1 - kLaborEps) break;
  }
  return c;
}

// The per-row c and per-neighbour q of LABOR-i (DGL's compute_importance_sampling_probabilities,
// unweighted): each round q_t *= max over the rows holding t of c_s, then every c_s solved.
void labor_probabilities(int64_t n, const int64_t* off, const int64_t* u, int64_t U, int k,
                         int rounds, std::vector<double>& c, std::vector<double>& q) {
  c.assign(n, 0.0);
  int64_t max_deg = 1;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t d = off[i + 1] - off[i];
    max_deg = std::max(max_deg, d);
    if (d > 0) c[i] = static_cast<double>(k) / static_cast<double>(d);
  }
  q.assign(U, 0.0);
  std::vector<double> h(U);
  double prev = static_cast<double>(max_deg) * static_cast<double>(n);
  const int max_rounds = rounds < 0 ? kLaborMaxRounds : rounds;
  for (int r = 0; r < max_rounds; ++r) {
    std::fill(h.begin(), h.end(), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = off[i]; j < off[i + 1]; ++j) h[u[j]] = std::max(h[u[j]], c[i]);
    }
    for (int64_t t = 0; t < U; ++t) q[t] = r == 0 ? h[t] : q[t] * h[t];
    for (int64_t i = 0; i < n; ++i) {
      if (off[i + 1] > off[i]) c[i] = solve_row_c(u, off[i], off[i + 1], k, q, c[i]);
    }
    double cur = 0;
    for (int64_t t = 0; t < U; ++t) cur += std::min(1.0, q[t]);
    if (cur / prev >= 1 - kLaborEps) break;
    prev = cur;
  }
}
}  // namespace

void labor_importance_picks(int64_t n, const int64_t* off, const int64_t* ids, int k, int rounds,
                            const csp::LaborVariates& lv, std::vector<int64_t>& out_off,
                            std::vector<int64_t>& out_ids, std::vector<float>& out_w) {
  // the distinct neighbours, in first-seen order (a deterministic order for every sum over them)
  const int64_t E = off[n];
  std::unordered_map<int64_t, int64_t> index;
  index.reserve(static_cast<size_t>(E));
  std::vector<int64_t> u(E);
  for (int64_t j = 0; j < E; ++j) {
    u[j] = index.emplace(ids[j], static_cast<int64_t>(index.size())).first->second;
  }
  std::vector<double> c, q;
  labor_probabilities(n, off, u.data(), static_cast<int64_t>(index.size()), k, rounds, c, q);
  out_off.assign(n + 1, 0);
  out_ids.clear();
  out_w.clear();
  for (int64_t i = 0; i < n; ++i) {
    // Poisson sampling (DGL's sample_labors): t is picked iff r_t <= pi_t, independently, so the
    // Horvitz-Thompson weights 1 / pi are exact (a fixed count would bias them unless the pi
    // summed to it, as only LABOR-0's do).
    const int64_t first = static_cast<int64_t>(out_ids.size());
    for (int64_t j = off[i]; j < off[i + 1]; ++j) {
      const double pi = std::min(1.0, c[i] * q[u[j]]);
      const double r = (csp::labor_variate(lv, ids[j]) + 0.5) * (1.0 / 4294967296.0);
      if (r > pi) continue;
      out_ids.push_back(ids[j]);
      out_w.push_back(static_cast<float>(1.0 / pi));
    }
    // w = (1 / pi) m / d: a mean over the m picks weighted by w is sum(h / pi) / d, the
    // Horvitz-Thompson estimate of the mean over all d neighbours, exactly unbiased (DGL divides
    // by sum(1 / pi) over the picks instead of d: self-normalised, biased by O(1 / m)).
    const int64_t m = static_cast<int64_t>(out_ids.size()) - first;
    const double d = static_cast<double>(off[i + 1] - off[i]);
    for (int64_t j = first; j < first + m; ++j) {
      out_w[j] = static_cast<float>(out_w[j] * static_cast<double>(m) / d);
    }
    out_off[i + 1] = static_cast<int64_t>(out_ids.size());
  }
}

csp::LaborVariates CollectiveSampler::labor_variates(int64_t epoch, int64_t batch, int l) const {
  csp::LaborVariates lv;
  lv.on = true;
  const uint64_t layer = opts_.labor_layer_dependency ? 0 : static_cast<uint64_t>(l);
  const uint64_t seed = opts_.seed ^ kLaborSalt;
  const int64_t K = opts_.labor_batch_dependency;
  if (K <= 1) {
    lv.key0 = lv.key1 = rng_key(seed, epoch, batch, layer);
    return lv;
  }
  // DGL's continuous seed: batches g K .. g K + K - 1 move from key g's variates to key g + 1's.
  const int64_t g = batch / K;
  const double x = static_cast<double>(batch % K) / static_cast<double>(K);
  lv.key0 = rng_key(seed, epoch, g, layer);
  lv.key1 = rng_key(seed, epoch, g + 1, layer);
  lv.c0 = std::cos(1.5707963267948966 * x);
  lv.c1 = std::sin(1.5707963267948966 * x);
  return lv;
}

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

LayerPicks CollectiveSampler::labor_importance_layer(const int64_t* frontier, int64_t nf, int k,
                                                     const csp::LaborVariates& lv) {
  Stopwatch sw;
  std::vector<int64_t> off, ids, po, pn;
  std::vector<float> pw;
  fetch_rows(frontier, nf, off, ids);
  stats_.t_shuffle += sw.seconds();
  sw.reset();
  labor_importance_picks(nf, off.data(), ids.data(), k, opts_.labor_importance, lv, po, pn, pw);
  stats_.t_sample += sw.seconds();
  Buffers& b = *buf_;
  upload(*backend_, *b.offsets, po);
  upload(*backend_, *b.layer_nbrs, pn);
  upload(*backend_, *b.layer_weights, pw);
  LayerPicks out;
  out.offsets = b.offsets->as<int64_t>();
  out.nbrs = b.layer_nbrs->as<int64_t>();
  out.weights = b.layer_weights->as<float>();
  out.total = static_cast<int64_t>(pn.size());
  out.exact = true;  // made here: relabel reads the block with its sizes
  return out;
}

namespace {
// Layer-wise without replacement: n draws over the union of the frontier's in-edges (cum: the
// inclusive prefix of the frontier nodes' in-degrees) without replacement, so c_i <= d_i and the
// counts are multivariate hypergeometric: min(n, D) distinct edge slots of [0, D) by Floyd's
// algorithm (each subset equally likely), each counted for the node whose in-edges hold it.
void hypergeometric_counts(const std::vector<int64_t>& cum, int n, RngStream& s,
                           std::vector<int32_t>& c) {
  const int64_t F = static_cast<int64_t>(cum.size()), D = cum.back();
  if (D <= n) {
    for (int64_t i = 0; i < F; ++i) c[i] = static_cast<int32_t>(cum[i] - (i ? cum[i - 1] : 0));
    return;
  }
  std::unordered_set<int64_t> taken;
  taken.reserve(2 * static_cast<size_t>(n));
  for (int64_t j = D - n; j < D; ++j) {
    int64_t t = csp::draw_index(s, j + 1);
    if (!taken.insert(t).second) {
      t = j;
      taken.insert(j);
    }
    ++c[std::upper_bound(cum.begin(), cum.end(), t) - cum.begin()];
  }
}
}  // namespace

std::vector<int32_t> CollectiveSampler::layerwise_counts(const int64_t* frontier, int64_t F, int n,
                                                         uint64_t key) const {
  std::vector<int32_t> c(F, 0);
  if (F == 0) return c;
  if (!opts_.layer_replace) {
    const int64_t* deg = part_.in_degree.data<int64_t>();
    std::vector<int64_t> cum(F);
    int64_t acc = 0;
    for (int64_t i = 0; i < F; ++i) cum[i] = acc += deg[frontier[i]];
    RngStream s(key, static_cast<uint64_t>(frontier[0]), csp::kPurposeLayerWise);
    if (acc > 0) hypergeometric_counts(cum, n, s, c);
    return c;
  }
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
void CollectiveSampler::finish_batch(SampledBatch& out, std::vector<Block>& blocks, int64_t seeds,
                                     uint64_t sent0, uint64_t recv0, double seconds) {
  std::reverse(blocks.begin(), blocks.end());
  out.blocks = std::move(blocks);
  stats_.batches += 1;
  stats_.seeds += seeds;
  stats_.bytes_sent += remote_bytes_sent() - sent0;
  stats_.bytes_recv += remote_bytes_recv() - recv0;
  stats_.t_total += seconds;
  stats_.host = backend_->traffic() - host0_;
}

SampledBatch CollectiveSampler::sample(const std::vector<int64_t>& seeds, int64_t epoch,
                                       int64_t batch) {
  return sample(seeds, epoch, batch, nullptr);
}

// At 2+ ranks, node-wise layers group every frontier node into a task: their owner counts can
// come from the host (the seeds) and from relabel's sizes read (the next frontiers).
bool CollectiveSampler::counts_owners_ahead() const {
  return size_ > 1 && opts_.scheme == SampleScheme::kNodeWise &&
         !(opts_.labor && opts_.labor_importance != 0);
}

// Layer-wise counts and LABOR-i's importance rounds are drawn on the host from the frontier's ids.
bool CollectiveSampler::draws_on_host() const {
  return opts_.scheme == SampleScheme::kLayerWise || (opts_.labor && opts_.labor_importance != 0);
}

LayerPicks CollectiveSampler::pick_layer(const int64_t* frontier, const int64_t* host_frontier,
                                         int64_t nf, int64_t epoch, int64_t batch, int l,
                                         const int64_t* known) {
  const uint64_t key = rng_key(opts_.seed, epoch, batch, l);
  if (opts_.labor && opts_.labor_importance != 0) {
    return labor_importance_layer(host_frontier, nf, drawn_fanout(opts_.fanouts[l]),
                                  labor_variates(epoch, batch, l));
  }
  if (opts_.labor) {
    backend_->set_labor(labor_variates(epoch, batch, l));
    const LayerPicks lo =
        run_layer(frontier, nf, nullptr, drawn_fanout(opts_.fanouts[l]), key, nullptr, known);
    backend_->set_labor(csp::LaborVariates{});
    return lo;
  }
  const int32_t* fanout = nullptr;
  std::vector<int64_t> tasks;  // layer-wise: the nodes given draws, per owner (group's counts)
  if (opts_.scheme == SampleScheme::kLayerWise) {
    const std::vector<int32_t> c = layerwise_counts(host_frontier, nf, opts_.fanouts[l], key);
    upload(*backend_, *buf_->fanout, c);
    fanout = buf_->fanout->as<int32_t>();
    tasks.assign(size_, 0);
    for (int64_t i = 0; i < nf; ++i) {
      if (c[i] > 0)
        ++tasks[size_ == 1 ? 0 : csp::owner_of(offsets_.data(), size_, host_frontier[i])];
    }
    known = tasks.data();
  }
  // Layer-wise: each rank draws fanouts[l] picks over its frontier, so an owner serves at most P
  // times that many, however many tasks hold them (the backend's slots are sized by that, not by
  // every task taking them all).
  const int64_t max_picks = fanout ? int64_t{size_} * std::max(opts_.fanouts[l], 0) : -1;
  return run_layer(frontier, nf, fanout, drawn_fanout(opts_.fanouts[l]), key, nullptr, known,
                   max_picks);
}

SampledBatch CollectiveSampler::sample(const std::vector<int64_t>& seeds, int64_t epoch,
                                       int64_t batch, const ExcludedEdges* exclude) {
  Stopwatch total;
  // Validation before any communication; every rank learns whether any rank failed (and whether
  // any rank excludes edges).
  std::string err =
      part_.meta.hetero
          ? "sampler: a heterogeneous graph is sampled by sample_hetero (sample_nodes)"
      : opts_.temporal
          ? "sampler: --temporal samples each seed at its time: give the seeds' times "
            "(sample_temporal)"
          : seed_error(seeds, part_.meta.num_nodes, opts_.require_owned_seeds, rank_, begin_, end_);
  const bool has_ex = exclude && !(exclude->dst.empty() && exclude->src.empty());
  if (err.empty() && has_ex) err = exclusion_error(*exclude);
  const bool any_ex = check_collective_any(err.empty(), err, has_ex);

  const uint64_t sent0 = remote_bytes_sent(), recv0 = remote_bytes_recv();
  ex_pairs_.clear();
  ex_own_.clear();
  if (any_ex) share_exclusions(exclude);
  const int L = static_cast<int>(opts_.fanouts.size());
  SampledBatch out;
  out.epoch = epoch;
  out.batch = batch;
  out.seeds = seeds;
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
  const bool count_owners_ahead = !host && counts_owners_ahead();
  if (count_owners_ahead) count_owners(seeds.data(), nf, owners);
  for (int l = 0; l < L; ++l) {
    Stopwatch lsw;
    const LayerPicks lo = pick_layer(frontier, host_frontier, nf, epoch, batch, l,
                                     count_owners_ahead ? owners.counts.data() : nullptr);
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
  finish_batch(out, blocks, static_cast<int64_t>(seeds.size()), sent0, recv0, total.seconds());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Random walks: each step is a CSP layer of fanout 1. A walk's restart draw and its neighbour draw
// come from the same stream (draws 0-1 and 2-3), so the requester decides restarts and the owner
// the move, and the result does not depend on who computes what.

namespace {

// The stream of the j-th walk from `start` at the step with key `key`.
RngStream walk_stream(uint64_t key, int64_t start, uint32_t j) {
  return RngStream(key, static_cast<uint64_t>(start), csp::kPurposeWalk + 4 * j);
}

// What is wrong with random_walks' arguments on this rank (empty: nothing): the length, the
// restart probability, and each start (a node id; owned by the rank [begin, end) when
// require_owned).
std::string walk_argument_error(const std::vector<int64_t>& starts, int length, double restart_prob,
                                int64_t num_nodes, bool require_owned, int rank, int64_t begin,
                                int64_t end) {
  std::string err;
  if (length < 0) err = fmt::format("random_walks: length must be >= 0, got {}", length);
  if (!(restart_prob >= 0 && restart_prob <= 1)) {
    err = fmt::format("random_walks: restart probability must be in [0, 1], got {}", restart_prob);
  }
  for (size_t i = 0; i < starts.size() && err.empty(); ++i) {
    int64_t s = starts[i];
    if (s < 0 || s >= num_nodes) {
      err = fmt::format("random_walks: start {} is not a node id", s);
    } else if (require_owned && (s < begin || s >= end)) {
      err = fmt::format("random_walks: start {} is not owned by rank {} (owns [{}, {}))", s, rank,
                        begin, end);
    }
  }
  return err;
}

// Per walk, how many earlier walks have the same start (walks from one start use distinct
// streams).
std::vector<uint32_t> walk_occurrences(const std::vector<int64_t>& starts) {
  std::vector<uint32_t> occ(starts.size());
  std::unordered_map<int64_t, uint32_t> seen;
  for (size_t i = 0; i < starts.size(); ++i) occ[i] = seen[starts[i]]++;
  return occ;
}

// The walks that move along an edge in one step, per owner of their current node: records
// (node, start, occurrence) and the walk of each record.
struct WalkMoves {
  std::vector<std::vector<int64_t>> by_owner;
  std::vector<std::vector<int64_t>> which;
};

// One step's requester side: each live walk (cur[i] >= 0) restarts (cur[i] = its start) with
// probability restart_prob, or else is routed to the owner of its node under offsets.
WalkMoves route_walks(const std::vector<int64_t>& starts, const std::vector<uint32_t>& occ,
                      double restart_prob, uint64_t key, const std::vector<int64_t>& offsets, int P,
                      std::vector<int64_t>& cur) {
  WalkMoves mv{std::vector<std::vector<int64_t>>(P), std::vector<std::vector<int64_t>>(P)};
  for (size_t i = 0; i < cur.size(); ++i) {
    if (cur[i] < 0) continue;
    RngStream s = walk_stream(key, starts[i], occ[i]);
    if (s.uniform01() < restart_prob) {
      cur[i] = starts[i];
      continue;
    }
    int o = P == 1 ? 0
                   : static_cast<int>(std::upper_bound(offsets.begin() + 1, offsets.end(), cur[i]) -
                                      (offsets.begin() + 1));
    mv.by_owner[o].insert(mv.by_owner[o].end(), {cur[i], starts[i], static_cast<int64_t>(occ[i])});
    mv.which[o].push_back(static_cast<int64_t>(i));
  }
  return mv;
}

// The owner's side of a move: the node of record rec (node, start, occurrence) steps to a
// uniform in-neighbour in the patch (rows from global id begin), or ends (-1) if it has none.
int64_t walk_move(const Csr& patch, int64_t begin, uint64_t key, const int64_t* rec) {
  const int64_t* ip = patch.rowptr();
  int64_t lv = rec[0] - begin;
  int64_t deg = ip[lv + 1] - ip[lv];
  if (deg == 0) return int64_t{-1};
  RngStream s = walk_stream(key, rec[1], static_cast<uint32_t>(rec[2]));
  (void)s.uniform01();  // draws 0-1: the restart decision
  return patch.indices.int_at(ip[lv] + csp::draw_index(s, deg));
}

// One step's moves: records owned elsewhere go to their owners ("walk.shuffle"), which answer
// them ("walk.reshuffle"); this rank's own are answered in place. Sets cur of every moved walk.
void move_walks(Communicator& comm, int rank, const Csr& patch, int64_t begin, uint64_t key,
                const WalkMoves& mv, std::vector<int64_t>& cur) {
  const int P = comm.size();
  std::vector<int64_t> sc(P), send;
  for (int p = 0; p < P; ++p) {
    sc[p] = p == rank ? 0 : static_cast<int64_t>(mv.by_owner[p].size());
    if (p != rank) send.insert(send.end(), mv.by_owner[p].begin(), mv.by_owner[p].end());
  }
  std::vector<int64_t> rc(P, 0);
  std::vector<int64_t> recv;
  if (P > 1) {
    rc = comm.exchange_counts(sc);
    recv = a2a(comm, send, sc, rc, "walk.shuffle");
  }
  std::vector<int64_t> ans(recv.size() / 3);
  for (size_t i = 0; i < ans.size(); ++i)
    ans[i] = walk_move(patch, begin, key, recv.data() + 3 * i);
  for (size_t i = 0; i < mv.which[rank].size(); ++i) {
    cur[mv.which[rank][i]] = walk_move(patch, begin, key, mv.by_owner[rank].data() + 3 * i);
  }
  if (P > 1) {
    std::vector<int64_t> sc2(P), rc2(P);
    for (int p = 0; p < P; ++p) {
      sc2[p] = rc[p] / 3;
      rc2[p] = sc[p] / 3;
    }
    std::vector<int64_t> back = a2a(comm, ans, sc2, rc2, "walk.reshuffle");
    int64_t k = 0;
    for (int p = 0; p < P; ++p) {
      if (p == rank) continue;
      for (int64_t i : mv.which[p]) cur[i] = back[k++];
    }
  }
}

}  // namespace

WalkResult CollectiveSampler::random_walks(const std::vector<int64_t>& starts, int length,
                                           double restart_prob, int64_t epoch, int64_t batch) {
  const std::string err =
      part_.meta.hetero ? "sampler: random walks over a heterogeneous graph are not supported"
                        : walk_argument_error(starts, length, restart_prob, part_.meta.num_nodes,
                                              opts_.require_owned_seeds, rank_, begin_, end_);
  check_collective(err.empty(), err);

  const int64_t W = static_cast<int64_t>(starts.size());
  const int64_t stride = length + 1;
  WalkResult r;
  r.num_walks = W;
  r.length = length;
  r.paths.assign(W * stride, -1);
  const std::vector<uint32_t> occ = walk_occurrences(starts);
  std::vector<int64_t> cur(starts);
  for (int64_t i = 0; i < W; ++i) r.paths[i * stride] = starts[i];
  for (int t = 0; t < length; ++t) {
    const uint64_t key = rng_key(opts_.seed ^ kWalkSalt, epoch, batch, t);
    const WalkMoves mv = route_walks(starts, occ, restart_prob, key, offsets_, size_, cur);
    move_walks(comm_, rank_, part_.patch, begin_, key, mv, cur);
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
