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
#include "csp/backend.hpp"
#include "csp/block.hpp"
#include "csp/sampler_options.hpp"
#include "csp/temporal_kernels.hpp"
#include "layout/partition/partition.hpp"

namespace dsp {

// [layer][relation] fanouts of `o` on a graph of `schema` (see SamplerOptions::relation_fanouts).
// InvalidArgument naming --fanouts: a relation the schema does not have ("--fanouts: no relation
// 'writs' in the graph (relations: ...)"), an ambiguous name, a count outside [0, 2^22], lists of
// different lengths in a JSON map.
std::vector<std::vector<int>> resolve_relation_fanouts(const SamplerOptions& o,
                                                       const HeteroSchema& schema);

// What is wrong with a batch's seeds ("" when nothing): each must be a node id (< num_nodes),
// owned by `rank` ([begin, end)) when require_owned, and appear once.
std::string seed_error(const std::vector<int64_t>& seeds, int64_t num_nodes, bool require_owned,
                       int rank, int64_t begin, int64_t end);

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

  // Temporal sampling (TemporalSampling) at given times: seed i is (seeds[i],
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
// LABOR-i): row i of n is ids[off[i], off[i + 1]) (ascending global ids); fanout k; `rounds` as
// LaborSampling::importance (> 0, or -1). Writes the picks of row i at
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

// --temporal samples node seeds at their node times: InvalidArgument "--temporal: DIR has no node
// times (node_time.npy): each SEED is sampled at its node's time" when `o` is temporal and `part`
// (loaded from `dir`) has none; `seed` names the seeds ("training and evaluation seed").
void check_node_times(const SamplerOptions& o, const PartitionData& part, const std::string& dir,
                      const std::string& seed);

}  // namespace dsp
