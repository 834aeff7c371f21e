#pragma once
// Memory planning for `dsp bench gather|sample|pipeline`: what a rank allocates beyond the
// partition's file mappings, estimated from the loaded partition before the feature store, the
// sampler or the batches allocate, so a bench that cannot fit is refused with one line naming
// --memory-budget (core/memory.hpp's check_memory) instead of being killed. Each figure is an upper
// bound: a bench that would fit is refused only when a bound exceeds the budget.
#include <cstdint>
#include <string>
#include <vector>

#include "layout/partition/partition.hpp"

namespace dsp {

// The feature store's own arrays on this rank: the position list (4 B per node), the cached and
// seen bits, this part's cached rows, and the huge-page copies (core/huge_pages.hpp: at most a
// quarter of the memory available, shared by the node's `node_ranks` ranks) of the feature rows
// and, with `sampler`, of the sampler's neighbour array.
uint64_t bench_store_bytes(const PartitionData& part, bool features, bool sampler, int node_ranks);

// Input nodes of one batch of `seeds` seeds sampled with `fanouts` (from the seeds out), at most:
// every layer's frontier grows by (1 + fanout) times (layer_wise: by the fanout, the layer's
// draws; -1, all neighbours: to the whole graph), never past the graph's `num_nodes`.
int64_t batch_nodes_bound(int64_t seeds, const std::vector<int>& fanouts, int64_t num_nodes,
                          bool layer_wise);

// One sampled batch's buffers (ids, blocks, the shuffles' send and receive buffers, the relabel
// maps) for `seeds` seeds and `fanouts` (layer_wise: each the layer's draws in all), at most. A
// fanout of -1 takes whole rows of distinct nodes: at most the graph's `num_edges` picks a layer.
uint64_t sampled_batch_bytes(int64_t seeds, const std::vector<int>& fanouts, int64_t num_nodes,
                             int64_t num_edges, bool layer_wise);

// Refuses (check_memory) with "<what> needs about X of memory but the budget is Y (Z available):
// lower <lower> or raise --memory-budget" when `needed` and the process's resident memory exceed
// `budget`.
void check_bench_memory(const std::string& what, uint64_t needed, uint64_t budget,
                        const std::string& lower);

}  // namespace dsp
