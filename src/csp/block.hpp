#pragma once
// What the sampler produces and the loader and trainer consume.
//
// Conventions (documented in docs/cli.md, "Conventions"):
//  * fanouts are given from the seeds out: fanouts[0] is the number of neighbours sampled for each
//    seed, fanouts[1] for each node reached in the first hop, and so on ("15,10,5").
//  * blocks are ordered like DGL's: blocks[0] is the input layer (its sources are all the nodes
//    whose features are loaded), blocks.back() ends at the seeds. So blocks[L-1] was sampled
//    with fanouts[0].
//  * in every block the destination nodes are a prefix of the source nodes: src_ids[0, num_dst)
//    == the destination nodes, in order, so a GNN layer can read h_dst = h_src[:num_dst].
//  * temporal sampling (TemporalSampling): a block's nodes are distinct (id, time) pairs,
//    src_times[i] the time of source i: the destinations first (in order), then the new pairs in
//    first-seen order over the picks (destination by destination, each one's picks by row
//    position). A pick inherits its destination's time, so one id may appear at several times.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/release_fence.hpp"

namespace dsp {

// A block's edge arrays left where a device sampler backend built them
// (SamplerOptions::blocks_on_device), so a trainer on that device reads them without a round trip
// through the host. `keep` owns the memory (shared with whatever wraps the arrays); copy(host, src,
// bytes) brings a range to the host.
// With SamplerOptions::ids_on_device the block's source ids stay there too (src_ids, the host
// vector empty) for a consumer on that device (the feature store's gather_resident).
struct BlockEdges {
  Device device;
  const int64_t* indptr = nullptr;   // [num_dst + 1]
  const int64_t* indices = nullptr;  // [num_edges]
  const float* weights = nullptr;    // [num_edges], or null
  const int64_t* src_ids = nullptr;  // [num_src], or null: Block::src_ids holds them
  int64_t num_edges = 0;
  std::shared_ptr<void> keep;
  // Recorded by the consumer on the stream its work on the arrays went to, when it lets go
  // (core/release_fence.hpp): the sampler reuses them after that point without a host wait. Null
  // where no fence is kept.
  std::shared_ptr<ReleaseFence> fence;
  std::function<void(void* host, const void* src, size_t bytes)> copy;
};

// One layer's message-flow graph: edges from source nodes to destination nodes, in local ids.
// The edge arrays are host vectors, or, with `on_device` set, only there (the vectors empty):
// edges_to_host() brings them back for a consumer that reads them on the host.
struct Block {
  int64_t num_dst = 0;
  int64_t num_src = 0;
  std::vector<int64_t> indptr;     // [num_dst + 1]: CSR over destination nodes
  std::vector<int64_t> indices;    // [num_edges]: local source ids in [0, num_src)
  std::vector<float> weights;      // [num_edges] edge weights, or empty (unweighted sampling)
  std::vector<int64_t> src_ids;    // [num_src]: global id of every source node (prefix: dst nodes)
  std::vector<int64_t> src_times;  // [num_src]: time of every source node; empty unless temporal
  // Heterogeneous graphs (graph/hetero.hpp; empty otherwise): the relation of every edge and the
  // node type of every source (indices into the partition's schema). A destination's edges come
  // relation by relation in relation order, each relation's picks ascending by id; with
  // `edge_types` this is the layout of DGL's RelGraphConv (etypes) and PyG's RGCNConv (edge_type).
  std::vector<int32_t> edge_types;  // [num_edges]
  std::vector<int32_t> src_types;   // [num_src]
  std::shared_ptr<const BlockEdges> on_device;

  int64_t num_edges() const {
    return on_device ? on_device->num_edges : static_cast<int64_t>(indices.size());
  }
  const int64_t* dst_ids() const { return src_ids.data(); }
  // The source ids in device memory (on_device->src_ids; src_ids empty until ids_to_host).
  bool ids_on_device() const { return on_device && on_device->src_ids; }
  // Copies device-resident source ids into src_ids (no-op otherwise); the edges stay where they
  // are.
  void ids_to_host() {
    if (!ids_on_device()) return;
    src_ids.resize(num_src);
    if (num_src) on_device->copy(src_ids.data(), on_device->src_ids, num_src * sizeof(int64_t));
    auto e = std::make_shared<BlockEdges>(*on_device);
    e->src_ids = nullptr;
    on_device = std::move(e);
  }
  // Copies device-resident edge arrays (and source ids) into the vectors and drops `on_device`
  // (no-op otherwise).
  void edges_to_host() {
    ids_to_host();
    if (!on_device) return;
    const BlockEdges& e = *on_device;
    indptr.resize(num_dst + 1);
    indices.resize(e.num_edges);
    weights.resize(e.weights ? e.num_edges : 0);
    e.copy(indptr.data(), e.indptr, indptr.size() * sizeof(int64_t));
    if (e.num_edges) e.copy(indices.data(), e.indices, indices.size() * sizeof(int64_t));
    if (e.weights && e.num_edges) e.copy(weights.data(), e.weights, weights.size() * sizeof(float));
    on_device.reset();
  }
};

// The node pairs a link-prediction batch scores (train/link.hpp): pair i joins seeds src[i] and
// dst[i] (indices into SampledBatch::seeds, so rows of the model's output) with label[i], 1 for
// a positive edge, 0 for a negative. Empty for node tasks.
struct LinkPairs {
  std::vector<int64_t> src, dst;
  std::vector<float> label;
  int64_t size() const { return static_cast<int64_t>(src.size()); }
};

// One mini-batch of one rank after sampling.
struct SampledBatch {
  int64_t epoch = 0;
  int64_t batch = 0;                // index of the batch within the epoch (same on every rank)
  std::vector<int64_t> seeds;       // global ids (== blocks.back() destination nodes)
  std::vector<int64_t> seed_times;  // temporal sampling: seeds[i]'s time; empty otherwise
  std::vector<Block> blocks;        // blocks[0] = input layer ... blocks.back() = output layer
  LinkPairs pairs;                  // link prediction: what the batch scores (empty otherwise)
  // The input block's source ids on the host (blocks[0].ids_to_host() first where they were left
  // on the device: an error otherwise, rather than an empty list).
  const std::vector<int64_t>& input_nodes() const {
    DSP_CHECK(!blocks.front().ids_on_device(),
              "the batch's input ids are in device memory: bring them to the host first");
    return blocks.front().src_ids;
  }
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
  std::vector<int64_t> labels;  // [num_seeds]; empty for a multi-label dataset
  // Multi-label datasets (int8 [N, L] labels.npy, dataset.json "multilabel": true): the seeds'
  // label rows, [num_seeds x label_columns] of 0/1 (row i: seed i); `labels` stays empty.
  std::vector<int8_t> label_matrix;
  int64_t label_columns = 0;
  bool multilabel() const { return label_columns > 0; }
  // Learnable node embeddings of the input nodes (host float32 [num_input x embedding_dim]),
  // gathered by the trainer right before its step (Trainer::embedding().gather); the model reads
  // [features | embedding].
  std::vector<float> embedding;
  int64_t embedding_dim = 0;
  // Or, from a table in device memory on a GPU trainer, the rows there (the trainer's tensor;
  // `embedding` empty).
  std::shared_ptr<void> device_embedding;
  // A heterogeneous model's: the table rows gathered (the featureless types' input nodes, type by
  // type), kept for the step's sparse update.
  std::vector<int64_t> embedding_ids;
  Device device;  // where the features are
  std::shared_ptr<void> device_features;
  // Recorded where the consumer's work on device_features went when it lets go (the feature
  // store's next gather into that memory waits for it on the device), or null.
  std::shared_ptr<ReleaseFence> device_features_fence;
  DType device_dtype = DType::kFloat32;
  // Heterogeneous graphs (the sample's blocks carry src_types): the input nodes' features per
  // node type t, typed_features[t] = float32 [typed_rows[t].size() x typed_dims[t]] (row j: input
  // node typed_rows[t][j], an index into blocks[0].src_ids; ascending), empty for a type without
  // features (typed_dims[t] == 0; the trainer gives those nodes learnable embeddings). `features`
  // stays empty.
  std::vector<std::vector<int64_t>> typed_rows;
  std::vector<std::vector<float>> typed_features;
  std::vector<int64_t> typed_dims;
  bool features_on_device() const { return device.is_cuda(); }
};

}  // namespace dsp
