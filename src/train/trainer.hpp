#pragma once
// Data-parallel training of one model replica per rank (torch-free header; see trainer.cpp).
//
// Every rank calls train_step for the same (epoch, batch) with its share of the batch's seeds (a
// share may be empty). The step computes the summed loss of the local seeds, packs all gradients
// plus (loss sum, seed count) into one float32 bucket, all-reduces it (sum) through the
// communicator, divides by the global seed count and steps the optimizer. So the gradient is the
// mean over the whole global batch, exactly as with one rank (with equal shares this is the usual
// average of the per-rank mean gradients), and every rank applies the same update to the same
// parameters: the replicas stay bit-identical.
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ccc/communicator.hpp"
#include "core/host_traffic.hpp"
#include "csp/block.hpp"
#include "train/config.hpp"
#include "train/metrics.hpp"

namespace dsp {

class GnnModel;
class EmbeddingTable;
class DeviceIo;
class StepEmbedding;
}  // namespace dsp
namespace at {
class Generator;
class Tensor;
}  // namespace at
namespace dsp {

struct EvalCounts {
  int64_t correct = 0;
  int64_t total = 0;
  double accuracy() const { return total > 0 ? static_cast<double>(correct) / total : 0.0; }
  EvalCounts& operator+=(const EvalCounts& o) {
    correct += o.correct;
    total += o.total;
    return *this;
  }
};

// Where the train steps' time went, summed over steps since the last reset (this rank).
// forward/backward include the aggregation ops (aggregation_forward_s/backward_s, the fused CSR
// kernels); dense = forward - aggregation_forward (projections, activations, dropout, loss).
struct StepTimes {
  int64_t steps = 0;
  double forward_s = 0, backward_s = 0, all_reduce_s = 0, optimizer_s = 0;
  double aggregation_forward_s = 0, aggregation_backward_s = 0;
  // CPU time of the calling thread over whole steps: with one LibTorch thread, the step's cost
  // without the time spent waiting for a core (robust on a shared machine).
  double thread_cpu_s = 0;
  double total_s() const { return forward_s + backward_s + all_reduce_s + optimizer_s; }
  nlohmann::json to_json() const;
};

struct CheckpointInfo {
  int64_t epoch = 0;  // completed epochs: training resumes with this epoch index
  int64_t step = 0;   // optimizer steps taken
  nlohmann::json extra = nlohmann::json::object();
};

// The training configuration a checkpoint was written with (model, optimizer, rates, seed,
// feature normalisation; the feature statistics are the data's and not stored). FormatError
// naming the file when it is not a dsp checkpoint; IoError when it cannot be read.
TrainConfig checkpoint_config(const std::string& path);
// The whole header of a checkpoint (format, config, epoch, step, world_size, params, extra).
nlohmann::json checkpoint_header(const std::string& path);
// Reads the whole checkpoint and checks it against its checksums (the header's and every
// tensor's: parameters, feature statistics, optimizer state; a version 1 file has none, so only
// that every tensor reads): FormatError naming the file and what the damage hit, IoError when it
// cannot be read. No model needed (--resume auto picks the newest checkpoint that verifies).
void verify_checkpoint(const std::string& path);

class ModelEval;
class TrainerState;

class Trainer {
 public:
  // Builds the model (parameters initialised from config.seed, then rank 0's broadcast once so
  // every replica starts identical) and the optimizer. InvalidArgument on a bad config.
  Trainer(const TrainConfig& config, Communicator& comm);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // One synchronous step (collective: every rank must call it). Dropout masks are drawn from a
  // generator seeded by (seed, batch.sample.epoch, batch.sample.batch, rank). Returns the mean loss
  // over the seeds of all ranks. InvalidArgument if the batch does not fit the model (block count
  // != layers, feature width, labels out of range).
  // With `correct`, also adds the local seeds' predictions of this step's (training-mode) forward
  // against their labels: the epoch's train accuracy without a second forward pass (--loss bce:
  // label entries, each thresholded at logit 0). --loss bce's loss is the mean over label
  // entries (a multi-label seed counts once per column), as torch's BCEWithLogitsLoss.
  float train_step(const LoadedBatch& batch, EvalCounts* correct = nullptr);
  // One synchronous step over `slots` batch slots, of which this rank trains `batches` (any
  // number, each slot at most once; collective: every rank calls it with the same `slots`). The
  // batch of slot v draws its dropout from the stream of rank v; each slot's gradient fills its
  // own row of a slots-row buffer, the rows are all-reduced (one rank fills each, so the others
  // add exact zeros) and summed in slot order. The update is therefore a function of the slots'
  // batches only, the same whichever rank trains which slot; with one batch per rank and slot =
  // rank it is the symmetric step, reduced in rank order (bit-identical to train_step for up to 2
  // ranks). Costs a slots-times larger all-reduce. Returns the mean loss.
  struct SlotBatch {
    int slot = 0;
    const LoadedBatch* batch = nullptr;
  };
  float train_slots(const std::vector<SlotBatch>& batches, int slots,
                    EvalCounts* correct = nullptr);
  // The same steps without reading anything back from the device (train_step and train_slots
  // each read their loss: one blocking read a step on a GPU). The step's mean loss and, with
  // `tally_correct`, its train predictions that hit are added to the trainer's tally on the
  // device; take_tally reads them. In steady state such a step reads nothing and waits only for
  // the gradient all-reduce (at 2+ ranks) and a device embedding table (traffic()); a step in
  // which this rank has no seed reads the global count (one read), and so does every step with
  // an embedding table (its sparse update scales by it on the host).
  void step(const LoadedBatch& batch, bool tally_correct = false);
  void step_slots(const std::vector<SlotBatch>& batches, int slots, bool tally_correct = false);
  struct Tally {
    double loss_sum = 0;  // the steps' mean losses, summed in step order
    int64_t steps = 0;
    EvalCounts correct;  // the train predictions of the steps that tallied them (this rank)
  };
  // The tally since the last take (one read), then reset.
  Tally take_tally();
  // The tally's mean loss so far, not reset (one read; 0 before a step): a progress line.
  double running_loss();
  // Learnable node embeddings (ModelConfig::embedding_dim > 0; train/step_embedding.hpp): the
  // table (owned by the caller, alive as long as the trainer) attached with embedding().attach,
  // whose rows embedding().gather adds to a batch (collective on the trainer's communicator:
  // every rank, every step, an empty batch too; no-op without a table) and whose rows the steps
  // update (sparse: only the batch's input rows) after the dense step. Heterogeneous models: only
  // the input nodes of the types without features have rows, and an EmbeddingRowMap gives the
  // table's row of such a node's (union) id (empty: the id itself).
  using EmbeddingRowMap = std::function<int64_t(int64_t)>;
  StepEmbedding& embedding();
  // Seconds of a train step's forward and backward pass over `batch` (its dropout stream as this
  // rank's), without the all-reduce and the update: the model, optimizer and step times are left
  // as they were. 0 for an empty batch. Local (no communication): a profile for `--roles auto`.
  double time_backward(const LoadedBatch& batch);
  // LibTorch's intra-op threads for the steps that follow on the calling thread (and process-wide
  // default for threads that start later).
  void set_threads(int threads);
  // The optimiser's learning rate for the steps that follow (train/lr_schedule.hpp's per epoch).
  void set_lr(double lr);
  // The trainer's one counted place for device traffic (train/device_io.hpp): every read and
  // wait goes through it, on the CPU as on a GPU; traffic() is what it read and waited for since
  // the trainer was built.
  DeviceIo& device_io();
  // The model in eval mode (evaluation, inference, prediction) and the parameters and optimizer
  // state in and out (checkpoints): views of this trainer, valid while it lives.
  ModelEval eval();
  TrainerState state();
  int64_t steps() const { return step_; }
  StepTimes& step_times() { return times_; }  // since built or last reset (= {})
  const TrainConfig& config() const { return cfg_; }
  Communicator& comm() { return comm_; }
  GnnModel& model();

 private:
  friend class ModelEval;
  friend class TrainerState;
  struct Impl;
  TrainConfig cfg_;
  Communicator& comm_;
  std::unique_ptr<Impl> impl_;
  int64_t step_ = 0;
  StepTimes times_;
};

// The trained model in eval mode, local to this rank (no communication): what evaluation,
// layer-wise inference and prediction ask of a trainer. A view (Trainer::eval()).
class ModelEval {
 public:
  explicit ModelEval(Trainer& t) : t_(t) {}
  // Local, no communication: predictions of the seeds against their labels (eval mode, no dropout).
  // --loss bce: each label entry's thresholded logit (logit > 0) against its 0/1 label.
  EvalCounts eval_batch(const LoadedBatch& batch);
  // Local: the seeds' outputs into `tally` (train/metrics.hpp), which new_tally() makes for this
  // model's loss and width; EvalTally::combine then makes its metrics global.
  void eval_batch(const LoadedBatch& batch, EvalTally* tally);
  EvalTally new_tally() const;
  // Full-neighbour layer-wise inference (train/inference.hpp), local: layer `layer` of the model
  // in eval mode over the batch's one block (batch.sample.blocks[0]), on the trainer's device.
  // Its input rows are the batch's loaded features for layer 0 (normalised as training normalises
  // them), else `hidden` (float32 [num_src x layer_width(layer - 1)] on the trainer's device). For
  // gcn, `gcn_src_scale` (float32 [num_src] on the device, or undefined) holds each source's
  // (out-degree + 1)^-1/2 in the whole graph, so that the block computes what the whole-graph
  // block computes (ignored by the other models). Returns the destination rows, float32
  // [num_dst x layer_width(layer)] on the device. (LibTorch callers only: train/.)
  at::Tensor infer_layer(int layer, const LoadedBatch& batch, const at::Tensor& hidden,
                         const at::Tensor& gcn_src_scale);
  // A typed model's outputs for the batch's seeds, local, eval mode: the first `layers` layers
  // (its blocks: as many), the last one's output after its activation; float32 [seeds x
  // layer_width(layers - 1)] on the host, row-major.
  std::vector<float> typed_outputs(const LoadedBatch& batch, int layers);
  // Link prediction, local: the predictor's logit of each pair of output rows hs[i], hd[i] (host
  // float32 [n x out_dim] each), eval mode. InvalidArgument for a node classifier.
  std::vector<float> score(const float* hs, const float* hd, int64_t n);
  int64_t layer_width(int layer) const;

 private:
  Trainer& t_;
};

// Sums counts over all ranks (collective).
EvalCounts all_reduce(Communicator& comm, const EvalCounts& local);

// The trainer's parameters and optimizer state in and out: checkpoints, a model's parameters
// for inference or `--init-from`, flat vectors for tests and checksums. A view
// (Trainer::state()).
class TrainerState {
 public:
  explicit TrainerState(Trainer& t) : t_(t) {}
  // Writes model parameters, optimizer state, config, epoch and step to `path` atomically
  // (temporary file + rename). `epoch` = epochs completed. No communication: replicas are
  // identical, so one rank (rank 0) writes it.
  void save_checkpoint(const std::string& path, int64_t epoch,
                       const nlohmann::json& extra = nlohmann::json::object()) const;
  // Restores what save_checkpoint wrote. Every rank loads the same file. FormatError naming the
  // parameter and both shapes when the checkpoint holds a different model, or a different
  // optimizer; IoError if it cannot be read.
  CheckpointInfo load_checkpoint(const std::string& path);

  // The model's parameters only, from a checkpoint of the same model written with any optimizer
  // (inference: no optimizer state, any rank count). FormatError as load_checkpoint.
  void load_parameters(const std::string& path);
  // load_parameters, or the parameters of a directory dsp.export_model wrote (state_dict.pt,
  // parameters by name): a new run starts from them (dsp train --init-from). Every rank reads the
  // same file. FormatError naming the file and the first parameter that is missing or shaped
  // differently; IoError if it cannot be read.
  void init_parameters(const std::string& path);

  // All parameters flattened in registration order (tests, checksums).
  std::vector<float> flat_parameters() const;
  // Overwrites the parameters from what flat_parameters returned (same model); the optimizer's
  // state is left as it is. InvalidArgument on a size mismatch.
  void set_flat_parameters(const std::vector<float>& flat);
  int64_t num_parameters() const;

 private:
  Trainer& t_;
};

}  // namespace dsp
