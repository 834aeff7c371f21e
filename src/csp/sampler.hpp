#pragma once
// The collective sampling primitive (CSP, DSP section 2.3) on the partitioned layout.
//
// Per layer, every rank: groups its frontier by owner and sends each node to its owner (shuffle:
// one count exchange + one all_to_all_v; a rank's own nodes go through its self part, a local
// copy), samples all received tasks in one local pass (sample), returns the picked neighbours and
// per-task counts to the requesters (reshuffle: two all_to_all_v with sizes known in advance), puts
// the picks back in frontier order (un-permute) and builds the layer's block (relabel). The next
// frontier is the block's source node set.
//
// Collective: every rank calls sample() (or sample_temporal) for the same
// (epoch, batch), possibly with no seeds. Bad input on any rank makes every rank throw (one
// all_reduce of an error flag precedes the first exchange), so no rank is left waiting.
//
// Determinism: a node's picks are a function of (seed, epoch, batch, layer, global id, draw index)
// only (and of its excluded entries in the batch, with edge exclusion), so any number of ranks,
// any thread count, the pull mode and every backend give the same blocks in global ids.
//
// Devices: this class is the protocol, written once. Its per-layer arrays live in a
// SamplerBackend's memory and every per-element step is a backend op (backend.hpp): CPU by
// default, the CUDA kernels in the CUDA build, or the device path executed on the host in tests.
// Only per-rank counts (and each finished block) cross to the host, so `comm` must move the
// backend's memory: a device backend needs a device-space channel when P > 1 (checked).
//
// Conventions (block.hpp): fanouts from the seeds out; blocks[0] is the input layer; destination
// nodes are a prefix of source nodes. Source node order: destination nodes in frontier order,
// then new nodes in first-seen order scanning picks in (destination, neighbour id) order. Every
// layer's destination nodes are the previous (outer) block's source nodes: all of them are
// sampled again at the next hop, as a GNN layer needs h of every source node.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ccc/communicator.hpp"
#include "core/options.hpp"
#include "csp/backend.hpp"
#include "csp/block.hpp"
#include "csp/temporal_kernels.hpp"
#include "layout/partition/partition.hpp"

namespace dsp {

// kCsp pushes tasks to owners; kPull fetches remote adjacency rows (and weights) and samples
// locally (the ablation of DSP Fig. 11). Both give the same blocks.
enum class SampleMode { kCsp, kPull };

// Who samples which task (the picks do not depend on it: csp/degree_schedule.hpp). kDefault: one
// thread per task in task order (CPU: equal chunks per thread). kTurbo: tasks sorted by degree and
// dealt in snake order (TurboGNN): to warps and blocks on a GPU, with high-degree tasks' positions
// in shared memory; to threads on the CPU.
enum class SampleKernel { kDefault, kTurbo };

// Which sampler --sampler names: neighbour sampling (node-wise: fanouts[l] neighbours of every
// frontier node; the default), LABOR (node-wise with shared per-neighbour variates) or
// layer-wise (DSP Eq. 2: fanouts[l] draws per sample over the frontier with p_u ~ W_u, the
// in-degree or total in-neighbour weight when biased, giving per-node counts c_u, then node-wise
// sampling of c_u neighbours of u).
enum class SamplerKind { kNeighbor, kLabor, kLayer };
// The option values of --sampler (also "neighbour"), --sample-kernel, the mode (csp, pull),
// --layer-draws (with, without) and --temporal (off, uniform, recent): core/choice.hpp's tables,
// in sampler_options.cpp.
enum class LayerDraws { kWith, kWithout };
enum class TemporalKind { kOff, kUniform, kRecent };
const Names<SamplerKind>& names_of(SamplerKind);
const Names<SampleMode>& names_of(SampleMode);
const Names<SampleKernel>& names_of(SampleKernel);
const Names<LayerDraws>& names_of(LayerDraws);
const Names<TemporalKind>& names_of(TemporalKind);

// A fanout of -1 (as DGL's and PyG's): every neighbour. Node-wise sampling without replacement
// takes min(k, degree) picks, so the sampler asks the backends for the largest fanout,
// kMaxFanout (a node of a higher degree gives that many), and they size such tasks' slots by the
// degree (csp::kDegreeSlotsAbove). Layer-wise draws and --replace draw a number: refused there.
constexpr int kAllNeighbours = -1;
constexpr int kMaxFanout = 1 << 22;
constexpr int drawn_fanout(int f) { return f == kAllNeighbours ? kMaxFanout : f; }

// The one check of a list of fanouts, wherever one is given (dsp train, the Loader, the benches,
// the sampler itself): at least one layer, each fanout -1 (all) or in [1, 2^22]. `what` names the
// option.
void check_fanouts(const std::vector<int>& fanouts, const std::string& what);

// The parameters of DSP's Table 2 plus the RNG seed and the mode.
struct SamplerOptions {
  std::vector<int> fanouts{15, 10, 5};  // from the seeds out; each > 0 or -1 (all neighbours)
  SamplerKind kind = SamplerKind::kNeighbor;  // --sampler
  bool biased = false;   // weight by edge weight (the partition must have edge_weight.npy)
  bool replace = false;  // node-wise draws with replacement (layer-wise: within each node)
  uint64_t seed = 0;
  SampleMode mode = SampleMode::kCsp;
  SampleKernel kernel = SampleKernel::kDefault;
  // Seeds must be owned by the calling rank (co-partitioned seeds, DSP 2.2). Off, any rank may
  // sample any node (e.g. evaluation over arbitrary ids).
  bool require_owned_seeds = true;
  // A device backend leaves each block's edge arrays in its memory (Block::on_device) instead of
  // copying them to the host: for a trainer on that device. The CPU backend ignores it.
  bool blocks_on_device = false;
  // With blocks_on_device, a device backend also leaves each block's source ids there
  // (BlockEdges::src_ids; Block::ids_to_host brings them back) instead of reading them: for a
  // feature store on that device (FeatureStore::gather_resident). Not for the samplers that read
  // them on the host: layer-wise and LABOR-i (their draws take the previous block's ids) and
  // temporal sampling (its loader deduplicates them); their ids are read as without it.
  bool ids_on_device = false;
  // A device backend captures each of a layer's kernel sequences (group, sample, unpermute,
  // relabel up to its sizes) once per shape (its sizes rounded up to 3 significant bits and the
  // arrays it names) and replays it as one CUDA Graph launch from the second call of that shape
  // on; the same blocks. Reads and exchanges between ranks stay direct.
  // The CPU backend has no kernels to capture: the sampler refuses the option there.
  bool cuda_graphs = false;
  // LABOR (Balin & Catalyurek, NeurIPS'23; kind kLabor, --sampler labor): node-wise, with one
  // variate r_t per neighbour global id shared by the layer's seeds (csp::LaborVariates).
  // labor_importance 0: LABOR-0, each seed keeps the min(fanout, degree) neighbours of smallest
  // r_t (GraphBolt's LayerNeighborSampler: sequential Poisson sampling, a fixed count; no edge
  // weights). i > 0: LABOR-i, i rounds of DGL's importance-sampling fixed point over the
  // requesting rank's frontier give pi_ts = min(1, c_s q_t); -1: LABOR-*, rounds until it
  // converges. Then, as DGL's sample_labors (Poisson sampling), t is picked for s iff
  // r_t <= pi_ts (the count n_s varies; its mean is sum_t pi_ts), and the edge carries the
  // weight (1 / pi_ts) n_s / d_s (Block::weights): a mean over the picks weighted by it is the
  // Horvitz-Thompson estimate sum h_t / pi_ts / d_s of the mean over all d_s neighbours, exactly
  // unbiased (DGL normalises by sum 1 / pi over the picks instead of d_s: self-normalised, with
  // an O(1 / n_s) bias).
  int labor_importance = 0;
  bool labor_layer_dependency = false;  // every layer the same variates (DGL layer_dependency)
  int labor_batch_dependency = 1;       // K > 1: variates drift over K batches (DGL's kappa)
  // Layer-wise: the layer's draws with replacement over the frontier (p_u ~ W_u), or without,
  // over the union of the frontier's in-edges (multivariate hypergeometric counts c_u <= d_u,
  // then c_u distinct neighbours of u: needs replace = false and unbiased sampling).
  bool layer_replace = true;
  // Temporal neighbour sampling (--temporal uniform|recent; GraphBolt's TemporalNeighborSampler,
  // csp/temporal_kernels.hpp): every seed carries a time T (CollectiveSampler::sample_temporal),
  // a node samples only its in-edges of time < T (uniform, with or without `replace`, or the
  // fanout latest: recent) and its picks inherit T, so blocks are over (id, time) pairs
  // (Block::src_times). Node-wise and unbiased, in CSP mode; needs edge_time.npy.
  bool temporal = false;
  csp::TemporalStrategy temporal_strategy = csp::TemporalStrategy::kUniform;
  // Tests: relabel (id, time) pairs on the host even where combined keys fit the backend's table.
  bool temporal_host_relabel = false;
  // Heterogeneous graphs: per-relation fanouts as --fanouts gave them, "writes:10,cites:15;
  // writes:5,cites:10" (layers from the seeds out split by ';', each a list of relation:count
  // with a relation named by its name or its key src___name___dst, and '*' for every relation
  // not named; a relation named nowhere takes no neighbours in that layer) or a JSON map
  // {"writes": [10, 5], "*": [5, 5]}; `fanouts` then holds each layer's largest count. Kept as
  // text until the sampler resolves it against the partition's schema (resolve_relation_fanouts).
  // Empty: every relation takes fanouts[l] in layer l (DGL's int fanout on a heterograph).
  std::string relation_fanouts{};

  // The fanouts (check_fanouts, named --fanouts) and the sampler's combination: one
  // InvalidArgument naming what does not fit (sampler_combination_error).
  void validate() const;
};
// What is wrong with o's combination of sampler, scheme and mode ("" when nothing): the
// message validate() and the sampler throw.
std::string sampler_combination_error(const SamplerOptions& o);

// [layer][relation] fanouts of `o` on a graph of `schema` (see SamplerOptions::relation_fanouts).
// InvalidArgument naming --fanouts: a relation the schema does not have ("--fanouts: no relation
// 'writs' in the graph (relations: ...)"), an ambiguous name, a count outside [0, 2^22], lists of
// different lengths in a JSON map.
std::vector<std::vector<int>> resolve_relation_fanouts(const SamplerOptions& o,
                                                       const HeteroSchema& schema);
// Parses --fanouts text: "15,10,5" into `fanouts` (relation_fanouts cleared), or a per-relation
// form (any ':' or a JSON object) into relation_fanouts, with `fanouts` each layer's largest count.
void parse_fanouts_option(const std::string& text, SamplerOptions& o);

// What is wrong with a batch's seeds ("" when nothing): each must be a node id (< num_nodes),
// owned by `rank` ([begin, end)) when require_owned, and appear once.
std::string seed_error(const std::vector<int64_t>& seeds, int64_t num_nodes, bool require_owned,
                       int rank, int64_t begin, int64_t end);

// The sampler options a user sets (core/options.hpp): fanouts and sample_kernel. dsp train's
// table embeds them (JobConfig::sampler); SamplerOptions::validate is their one check.
const OptionTable<SamplerOptions>& sampler_options_table();

// Accumulated since construction or reset_stats(), this rank only. Times are wall seconds.
struct SamplerStats {
  int64_t batches = 0, seeds = 0;
  // Per layer from the seeds out: the source nodes of its block (distinct), summed over batches;
  // the last entry is the batches' input nodes (whose features are loaded).
  std::vector<int64_t> layer_sources;
  int64_t sampled_edges = 0;  // picks (block edges) produced for this rank's batches
  int64_t tasks_local = 0, tasks_remote = 0;  // frontier nodes sampled locally / sent away
  // Row entries left out of the tasks this rank sampled (edge exclusion), every layer counted:
  // as owner, its share of all ranks' batches (pull mode: also the rows it fetched).
  int64_t excluded_entries = 0;
  double t_shuffle = 0, t_sample = 0, t_reshuffle = 0, t_relabel = 0, t_total = 0;
  std::vector<double> t_layer;              // [layers], from the seeds out
  uint64_t bytes_sent = 0, bytes_recv = 0;  // to / from other ranks (self copies excluded)
  // A device backend's blocking syncs and device-to-host copies (SamplerBackend::traffic), from
  // the end of construction or reset_stats() to the end of the last batch.
  HostTraffic host;
  nlohmann::json to_json() const;
};

class EdgeExclusions;
class LayerScheme;
class TypedScheme;
class TemporalScheme;

class CollectiveSampler {
 public:
  // Collective when options need replicated data (biased layer-wise: per-node weight sums).
  // `part` must outlive the sampler (its arrays are referenced, not copied). `backend` builds the
  // local backend from this rank's topology; empty: the CPU backend.
  CollectiveSampler(const PartitionData& part, Communicator& comm, SamplerOptions opts,
                    const SamplerBackendFactory& backend = {});
  ~CollectiveSampler();

  // Edges one batch must not see (link prediction's edge exclusion): pair i removes the entry
  // src[i] from the in-neighbour row of dst[i] (global ids) for every layer of this batch.
  // On a heterogeneous partition `rel` (one per pair) names the relation whose segment of dst's
  // row loses src (an edge u -> v of relation r and its reverse v -> u of relation r'); empty on
  // a homogeneous one.
  struct ExcludedEdges {
    std::vector<int64_t> dst, src;
    std::vector<int32_t> rel;
  };

  // The blocks of a batch of node seeds (distinct global ids; duplicates are rejected), as every
  // sampler samples them (dsp train, dsp bench sample, dsp.Loader): node-wise, LABOR or
  // layer-wise; on a heterogeneous partition typed (below); for a temporal sampler every seed at
  // its node time (the partition's node_time.npy: InvalidArgument when it has none; callers
  // check first with check_node_times, whose message names their directory). Collective.
  //
  // `exclude` (null or empty: none) leaves out the batch's edges, passed by the rank whose batch
  // it is. For DGL's "self" pass the batch's edges, for "reverse_id" add the reverse pairs too; a
  // pair whose entry does not exist is ignored, duplicates are allowed, and a pair removes every
  // entry src of a row that holds it more than once. The pairs travel to the owners of their dst
  // (one count exchange + one all_to_all_v on the sampler's channel before the first layer, done
  // when any rank passes pairs; none with one rank). An owner serving a task of node v from this
  // rank draws v's positions uniformly over the d - x entries left (d: v's in-degree, x: its
  // excluded entries, csp::uniform_excluding: without or with replacement as `replace` says, the
  // task's usual stream, all of them when d - x <= fanout) and maps them past the excluded ones,
  // so a node keeps its fanout where its row allows, and a task with no excluded entry gets
  // exactly its plain picks. A node's picks thus depend on (seed, epoch, batch, layer, global id,
  // its excluded entries in this batch) only: the same blocks at every rank count and on every
  // backend. Node-wise uniform sampling only: with pairs, biased, layer-wise and temporal
  // sampling are refused (InvalidArgument on every rank), as are ids that are not nodes and dst /
  // src of different lengths. Pull mode samples the rows it fetches with its own pairs.
  //
  // Heterogeneous partitions (part.meta.hetero): the seeds are union ids of any types (usually
  // the target type's). Per layer, every frontier node v of type t takes, for each relation r
  // whose dst is t, fanouts[l][r] of its in-neighbours through r (resolve_relation_fanouts): the
  // task is the pair (v, r), travelling as the id v R + r to v's owner, whose backend samples it
  // from the row segment relation_indptr gives. All relations' tasks of a layer share one shuffle
  // and one reshuffle, and a task's draws are keyed by (seed, epoch, batch, layer, v, r), so the
  // blocks are the same at every rank count and on every backend. A block is over union ids:
  // destinations = the previous block's sources (all types), sources in first-seen order over
  // the picks (destination by destination, relation by relation), with edge_types and src_types
  // (block.hpp), in host memory (blocks_on_device or not: the relations are attached on the
  // host). Node-wise uniform sampling in CSP mode; other samplers are refused at construction.
  // `exclude` on a relation: each pair with its relation, travelling as (dst R + rel, src), the
  // task whose row segment loses the entry, so the protocol's exclusion path serves it unchanged.
  SampledBatch sample(const std::vector<int64_t>& seeds, int64_t epoch, int64_t batch,
                      const ExcludedEdges* exclude = nullptr);

  // Temporal sampling (SamplerOptions::temporal) at given times: seed i is (seeds[i],
  // seed_times[i]); the pairs must be distinct (one id may come at several times). Per layer the
  // frontier's times travel with its tasks to the owners (one more all_to_all_v with the task
  // counts), each owner's backend samples a task's row among its entries before the task's time,
  // the picks inherit their destination's time, and the block is built over (id, time) pairs
  // (block.hpp), with src_times. Picks are a pure function of (seed, epoch, batch, layer, id,
  // time): the same blocks at every rank count and on every backend. The relabel keys a pair as
  // id * K + k (k: the time's index among the batch's K distinct seed times, which are every
  // node's times) in the backend's table when N * K < 2^32 - 1 (temporal_keys_fit), else on the
  // host. Collective; refused by a sampler that is not temporal, and with excluded edges.
  SampledBatch sample_temporal(const std::vector<int64_t>& seeds,
                               const std::vector<int64_t>& seed_times, int64_t epoch, int64_t batch,
                               const ExcludedEdges* exclude = nullptr);

  // [layer][relation] fanouts of a heterogeneous sampler (empty otherwise).
  const std::vector<std::vector<int>>& relation_fanouts() const;

  const SamplerOptions& options() const { return opts_; }
  const SamplerBackend& backend() const { return *backend_; }
  // On a device backend with edge exclusion, reads the exclusion counter (a read no batch counts).
  SamplerStats stats() const;
  void reset_stats();

 private:
  // The protocol as a LayerScheme sees it, and one batch's bookkeeping (scheme_protocol.hpp).
  class SchemeProtocol;
  class Round;
  // The protocol's per-layer arrays, in the backend's memory; reused, so they keep their capacity.
  struct Buffers {
    explicit Buffers(const SamplerBackend& be);
    // grouped order: tasks (packed id and fanout) and perm (grouped position -> frontier index)
    std::unique_ptr<BackendBuffer> tasks, perm;
    // served order: tasks, then their picks (counts int32, nbrs, weights when biased)
    std::unique_ptr<BackendBuffer> served, counts, nbrs, weights;
    // grouped order: the picks this rank's tasks got
    std::unique_ptr<BackendBuffer> answer_counts, answer_nbrs, answer_weights;
    // frontier order: the layer's picks; the frontier, its fanouts (layer-wise) and the next one
    std::unique_ptr<BackendBuffer> offsets, layer_nbrs, layer_weights, fanout, frontier, next;
    // temporal: the frontier's times, the tasks' (grouped, served order)
    std::unique_ptr<BackendBuffer> frontier_times, task_times, served_times;
  };
  // sample()'s node-wise batch (neighbour, LABOR, layer-wise: sampler.cpp) and typed batch
  // (sampler_hetero.cpp).
  SampledBatch sample_nodewise(const std::vector<int64_t>& seeds, int64_t epoch, int64_t batch,
                               const ExcludedEdges* exclude);
  SampledBatch sample_typed(const std::vector<int64_t>& seeds, int64_t epoch, int64_t batch,
                            const ExcludedEdges* exclude);
  // fanout: per frontier node (layer-wise, backend memory) or null, then every node gets
  // `uniform_fanout`. The picks stay valid until the next layer.
  // host_times (temporal): the frontier nodes' times, host memory; null otherwise.
  // known: the frontier's nodes per owner (host, P), or null (SamplerBackend::group).
  // max_picks: a bound of the picks an owner serves (SamplerBackend::sample), or -1.
  LayerPicks run_layer(const int64_t* frontier, int64_t nf, const int32_t* fanout,
                       int uniform_fanout, uint64_t key, const int64_t* host_times = nullptr,
                       const int64_t* known = nullptr, int64_t max_picks = -1);
  // Temporal: the grouped tasks' times (host_times of the nf frontier nodes by the group's
  // permutation, where it is) into task_times.
  void group_times(const int64_t* host_times, int64_t nf, int64_t ng);
  void exchange(const BackendBuffer& send, const std::vector<int64_t>& sc, BackendBuffer& recv,
                const std::vector<int64_t>& rc, DType t, const char* label);
  void shuffle();
  void serve(uint64_t key, int max_fanout, int64_t max_picks);
  void serve_pulled(uint64_t key, int max_fanout, int64_t max_picks);  // sampler_pull.cpp
  void reshuffle();
  void sample_pulled_rows(uint64_t key);  // sampler_pull.cpp
  // The in-neighbour rows of frontier[0, nf) at this rank (host), row i at ids[off[i], off[i+1]):
  // the owners answer (csp.labor.rows*, collective; nothing sent with one rank).
  void fetch_rows(const int64_t* frontier, int64_t nf, std::vector<int64_t>& off,
                  std::vector<int64_t>& ids);

  const PartitionData& part_;
  Communicator& comm_;
  SamplerOptions opts_;
  // Heterogeneous: how its layers pick (layer_scheme.hpp); offsets_ are then in task ids v R + r.
  std::unique_ptr<TypedScheme> typed_;
  // Temporal: how its layers become blocks over (id, time) pairs (layer_scheme.hpp).
  std::unique_ptr<TemporalScheme> temporal_;
  int rank_ = 0, size_ = 1;
  int64_t begin_ = 0, end_ = 0;
  std::vector<int64_t> offsets_;
  std::vector<double> cum_;         // per patch entry: inclusive prefix of its row's weights
  // How a node-wise layer picks (neighbour, LABOR, layer-wise: layer_scheme.hpp).
  std::unique_ptr<LayerScheme> scheme_;
  std::unique_ptr<SamplerBackend> backend_;
  std::unique_ptr<Buffers> buf_;
  // Per-rank task counts of the current layer (host): grouped by owner, served by requester.
  std::vector<int64_t> grouped_count_, served_count_, served_off_;
  int64_t served_picks_ = 0, answer_picks_ = 0;
  // The batch's excluded edges (link prediction; exclusions.hpp).
  std::unique_ptr<EdgeExclusions> ex_;
  SamplerStats stats_;
  // The backend's traffic when the stats were last reset (and since, the reads stats() made).
  mutable HostTraffic host0_;
};

// The CPU backend relabels in parallel (first occurrences marked in a concurrent table, then a
// prefix sum over them, as the device backend does) when enough OpenMP threads are available and
// a layer has at least this many picks; below it, one thread is faster. Either way the blocks are
// identical.
inline constexpr int64_t kParallelRelabelMinEdges = int64_t{1} << 14;
// Fewer threads than this relabel serially (see the CPU backend's relabel).
inline constexpr int kParallelRelabelMinThreads = 3;

// LABOR-i's picks over given rows (the requester's side of CollectiveSampler with
// labor_importance != 0): row i of n is ids[off[i], off[i + 1]) (ascending global ids); fanout
// k; `rounds` as SamplerOptions::labor_importance (> 0, or -1). Writes the picks of row i at
// out_off[i] .. out_off[i + 1] (in row order) with their weights.
void labor_importance_picks(int64_t n, const int64_t* off, const int64_t* ids, int k, int rounds,
                            const csp::LaborVariates& lv, std::vector<int64_t>& out_off,
                            std::vector<int64_t>& out_ids, std::vector<float>& out_w);

// A one-part PartitionData over a whole graph (no features): the single-process reference path
// (self communicator), used by tests and by presampling.
PartitionData single_part(const Csr& graph);

// Whether (id, time index) pairs of a graph of num_nodes nodes and `times` distinct times fit the
// relabel table's keys as id * times + index (< 2^32 - 1, csp::relabel_slot).
bool temporal_keys_fit(int64_t num_nodes, int64_t times);
TemporalKind temporal_kind(bool temporal, csp::TemporalStrategy s);

// --temporal samples node seeds at their node times: InvalidArgument "--temporal: DIR has no node
// times (node_time.npy): each SEED is sampled at its node's time" when `o` is temporal and `part`
// (loaded from `dir`) has none; `seed` names the seeds ("training and evaluation seed").
void check_node_times(const SamplerOptions& o, const PartitionData& part, const std::string& dir,
                      const std::string& seed);

}  // namespace dsp
