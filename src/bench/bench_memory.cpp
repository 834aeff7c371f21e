#include "bench/bench_memory.hpp"

#include <algorithm>

#include "core/dtype.hpp"
#include "core/huge_pages.hpp"
#include "core/memory.hpp"

namespace dsp {
namespace {

// Per sampled edge: its source and destination ids and edge id in the block, and the same again
// in the shuffle's send and receive buffers; per frontier node: its id in the relabel map's table
// (twice, load factor 1/2) and in the blocks' node lists.
constexpr uint64_t kSampledEdgeBytes = 64, kFrontierNodeBytes = 48;

// A layer of fanout f sampled from `frontier` nodes, at most: node-wise, every node takes f picks
// and adds as many nodes; layer-wise, f draws in all over the frontier; f = -1 (all neighbours):
// the frontier's whole rows, at most `num_edges`. Never past `num_nodes`.
struct LayerGrowth {
  uint64_t edges;
  int64_t next;  // the next frontier
};
LayerGrowth layer_growth(int64_t frontier, int f, int64_t num_nodes, int64_t num_edges,
                         bool layer_wise) {
  if (layer_wise) return {static_cast<uint64_t>(f), std::min(num_nodes, frontier + f)};
  if (f < 0) {
    const uint64_t rows = static_cast<uint64_t>(frontier) * static_cast<uint64_t>(num_nodes);
    return {std::min(rows, static_cast<uint64_t>(std::max<int64_t>(num_edges, 0))), num_nodes};
  }
  return {static_cast<uint64_t>(frontier) * static_cast<uint64_t>(f),
          frontier > num_nodes / (f + 1) ? num_nodes : frontier * (f + 1)};
}

}  // namespace

uint64_t bench_store_bytes(const PartitionData& part, bool features, bool sampler, int node_ranks) {
  uint64_t bytes = 0, copies = 0;
  if (features && part.features.defined()) {
    const uint64_t n = static_cast<uint64_t>(part.features.dim(0));
    const uint64_t row = part.features.nbytes() / std::max<uint64_t>(n, 1);
    const uint64_t cached = part.cached.defined() ? static_cast<uint64_t>(part.cached.dim(0)) : 0;
    bytes += 4 * n + n / 4 + 16 + cached * row;
    copies += part.features.nbytes();
  }
  if (sampler && part.patch.indices.defined()) {
    copies += part.patch.indptr.nbytes() + part.patch.indices.nbytes();
  }
  const uint64_t share =
      static_cast<uint64_t>(available_memory_bytes()) / 4 / std::max<uint64_t>(node_ranks, 1);
  return bytes + std::min(copies, share);
}

int64_t batch_nodes_bound(int64_t seeds, const std::vector<int>& fanouts, int64_t num_nodes,
                          bool layer_wise) {
  int64_t frontier = std::min(seeds, num_nodes), total = frontier;
  for (int f : fanouts) {
    frontier = layer_growth(frontier, f, num_nodes, 0, layer_wise).next;
    total = std::max(total, frontier);
  }
  return std::min(total, num_nodes);
}

uint64_t sampled_batch_bytes(int64_t seeds, const std::vector<int>& fanouts, int64_t num_nodes,
                             int64_t num_edges, bool layer_wise) {
  uint64_t bytes = 0;
  int64_t frontier = std::min(seeds, num_nodes);
  for (int f : fanouts) {
    const LayerGrowth g = layer_growth(frontier, f, num_nodes, num_edges, layer_wise);
    bytes += g.edges * kSampledEdgeBytes + static_cast<uint64_t>(frontier) * kFrontierNodeBytes;
    frontier = g.next;
  }
  return bytes + static_cast<uint64_t>(frontier) * kFrontierNodeBytes;
}

void check_bench_memory(const std::string& what, uint64_t needed, uint64_t budget,
                        const std::string& lower) {
  check_memory(what, needed, budget, "lower " + lower + " or raise --memory-budget");
}

}  // namespace dsp
