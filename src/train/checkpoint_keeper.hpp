#pragma once
// A job's checkpoints (dsp train --checkpoint-dir, --keep-checkpoints, --resume [auto]): each
// epoch's checkpoint-<E>.pt (rank 0's file, each rank's embedding shard beside it), checkpoint.pt
// moved to the newest complete one and older ones pruned only then, best.pt, and the resume from
// checkpoint.pt or, with auto, from the newest checkpoint that verifies on every rank. The files'
// names and rotation are checkpoint_files.hpp's; this is who writes and reads them for a job.
// Torch-free.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "layout/store/embedding_table.hpp"
#include "pipeline/rank/runtime.hpp"
#include "train/job.hpp"
#include "train/trainer.hpp"

namespace dsp {

// What a checkpoint records of the run besides the model, the optimiser and the learning-rate
// schedule: the best validation so far (node classification: the resolved --metric; link
// prediction: Hits@K or MRR), the test value at that epoch, the epoch (-1: none yet) and
// --patience's count of evaluations since.
struct RunRecord {
  double best_val = -1, test_at_best = 0;
  int best_epoch = -1;
  int evals_since_best = 0;
};

class CheckpointKeeper {
 public:
  // The checkpoint of a resumed run: the epochs it completed, its record and its learning-rate
  // schedule's state (null when it has none).
  struct Resumed {
    int epochs = 0;
    RunRecord run;
    nlohmann::json lr_schedule;
  };
  // `recorded`: the job's options as the user gave them, kept in every checkpoint
  // (resume_config); `emb`: the learnable embeddings (null: none), saved and loaded beside.
  CheckpointKeeper(const JobConfig& cfg, nlohmann::json recorded, RankRuntime& rt, Trainer& trainer,
                   EmbeddingTable* emb);
  bool on() const { return !ckpt_.empty(); }  // --checkpoint-dir given
  // --resume: loads checkpoint.pt (auto: the newest checkpoint that verifies on every rank)
  // into the trainer and the embeddings. Nothing for --resume auto without a checkpoint (a new
  // run). FormatError when its dataset is another one. Collective.
  std::optional<Resumed> resume();
  bool resumed() const { return resumed_; }
  // checkpoint-<epoch + 1>.pt, then checkpoint.pt moved to it and the older ones pruned (a
  // barrier first when the ranks write embedding shards); or `path` (best.pt) alone. `metric`:
  // what `run` holds, `lr_schedule` its state.
  void write(int epoch, const RunRecord& run, const std::string& metric,
             const nlohmann::json& lr_schedule, const std::string& path = "");
  // What an interrupt says now (core/interrupt.hpp), `done` epochs in.
  void note_interrupt(int64_t done) const;
  // The main channel's step of the rotation's barrier: past every training batch and before
  // evaluation's ids (job.cpp's, from 2^40).
  static constexpr int64_t kBarrierStep = (int64_t{1} << 40) - 1;

 private:
  std::string choose();
  bool verifies(const std::string& file);
  void rotate(int64_t epochs);

  const JobConfig& cfg_;
  nlohmann::json recorded_;
  RankRuntime& rt_;
  Trainer& trainer_;
  EmbeddingTable* emb_;
  std::string ckpt_;          // checkpoint_dir/checkpoint.pt; empty: no checkpoints
  bool resumed_ = false;      // from a checkpoint (not a --resume auto that found none)
  int64_t saved_epochs_ = 0;  // of the newest checkpoint of this run (0: none)
};

}  // namespace dsp
