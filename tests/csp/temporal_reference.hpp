#pragma once
// A plain reference of temporal neighbour sampling over a whole graph (one process, one loop), by
// the per-task functions of csp/temporal_kernels.hpp: what the collective sampler must reproduce,
// in global ids, at any number of ranks.
//
// A block's nodes are (id, time) pairs, as GraphBolt's compact_temporal_nodes makes them: layer l
// samples each destination (v, T) of its frontier with fanouts[l] under the step key
// rng_key(seed, epoch, batch, l) and the task's stream temporal_stream(key, v, T); every picked
// neighbour u becomes the source (u, T). The sources are the destinations (a prefix, in order)
// followed by the new (id, time) pairs in the order they are first picked (destination by
// destination, picks by row position), and they are the next layer's frontier. Blocks are in DGL's
// order (csp/block.hpp): blocks[0] is the input layer, blocks.back() ends at the seeds.
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "csp/temporal_kernels.hpp"
#include "graph/csr.hpp"

namespace dsp::testref {

struct TemporalNode {
  int64_t id = 0, time = 0;
  bool operator==(const TemporalNode& o) const { return id == o.id && time == o.time; }
  bool operator<(const TemporalNode& o) const { return id < o.id || (id == o.id && time < o.time); }
};

struct TemporalBlock {
  int64_t num_dst = 0;
  std::vector<TemporalNode> src;   // [num_src], prefix: the destinations
  std::vector<int64_t> indptr;     // [num_dst + 1]
  std::vector<int64_t> indices;    // [num_edges]: local source index of each pick
  std::vector<int64_t> edge_time;  // [num_edges]: the picked entry's edge time
  std::vector<int64_t> positions;  // [num_edges]: the picked entry's position in its row
};

struct TemporalRequest {
  std::vector<int> fanouts;  // fanouts[0]: the seeds' hop
  csp::TemporalStrategy strategy = csp::TemporalStrategy::kUniform;
  bool replace = false;
  uint64_t seed = 0;
  int64_t epoch = 0, batch = 0;
};

// One layer: the picks of every frontier node, sources compacted as described above.
inline TemporalBlock temporal_reference_layer(const Csr& g, const std::vector<TemporalNode>& dst,
                                              int fanout, uint64_t key, const TemporalRequest& r) {
  TemporalBlock b;
  b.num_dst = static_cast<int64_t>(dst.size());
  b.src = dst;
  std::map<TemporalNode, int64_t> local;
  for (size_t i = 0; i < dst.size(); ++i) {
    DSP_CHECK(local.emplace(dst[i], static_cast<int64_t>(i)).second,
              "temporal reference: frontier node ({}, {}) appears twice", dst[i].id, dst[i].time);
  }
  const int64_t* ptr = g.rowptr();
  const int64_t* times = g.times.data<int64_t>();
  std::vector<int64_t> pos(static_cast<size_t>(fanout > 0 ? fanout : 0));
  b.indptr.push_back(0);
  for (const TemporalNode& d : dst) {
    const int64_t p0 = ptr[d.id], deg = ptr[d.id + 1] - p0;
    const RngStream s = csp::temporal_stream(key, d.id, d.time);
    const int c = csp::temporal_positions(times + p0, deg, d.time, fanout, r.strategy, r.replace, s,
                                          pos.data());
    for (int j = 0; j < c; ++j) {
      const TemporalNode u{g.indices.int_at(p0 + pos[j]), d.time};
      auto [it, fresh] = local.emplace(u, static_cast<int64_t>(b.src.size()));
      if (fresh) b.src.push_back(u);
      b.indices.push_back(it->second);
      b.edge_time.push_back(times[p0 + pos[j]]);
      b.positions.push_back(pos[j]);
    }
    b.indptr.push_back(static_cast<int64_t>(b.indices.size()));
  }
  return b;
}

// The blocks of seeds (distinct (id, time) pairs) under `r`; g must have edge times.
inline std::vector<TemporalBlock> temporal_reference_sample(const Csr& g,
                                                            const std::vector<TemporalNode>& seeds,
                                                            const TemporalRequest& r) {
  DSP_CHECK(g.has_times(), "temporal reference: the graph has no edge times");
  std::vector<TemporalBlock> blocks;
  std::vector<TemporalNode> frontier = seeds;
  for (size_t l = 0; l < r.fanouts.size(); ++l) {
    const uint64_t key = rng_key(r.seed, static_cast<uint64_t>(r.epoch),
                                 static_cast<uint64_t>(r.batch), static_cast<uint64_t>(l));
    blocks.push_back(temporal_reference_layer(g, frontier, r.fanouts[l], key, r));
    frontier = blocks.back().src;
  }
  return {blocks.rbegin(), blocks.rend()};
}

}  // namespace dsp::testref
