#pragma once
// Full-neighbour layer-wise inference (DGL's `model.inference`, PyG's layer-wise inference).
//
// Layer 0 of the model is computed for every node of the graph from its whole in-neighbourhood,
// then layer 1 from those rows, and so on: no sampling, so the result is the model's output on the
// whole graph (for GCN with the whole graph's degrees: Kipf & Welling's normalisation), whatever
// the rank count. Each rank computes its own part's nodes in batches of `batch_size` destinations;
// a batch's block holds their complete rows (edge weights ignored, as the models ignore them).
// Layer 0's input rows come through the feature store (RankRuntime::load), later layers' from the
// previous layer's rows, other ranks' nodes fetched from their owners (one all_to_all_v of ids and
// one of rows per batch, trainer channel). Collective: every rank calls it at the same point; the
// batch count is agreed (the largest part's) and ranks with fewer batches join with empty ones.
//
// Memory (this rank): two layers' rows of the part (input and output of a layer, float32) and one
// batch's rows, where the trainer runs (its device: the tables never cross to the host but for
// the rows other ranks ask for and the last layer's); on the host, 8 bytes per graph node (the
// batch's source positions; GCN's out-degrees) and one batch's block: layerwise_inference_bytes.
#include <cstdint>
#include <functional>
#include <vector>

#include "pipeline/rank/runtime.hpp"
#include "train/trainer.hpp"

namespace dsp {

struct InferenceOptions {
  int64_t batch_size = 4096;  // destination nodes per batch
  // The channels' steps (CoordinatedCommunicator::set_step): (epoch, first_step + k), k counting
  // the run's collectives; the caller keeps them apart from every other step of the job.
  int64_t epoch = 0;
  int64_t first_step = 0;
  int layers = 0;  // run layers 0..layers-1 (embeddings); 0: every layer of the model
  // Called after each batch with (batches done, batches in all, over every layer); may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

// This rank's rows of the last layer run (the model's: logits): [part rows x layer_width(that
// layer)], row i for the node offsets[rank] + i. Collective.
std::vector<float> layerwise_inference(RankRuntime& rt, Trainer& trainer,
                                       const InferenceOptions& o);

// Rows of `table` (this rank's part rows, `width` floats each) for the global `ids`: this
// rank's own rows copied, the others' requested from their owners (one all_to_all_v of ids and
// one of rows). Collective.
std::vector<float> fetch_rows(Communicator& comm, const PartitionMeta& meta,
                              const std::vector<float>& table, int64_t width,
                              const std::vector<int64_t>& ids);

// Estimated bytes layerwise_inference needs on `rank` for a model of output widths `widths` (one
// per layer) over this partition: `on_device` (a trainer on a device) puts the layers' tables, a
// batch's rows and its uploaded edges in device memory; otherwise all of it is host memory.
struct InferenceBytes {
  int64_t host = 0, device = 0;
};
InferenceBytes layerwise_inference_bytes(const PartitionMeta& meta, int rank,
                                         const std::vector<int64_t>& widths, int64_t batch_size,
                                         bool on_device);

// The rows of `logits` for the owned global `ids` into `tally`, against `labels` (node-indexed:
// int64 [N] class ids, or int8 [N, L] 0/1 rows of a multi-label dataset, L = width).
void tally_rows(const std::vector<float>& logits, int64_t width, int64_t first_row,
                const std::vector<int64_t>& ids, const Array& labels, EvalTally* tally);

}  // namespace dsp
