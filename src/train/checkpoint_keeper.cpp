#include "train/checkpoint_keeper.hpp"

#include <fmt/format.h>

#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/interrupt.hpp"
#include "core/logging.hpp"
#include "train/checkpoint_files.hpp"

namespace dsp {

CheckpointKeeper::CheckpointKeeper(const JobConfig& cfg, nlohmann::json recorded, RankRuntime& rt,
                                   Trainer& trainer, EmbeddingTable* emb)
    : cfg_(cfg),
      recorded_(std::move(recorded)),
      rt_(rt),
      trainer_(trainer),
      emb_(emb),
      ckpt_(cfg.checkpoint_dir.empty() ? "" : cfg.checkpoint_dir + "/checkpoint.pt") {}

std::optional<CheckpointKeeper::Resumed> CheckpointKeeper::resume() {
  const std::string ckpt = cfg_.resume_auto ? choose() : ckpt_;
  if (ckpt.empty()) {
    if (rt_.leader()) {
      DSP_INFO("train", "--resume auto: no checkpoint in {}: a new run", cfg_.checkpoint_dir);
    }
    return std::nullopt;
  }
  DSP_CHECK_T(IoError, path_exists(ckpt), "{}: no checkpoint to resume from", ckpt);
  const CheckpointInfo info = trainer_.state().load_checkpoint(ckpt);
  if (emb_) emb_->load(embedding_shard(ckpt, rt_.rank(), rt_.size()));
  resumed_ = true;
  const std::string src = fmt::format("{:016x}", rt_.part().meta.source_checksum);
  const std::string ck_src = info.extra.value("source_checksum", std::string());
  DSP_CHECK_FORMAT(ck_src.empty() || ck_src == src,
                   "{}: the checkpoint was trained on another dataset (source checksum {}, this "
                   "partition's dataset has {})",
                   ckpt, ck_src, src);
  Resumed r;
  r.epochs = static_cast<int>(info.epoch);
  saved_epochs_ = info.epoch;
  r.run.best_val = info.extra.value("best_val_acc", -1.0);
  r.run.test_at_best = info.extra.value("test_acc_at_best", 0.0);
  r.run.best_epoch = info.extra.value("best_epoch", -1);
  r.run.evals_since_best = info.extra.value("evals_since_best", 0);
  if (info.extra.contains("lr_schedule")) r.lr_schedule = info.extra.at("lr_schedule");
  if (!rt_.leader()) return r;
  DSP_INFO("train", "resumed from {} after epoch {}", ckpt, r.epochs);
  if (r.epochs >= cfg_.epochs) {
    DSP_WARN("train",
             "nothing left to train: {} has completed {} epoch(s) and --epochs is {}; give "
             "--epochs above {} to train more",
             ckpt, r.epochs, cfg_.epochs, r.epochs);
  }
  return r;
}

// Rank 0 lists the candidates (checkpoint-<E>.pt newest first; a directory of an older build:
// checkpoint.pt) for every rank; each is tried on every rank in turn (rank 0 the file, each rank
// its embedding shard) until one verifies everywhere (a minimum over the ranks). A damaged one
// is skipped with a warning from the rank that found the damage.
std::string CheckpointKeeper::choose() {
  CoordinatedCommunicator& main_ch = rt_.channel(WorkerKind::kMain);
  main_ch.set_step(-1, 6);
  std::vector<int64_t> epochs;
  if (rt_.leader()) {
    epochs = rotated_epochs(cfg_.checkpoint_dir);
    if (epochs.empty() && path_exists(ckpt_)) epochs.push_back(-1);  // -1: checkpoint.pt
  }
  int64_t n = static_cast<int64_t>(epochs.size());
  main_ch.broadcast(&n, 1, DType::kInt64, 0);
  epochs.resize(n);
  if (n > 0) main_ch.broadcast(epochs.data(), n, DType::kInt64, 0);
  for (const int64_t e : epochs) {
    const std::string file = e < 0 ? ckpt_ : rotated_checkpoint(cfg_.checkpoint_dir, e);
    int64_t ok = verifies(file) ? 1 : 0;
    main_ch.all_reduce(&ok, 1, DType::kInt64, ReduceOp::kMin);
    if (ok) return file;
  }
  DSP_CHECK_FORMAT(n == 0,
                   "--resume auto: none of the {} checkpoint(s) in {} verifies (each named "
                   "above); remove them to start a new run there",
                   n, cfg_.checkpoint_dir);
  return "";
}

bool CheckpointKeeper::verifies(const std::string& file) {
  try {
    if (rt_.leader()) verify_checkpoint(file);
    if (emb_) emb_->load(embedding_shard(file, rt_.rank(), rt_.size()));
    return true;
  } catch (const Error& e) {  // damaged, or a shard a killed rank never wrote: an older one
    DSP_WARN("train", "--resume auto: skipping an incomplete or damaged checkpoint: {}", e.what());
    return false;
  }
}

void CheckpointKeeper::write(int epoch, const RunRecord& run, const std::string& metric,
                             const nlohmann::json& lr_schedule, const std::string& path) {
  const std::string file = path.empty() ? rotated_checkpoint(cfg_.checkpoint_dir, epoch + 1) : path;
  // Each rank's rows of the learnable embeddings beside the checkpoint.
  if (emb_) emb_->save(embedding_shard(file, rt_.rank(), rt_.size()));
  // Replicas are identical: rank 0 writes.
  if (rt_.leader()) {
    trainer_.state().save_checkpoint(
        file, epoch + 1,
        {{"source_checksum", fmt::format("{:016x}", rt_.part().meta.source_checksum)},
         {"dataset", rt_.part().meta.dataset_name},
         {"best_val_acc", run.best_val},
         {"test_acc_at_best", run.test_at_best},
         {"best_epoch", run.best_epoch},
         {"metric", metric},
         {"evals_since_best", run.evals_since_best},
         {"lr_schedule", lr_schedule},
         {"job", recorded_}});
  }
  if (path.empty()) rotate(epoch + 1);
}

// checkpoint-<epochs>.pt is written on every rank (a barrier when ranks wrote embedding shards):
// checkpoint.pt becomes it, and only now are older ones past --keep-checkpoints removed (each
// rank its own shards), so a kill at any moment leaves a complete checkpoint.
void CheckpointKeeper::rotate(int64_t epochs) {
  const std::string file = rotated_checkpoint(cfg_.checkpoint_dir, epochs);
  const std::string shard = emb_ ? embedding_shard("", rt_.rank(), rt_.size()) : "";
  if (emb_) {
    CoordinatedCommunicator& main_ch = rt_.channel(WorkerKind::kMain);
    main_ch.set_step(epochs - 1, kBarrierStep);
    main_ch.barrier();
  }
  if (rt_.leader()) link_file_atomic(file, ckpt_);
  if (emb_) link_file_atomic(file + shard, ckpt_ + shard);
  if (rt_.leader()) prune_checkpoints(cfg_.checkpoint_dir, "", epochs, cfg_.keep_checkpoints);
  if (emb_) prune_checkpoints(cfg_.checkpoint_dir, shard, epochs, cfg_.keep_checkpoints);
  saved_epochs_ = epochs;
}

void CheckpointKeeper::note_interrupt(int64_t done) const {
  set_interrupt_note(
      interrupt_note(done, cfg_.epochs, cfg_.checkpoint_dir, saved_epochs_, cfg_.overwrite));
}

}  // namespace dsp
