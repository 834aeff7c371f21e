#include "train/step_embedding.hpp"

#include "core/error.hpp"

namespace dsp {

namespace {

// The embedding table's rows a heterogeneous batch needs: its input nodes of the types without
// features, type by type in typed_rows' order (each id through `rows` when given).
std::vector<int64_t> hetero_embedding_ids(const LoadedBatch& b, const ModelConfig& cfg,
                                          const Trainer::EmbeddingRowMap& rows) {
  std::vector<int64_t> ids;
  if (b.sample.blocks.empty()) return ids;
  const std::vector<int64_t>& src = b.sample.blocks.front().src_ids;
  for (int t = 0; t < cfg.num_types() && t < static_cast<int>(b.typed_rows.size()); ++t) {
    if (cfg.type_dims[t] > 0) continue;
    for (const int64_t j : b.typed_rows[t]) ids.push_back(rows ? rows(src[j]) : src[j]);
  }
  return ids;
}

}  // namespace

void StepEmbedding::attach(EmbeddingTable* table, Trainer::EmbeddingRowMap rows) {
  DSP_CHECK_ARG(table == nullptr || table->options().dim == model_.embedding_dim,
                "the embedding table has {} columns but the model expects {}",
                table ? table->options().dim : 0, model_.embedding_dim);
  table_ = table;
  rows_ = std::move(rows);
}

bool StepEmbedding::on_trainer_device() const {
  return table_ && table_->storage().memory() == MemorySpace::kDevice && device_.is_cuda();
}

void StepEmbedding::gather(LoadedBatch& batch) {
  if (!table_) return;
  const bool empty = batch.sample.blocks.empty();
  if (!empty) batch.sample.blocks.front().ids_to_host();  // the table looks ids up on the host
  const std::vector<int64_t> none;
  if (model_.hetero()) batch.embedding_ids = hetero_embedding_ids(batch, model_, rows_);
  const std::vector<int64_t>& ids = model_.hetero() ? batch.embedding_ids
                                    : empty         ? none
                                                    : batch.sample.input_nodes();
  const int64_t n = static_cast<int64_t>(ids.size());
  batch.embedding_dim = table_->options().dim;
  if (on_trainer_device()) {  // a device table fills a tensor on the trainer's device
    auto rows = std::make_shared<torch::Tensor>(torch::empty(
        {n, table_->options().dim}, torch::TensorOptions().dtype(torch::kFloat32).device(device_)));
    table_->gather(ids.data(), n, rows->data_ptr<float>());
    batch.device_embedding = rows;
    return;
  }
  batch.embedding.resize(static_cast<size_t>(n * table_->options().dim));
  table_->gather(ids.data(), n, batch.embedding.data());
}

void StepEmbedding::clear() {
  ids_.clear();
  grad_ = torch::Tensor();
}

void StepEmbedding::keep_gradient(const LoadedBatch& batch, const torch::Tensor& leaf) {
  if (!leaf.defined() || !leaf.grad().defined()) return;
  if (model_.hetero()) {
    ids_ = batch.embedding_ids;  // as gather took them
  } else {
    const auto& ids = batch.sample.input_nodes();  // on the host since gather
    ids_.assign(ids.begin(), ids.end());
  }
  grad_ = on_trainer_device() ? leaf.grad().contiguous() : io_.read(leaf.grad());
}

void StepEmbedding::apply(float global_count) {
  // The table reads the gradient rows on its own copies: LibTorch's writes must be done.
  if (grad_.defined() && on_trainer_device()) io_.wait();
  table_->apply_gradients(ids_.data(), static_cast<int64_t>(ids_.size()),
                          grad_.defined() ? grad_.data_ptr<float>() : nullptr,
                          global_count > 0 ? 1.0f / global_count : 0.0f);
}

}  // namespace dsp
