#pragma once
// A block as tensors, and the aggregations of the models over it as fused autograd ops.
//
// Each op runs per destination row (forward) or per source row of the block's transposed pattern
// (backward), through the per-row functions of aggregate_kernels.hpp: on the CPU in parallel over
// rows (at::parallel_for), on a CUDA device with one warp per row (cuda/aggregate_kernels.cu; the
// trainer links those against a CUDA LibTorch). Nothing per edge is materialised except GAT's
// attention, which the model drops out between the two GAT ops. Float32 only.
//
// The transposed pattern (per source node: the edges leaving it) and the degree scales are built
// on first use and cached in the BlockTensors, so they are built once per block, not per op.
#include <torch/torch.h>

#include <memory>
#include <vector>

#include "csp/block.hpp"

namespace dsp {

// What the ops derive from a block, built on first use and kept with the block's tensors.
struct BlockCache {
  torch::Tensor edge_dst;    // int64 [E]: destination of every edge (device transposes only)
  torch::Tensor t_indptr;    // int64 [num_src + 1]: the transposed pattern, rows = source nodes,
  torch::Tensor t_dst;       //   int64 [E] destinations, ascending within a row,
  torch::Tensor t_eids;      //   int64 [E] and the edge id of each entry
  torch::Tensor mean_scale;  // float [num_dst]: 1 / max(in-degree, 1)
  torch::Tensor gcn_dst_scale, gcn_src_scale;  // float: deg^-1/2, self loops counted
};

// A block as tensors. On CPU indptr/indices view the Block's vectors without copying, so the Block
// must outlive this (and must not be modified while it lives).
struct BlockTensors {
  int64_t num_dst = 0;
  int64_t num_src = 0;
  torch::Tensor indptr;   // int64 [num_dst + 1]
  torch::Tensor indices;  // int64 [E], local source ids
  // float [E]: the block's edge weights (Block::weights, e.g. LABOR's importance weights), or
  // undefined. Sum, mean and GCN weight each edge's message by it; GAT refuses them.
  torch::Tensor weights;
  std::shared_ptr<BlockCache> cache;
  int64_t num_edges() const { return indices.size(0); }
};

BlockTensors block_to_tensors(const Block& b, const torch::Device& device = torch::kCPU);
// Records `fence` (when set) after the work issued so far to LibTorch's current stream of `d`
// (a CPU device: the host emulation's point, nothing to order): where a consumer of arrays lent by
// a device backend (Block::on_device, LoadedBatch::device_features) lets go of them.
void record_release(const std::shared_ptr<ReleaseFence>& fence, const Device& d);
std::vector<BlockTensors> blocks_to_tensors(const std::vector<Block>& blocks,
                                            const torch::Device& device = torch::kCPU);
// The transposed pattern (edge_dst, t_indptr, t_dst, t_eids of `c`) with tensor ops, as a device
// block builds it: no output size depends on the data, so nothing waits for the device. (Host
// blocks use a counting sort; tests run this one on host tensors against it.)
void transpose_on_device(const BlockTensors& b, BlockCache& c);

// With edge weights w (BlockTensors::weights) every message h_u becomes w_e h_u (the self loops
// of GCN keep weight 1): DGL's SAGEConv(edge_weight=...) and GraphConv(edge_weight=...), as its
// LABOR example aggregates.
enum class Aggregation {
  kSum,   // h_v' = sum_{u -> v} h_u
  kMean,  // h_v' = mean_{u -> v} h_u (0 for a destination without in-edges)
  kGcn,   // h_v' = sum_{u in N(v) + v} h_u / sqrt(deg_out(u) deg_in(v)), with one self loop per
          // destination and both degrees counted inside the block, self loop included (DGL
          // GraphConv norm='both' on a block with self loops)
};

// x [num_src, D] -> [num_dst, D]; differentiable in x.
torch::Tensor aggregate(const BlockTensors& b, const torch::Tensor& x, Aggregation kind);
// [x[:num_dst] | aggregate(b, x, kind)]: [num_dst, 2 D], the input of GraphSAGE's one matmul
// with [W_self | W_neigh] (no slice of x and no sum of two products, forward or backward).
torch::Tensor aggregate_concat_self(const BlockTensors& b, const torch::Tensor& x,
                                    Aggregation kind);

// GAT attention over every destination's in-edges plus its self loop, softmax per (dst, head):
//   att[e, h] = softmax_{e in row v}(LeakyReLU_slope(el[u_e, h] + er[v, h]))
// el [num_src, H], er [num_dst, H] -> att [E + num_dst, H]: the E block edges in CSR order, then
// the self loop of every destination. Differentiable in el and er.
torch::Tensor edge_softmax(const BlockTensors& b, const torch::Tensor& el, const torch::Tensor& er,
                           double slope);

// out[v, h, :] = sum over the same edges of att[e, h] * z[u_e, h, :];
// z [num_src, H, D], att [E + num_dst, H] -> [num_dst, H, D]. Differentiable in z and att.
torch::Tensor aggregate_edges(const BlockTensors& b, const torch::Tensor& z,
                              const torch::Tensor& att);

// The formulation the fused ops replace: per-edge tensors from index_select, summed with
// index_add_ (a serial scatter on the CPU), differentiated by autograd. Same signatures and
// semantics; the tests compare the fused ops and the models against it.
namespace reference {
torch::Tensor aggregate(const BlockTensors& b, const torch::Tensor& x, Aggregation kind);
torch::Tensor edge_softmax(const BlockTensors& b, const torch::Tensor& el, const torch::Tensor& er,
                           double slope);
torch::Tensor aggregate_edges(const BlockTensors& b, const torch::Tensor& z,
                              const torch::Tensor& att);
}  // namespace reference

// While one lives, the ops above (and so the models) run the reference formulation on this
// thread: the tests compare whole models both ways, and a benchmark can time both in one run.
class ScopedReferenceAggregation {
 public:
  ScopedReferenceAggregation();
  ~ScopedReferenceAggregation();
  ScopedReferenceAggregation(const ScopedReferenceAggregation&) = delete;
  ScopedReferenceAggregation& operator=(const ScopedReferenceAggregation&) = delete;

 private:
  bool previous_;
};

// Time spent inside the aggregation ops of this thread, forward and backward, since the last
// reset (the train step's breakdown; the ops run on the trainer's thread).
struct AggregationTimes {
  double forward_s = 0, backward_s = 0;
};
AggregationTimes& aggregation_times();

}  // namespace dsp
