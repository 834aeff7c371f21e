#pragma once
// `dsp predict` and `dsp embed` as library calls: a trained model's outputs for every node of a
// dataset (or the nodes a file names) by full-neighbour layer-wise inference (train/inference.hpp),
// each rank computing its own part's nodes, written by rank 0 as .npy files in the dataset's
// original node ids. Torch-free header. Collective over the ranks of the job.
//
// Outputs (in `out`, each written to a temporary name and renamed, so none is left half written):
//  predict: predictions.npy int64 [n] (the argmax class), plus probabilities.npy (softmax) or
//           logits.npy, float32 [n, classes], with `output` probs or logits. A --loss bce model:
//           predictions 1 where the logit is > 0 (binary: int64 [n]; multi-label: int8 [n, L])
//           and probabilities the logits' sigmoids (binary: [n, 1]; multi-label: [n, L]);
//  embed:   embeddings.npy float32 [n, width]: the output of layer `layer` (after its activation).
// Row i is node i of the dataset (original ids), or the i-th id of `nodes`; for a typed model
// node i of the target type (embed: of `node_type`), by the type's own ids.
#include <cstdint>
#include <string>
#include <vector>

#include "core/options.hpp"
#include "pipeline/rank/options.hpp"

namespace dsp {

enum class PredictOutput { kClass, kProbs, kLogits, kEmbedding };
const Names<PredictOutput>& names_of(PredictOutput);  // class, probs, logits, embedding

struct PredictConfig {
  RankOptions rank;              // path: dataset or partition directory; backend, device, threads
  std::string checkpoint;        // checkpoint.pt or best.pt written by dsp train
  std::string out;               // output directory (created)
  std::string nodes;             // .npy of original node ids (int32/int64); empty: every node
  PredictOutput output = PredictOutput::kClass;  // predict: class, probs, logits; embed: embedding
  int layer = -1;                // embed: the layer whose output is exported; -1: the last hidden
                                 // one (a link-prediction model's: its output layer)
  std::string node_type;         // embed of a typed model: the type whose nodes are exported
                                 // (by their ids in the type); empty: the target type
  int64_t batch_size = 4096;     // destination nodes per inference batch
  bool overwrite = false;        // replace existing output files (else refused before any work)

  bool embed() const { return output == PredictOutput::kEmbedding; }
  // The files this config writes (names only).
  std::vector<std::string> files() const;
  void validate() const;  // InvalidArgument naming the flag
};

struct PredictResult {
  int64_t rows = 0;                // rows written per file
  int64_t width = 0;               // columns of the float output (classes or embedding width)
  std::vector<std::string> files;  // paths written (rank 0)
};

// The options of `dsp predict` (`embed`: true for `dsp embed`, whose --layer replaces --output),
// --threads, and the rank room's --device (pipeline/rank/options.hpp).
OptionTable<PredictConfig> predict_options_table(bool embed);

PredictResult run_predict(const PredictConfig& c);

}  // namespace dsp
