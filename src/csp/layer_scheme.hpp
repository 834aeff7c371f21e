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
// LABOR's (labor_scheme in sampler_labor.cpp).
std::unique_ptr<LayerScheme> make_labor_scheme(const SamplerOptions& o);

}  // namespace dsp
