#pragma once
// What the sampler produces and the loader and trainer consume.
//
// Conventions (documented in README):
//  * fanouts are given from the seeds out: fanouts[0] is the number of neighbours sampled for each
//    seed, fanouts[1] for each node reached in the first hop, and so on ("15,10,5").
//  * blocks are ordered like DGL's: blocks[0] is the input layer (its sources are all the nodes
//    whose features are loaded), blocks.back() ends at the seeds. So blocks[L-1] was sampled
//    with fanouts[0].
//  * in every block the destination nodes are a prefix of the source nodes: src_ids[0, num_dst)
//    == the destination nodes, in order, so a GNN layer can read h_dst = h_src[:num_dst].
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "core/dtype.hpp"

namespace dsp {

// One layer's message-flow graph: edges from source nodes to destination nodes, in local ids.
struct Block {
  int64_t num_dst = 0;
  int64_t num_src = 0;
  std::vector<int64_t> indptr;   // [num_dst + 1]: CSR over destination nodes
  std::vector<int64_t> indices;  // [num_edges]: local source ids in [0, num_src)
  std::vector<float> weights;    // [num_edges] edge weights, or empty (unweighted sampling)
  std::vector<int64_t> src_ids;  // [num_src]: global id of every source node (prefix: dst nodes)

  int64_t num_edges() const { return static_cast<int64_t>(indices.size()); }
  const int64_t* dst_ids() const { return src_ids.data(); }
};

// One mini-batch of one rank after sampling.
struct SampledBatch {
  int64_t epoch = 0;
  int64_t batch = 0;           // index of the batch within the epoch (same on every rank)
  std::vector<int64_t> seeds;  // global ids (== blocks.back() destination nodes)
  std::vector<Block> blocks;   // blocks[0] = input layer ... blocks.back() = output layer
  const std::vector<int64_t>& input_nodes() const { return blocks.front().src_ids; }
};

// After loading: the features of every input node (row i = blocks[0].src_ids[i]) and the labels
// of the seeds. Features live where the feature store gathered them (`device`): in host memory
// in `features` (float32, float16 files widened), or, from a device feature store, in device
// memory in `device_features` ([num_input x feature_dim] of `device_dtype`; `features` empty).
// Blocks and labels are host memory; the trainer moves them to its model's device.
struct LoadedBatch {
  SampledBatch sample;
  std::vector<float> features;  // host: [num_input x feature_dim], float32
  int64_t feature_dim = 0;
  std::vector<int64_t> labels;  // [num_seeds]
  Device device;                // where the features are
  std::shared_ptr<void> device_features;
  DType device_dtype = DType::kFloat32;
  bool features_on_device() const { return device.is_cuda(); }
};

}  // namespace dsp
