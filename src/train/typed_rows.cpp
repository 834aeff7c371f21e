#include "train/typed_rows.hpp"

#include "csp/sampler.hpp"
#include "graph/npy.hpp"
#include "layout/partition/partition_dir.hpp"
#include "pipeline/rank/runtime.hpp"
#include "train/step_embedding.hpp"
#include "train/trainer.hpp"

namespace dsp {

FeaturelessRows::FeaturelessRows(const HeteroLayout& h, const std::vector<int64_t>& type_dims) {
  const int T = h.num_types();
  offsets.assign(h.parts + 1, 0);
  slot_row.assign(static_cast<size_t>(h.parts) * T, -1);
  int64_t row = 0;
  for (int p = 0; p < h.parts; ++p) {
    for (int t = 0; t < T; ++t) {
      const size_t s = static_cast<size_t>(p) * T + t;
      if (type_dims[t] > 0) continue;
      slot_row[s] = row;
      row += h.bounds[s + 1] - h.bounds[s];
    }
    offsets[p + 1] = row;
  }
}

std::unique_ptr<EmbeddingTable> attach_typed_rows(RankRuntime& rt, Trainer& trainer,
                                                  const std::vector<int64_t>& type_dims,
                                                  const EmbeddingOptions& eo) {
  const HeteroLayout& h = *rt.part().meta.hetero;
  auto rows = std::make_shared<const FeaturelessRows>(h, type_dims);
  const Array new2old = load_new2old(rt.partition_dir(), rt.part().meta.num_nodes);
  std::vector<int64_t> ids;  // dataset ids of this rank's rows, in row order
  const int T = h.num_types(), p = rt.rank();
  for (int t = 0; t < T; ++t) {
    const size_t s = static_cast<size_t>(p) * T + t;
    if (rows->slot_row[s] < 0) continue;
    for (int64_t v = h.bounds[s]; v < h.bounds[s + 1]; ++v) {
      ids.push_back(new2old.data<int64_t>()[v]);
    }
  }
  auto table = std::make_unique<EmbeddingTable>(rt.channel(WorkerKind::kTrainer), rows->offsets,
                                                ids.data(), eo, rt.embedding_storage());
  trainer.embedding().attach(table.get(), [rows, &h](int64_t v) { return rows->row(h, v); });
  return table;
}

std::vector<float> typed_outputs_of(RankRuntime& rt, Trainer& trainer, CollectiveSampler& sampler,
                                    const std::vector<int64_t>& seeds, int layers,
                                    int64_t batch_size, int64_t epoch, int64_t first_step,
                                    const std::function<void(int64_t, int64_t)>& progress) {
  const int64_t bs = batch_size, width = trainer.eval().layer_width(layers - 1);
  int64_t steps = (static_cast<int64_t>(seeds.size()) + bs - 1) / bs;
  rt.channel(WorkerKind::kMain).all_reduce(&steps, 1, DType::kInt64, ReduceOp::kMax);
  std::vector<float> mine;
  mine.reserve(seeds.size() * static_cast<size_t>(width));
  for (int64_t s = 0; s < steps; ++s) {
    const size_t lo = std::min(seeds.size(), static_cast<size_t>(s * bs));
    const std::vector<int64_t> batch(seeds.begin() + lo,
                                     seeds.begin() + std::min(seeds.size(), lo + bs));
    rt.channel(WorkerKind::kSampler).set_step(epoch, first_step + s);
    SampledBatch sb = sampler.sample(batch, epoch, first_step + s);
    rt.channel(WorkerKind::kLoader).set_step(epoch, first_step + s);
    LoadedBatch lb = rt.features().load(std::move(sb));
    rt.channel(WorkerKind::kTrainer).set_step(epoch, first_step + s);
    trainer.embedding().gather(lb);  // collective
    if (progress) progress(s + 1, steps);
    if (batch.empty()) continue;
    const std::vector<float> out = trainer.eval().typed_outputs(lb, layers);
    mine.insert(mine.end(), out.begin(), out.end());
  }
  return mine;
}

}  // namespace dsp
