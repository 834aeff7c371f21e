#pragma once
// How one layer of a node-wise batch picks its neighbours over the CSP protocol: one class per
// sampling scheme, each holding only its own options (taken from SamplerOptions once, at
// construction), behind LayerScheme. The protocol (CollectiveSampler, sampler.cpp) owns the
// exchanges and the backend; a scheme asks it for what it needs through LayerProtocol.
//   neighbour (layer_scheme.cpp): every frontier node is a task of the layer's fanout, drawn by
//     its owner's backend (uniform or weighted, with or without replacement);
//   LABOR-0 (sampler_labor.cpp): the same tasks, drawing with the layer's shared variates;
//   LABOR-i (sampler_labor.cpp): the requester fetches its frontier's rows and picks by DGL's
//     importance rounds itself, since the probabilities depend on the whole frontier;
//   layer-wise (layer_scheme.cpp): the layer's draws over the frontier (with or without
//     replacement, by in-degree or in-weight) give per-node counts, which the owners then draw.
// Private to src/csp.
#include <cstdint>
#include <memory>
#include <vector>

#include "ccc/communicator.hpp"
#include "csp/backend.hpp"
#include "csp/sampler.hpp"

namespace dsp {

// What a scheme may ask of the protocol, for the layer in progress.
class LayerProtocol {
 public:
  virtual ~LayerProtocol() = default;
  // CSP's layer over frontier[0, nf) (backend memory): tasks of fanout[i] (backend memory) or,
  // with none, `uniform` each, sent to their owners and drawn there with `key`. known: the
  // frontier's nodes per owner (host, P) or null; max_picks: a bound of an owner's picks or -1.
  virtual LayerPicks run_layer(const int64_t* frontier, int64_t nf, const int32_t* fanout,
                               int uniform, uint64_t key, const int64_t* known,
                               int64_t max_picks) = 0;
  // The in-neighbour rows of frontier[0, nf) (host) at this rank: row i at ids[off[i], off[i+1]),
  // the owners answering. Collective.
  virtual void fetch_rows(const int64_t* frontier, int64_t nf, std::vector<int64_t>& off,
                          std::vector<int64_t>& ids) = 0;
  // Picks made at the requester in frontier order (offsets, ids, weights) as the layer's, in the
  // backend's buffers.
  virtual LayerPicks own_picks(const std::vector<int64_t>& off, const std::vector<int64_t>& nbrs,
                               const std::vector<float>& weights) = 0;
  // Per-node counts in frontier order as the layer's fanouts, in the backend's memory.
  virtual const int32_t* upload_fanouts(const std::vector<int32_t>& counts) = 0;
  virtual SamplerBackend& backend() = 0;
  virtual SamplerStats& stats() = 0;
  virtual int size() const = 0;
  virtual int owner_of(int64_t v) const = 0;
};

class LayerScheme {
 public:
  // One layer: its frontier (backend memory, and the same ids on the host), the batch, the
  // layer's number from the seeds out and fanout, the protocol's key for (seed, epoch, batch,
  // layer), and the frontier's nodes per owner when known (host, P) or null.
  struct Layer {
    const int64_t* frontier = nullptr;
    const int64_t* host_frontier = nullptr;
    int64_t nf = 0, epoch = 0, batch = 0;
    int l = 0, fanout = 0;
    uint64_t key = 0;
    const int64_t* known = nullptr;
  };
  virtual ~LayerScheme() = default;
  virtual LayerPicks pick(LayerProtocol& p, const Layer& in) = 0;
  // The layer's draws read the frontier's ids on the host (layer-wise counts, LABOR-i), so the
  // blocks' source ids come back to the host.
  virtual bool draws_on_host() const { return false; }
  // Every frontier node becomes a task of its owner, so its owner counts can be known ahead.
  virtual bool tasks_every_node() const { return true; }
};

// The scheme of `o` (node-wise, LABOR or layer-wise). A biased layer-wise scheme replicates
// every node's in-weight (`cum`: the part's inclusive row prefixes of its edge weights) over
// `comm`: collective then.
std::unique_ptr<LayerScheme> make_layer_scheme(const SamplerOptions& o, const PartitionData& part,
                                               const std::vector<double>& cum, Communicator& comm);
// LABOR's (sampler_labor.cpp), its variates keyed by the sampler's seed.
std::unique_ptr<LayerScheme> make_labor_scheme(const LaborSampling& o, uint64_t seed);

// How a temporal batch's layers become blocks (CollectiveSampler::sample_temporal;
// sampler_temporal.cpp): a block over (id, time) pairs, the picks inheriting their destination's
// time. The relabel keys a pair as id * K + k (k: the time's index among the batch's K distinct
// seed times) in the backend's table when N * K < 2^32 - 1 (temporal_keys_fit), else (or when
// TemporalSampling::host_relabel) on the host. Holds the buffers of the keys.
class TemporalScheme {
 public:
  TemporalScheme(const TemporalSampling& o, int64_t num_nodes)
      : host_relabel_(o.host_relabel), num_nodes_(num_nodes) {}
  // Layer l's block over the (id, time) pairs of the frontier (ids, time indices tix into the
  // batch's K distinct times tv) and its picks `lo`; ids and tix become the next frontier.
  void relabel(SamplerBackend& be, std::vector<int64_t>& ids, std::vector<int64_t>& tix,
               const std::vector<int64_t>& tv, const LayerPicks& lo, int l, Block& b);

 private:
  bool host_relabel_;
  int64_t num_nodes_;
  // The destinations' combined keys, the picks' and the destinations' time indices (their tags).
  std::unique_ptr<BackendBuffer> key_dst_, key_picks_, key_tags_;
};

// How a heterogeneous batch's layers pick (CollectiveSampler::sample on a heterogeneous partition;
// sampler_hetero.cpp): every frontier node v of type t takes, for each relation r into t, its
// layer's fanout of r as the task v R + r, which the protocol sends to v's owner, whose backend
// draws it from the row segment of r (relation_indptr); the block carries each edge's relation and
// each source's type. Holds only what typed sampling needs: the relations, their fanouts, its host
// scratch and the buffers it uploads through.
class TypedScheme {
 public:
  // Refuses the samplers a heterogeneous graph does not support and resolves the per-relation
  // fanouts of `o` (resolve_relation_fanouts); o.fanouts becomes each layer's largest count (the
  // layer count and the stats' size).
  TypedScheme(const PartitionData& part, SamplerOptions& o);
  int64_t num_relations() const { return num_rel_; }
  const std::vector<std::vector<int>>& fanouts() const { return fanouts_; }
  // A batch's excluded pairs as the protocol carries them, (dst R + rel, src): "" when they are
  // node ids of a relation, else the fault.
  std::string exclusions(const CollectiveSampler::ExcludedEdges& ex,
                         CollectiveSampler::ExcludedEdges& tasks) const;
  // Layer l of the frontier nodes[0, n) (host, with their types), drawn with `key`, into `out`
  // (host memory).
  void layer(LayerProtocol& p, const int64_t* nodes, const int32_t* types, int64_t n, uint64_t key,
             int l, Block& out);

 private:
  void attach_relations(const int32_t* types, int64_t n, Block& out) const;

  const PartitionData& part_;
  int64_t num_rel_ = 1;
  std::vector<std::vector<int>> fanouts_;      // [layer][relation]
  std::vector<std::vector<int>> rels_by_dst_;  // relations by destination type
  // One layer's host arrays (tasks, fanouts and relations in task order, each node's first task,
  // the picks' offsets per task and per node), kept for their capacity.
  std::vector<int64_t> tasks_, first_, toff_, noff_;
  std::vector<int32_t> fan_, rel_;
  // Where a device backend reads the tasks, their fanouts, the per-node offsets and the
  // destinations (made on first use).
  std::unique_ptr<BackendBuffer> d_tasks_, d_fan_, d_offsets_, d_dst_;
};

}  // namespace dsp
