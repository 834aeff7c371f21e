#pragma once
// How a node-classification job evaluates (dsp train --eval auto|full|sampled): full-neighbour
// layer-wise inference (train/inference.hpp) where asked, or, with auto, where its memory
// estimate fits half of the memory available to each rank of the node on every rank and it reads
// no more neighbour rows than sampling would (or few anyway); sampled otherwise; and whether a
// sampled job tests its best model once in full at the end. A heterogeneous graph and --temporal
// evaluate by sampling (--eval full on a typed graph: every neighbour sampled). The same choice
// on every rank; rank 0 logs it with both estimates. Torch-free.
#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/rank/runtime.hpp"
#include "train/config.hpp"
#include "train/job.hpp"

namespace dsp {

struct EvalChoice {
  EvalMode mode = EvalMode::kSampled;  // as the job reports it (JobResult::eval)
  bool full = false;                   // layer-wise full-neighbour inference every evaluation
  bool fits = false;                   // its memory estimate fits
  bool final_full = false;  // a sampled job tests its best model in full (it fits, costs little)
};

// `widths`: the model's layer widths; `eval_nodes`: this rank's validation and test nodes;
// `on_device`: the trainer runs on the rank's device, where layer-wise inference keeps its tables
// (their estimate is then held against the device's free memory, the rest against the host's).
// Collective: the main channel's steps (-1, 3) and (-1, 5).
EvalChoice choose_eval(const JobConfig& cfg, RankRuntime& rt, const ModelConfig& model,
                       const std::vector<int64_t>& widths, int64_t eval_nodes, bool on_device);

// The evaluation's fanouts as given: --eval-fanouts, else the per-relation --fanouts' text.
std::string eval_fanouts_text(const JobConfig& cfg);

}  // namespace dsp
