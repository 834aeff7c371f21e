#include "pipeline/load_batch.hpp"

#include "core/half.hpp"

namespace dsp {

LoadedBatch load_batch(SampledBatch&& sb, FeatureStore* store, const Array& labels) {
  LoadedBatch lb;
  const std::vector<int64_t>& input = sb.input_nodes();
  const int64_t F = store ? store->dim() : 0;
  lb.feature_dim = F;
  if (store && store->device().is_cuda()) {
    // Rows stay in device memory, in gather's output dtype (float32, or a float16 file's rows,
    // which the trainer widens there).
    const int64_t n = static_cast<int64_t>(input.size());
    lb.device = store->device();
    lb.device_dtype = store->out_dtype();
    lb.device_features = store->allocate_rows(n);
    store->gather(input.data(), n, lb.device_features.get());
  } else if (store && store->out_dtype() == DType::kFloat32) {  // bfloat16, int8: decoded by gather
    lb.features.resize(input.size() * F);
    store->gather(input.data(), static_cast<int64_t>(input.size()), lb.features.data());
  } else if (store) {
    lb.features.resize(input.size() * F);
    std::vector<uint16_t> raw(input.size() * F);
    store->gather(input.data(), static_cast<int64_t>(input.size()), raw.data());
    for (size_t i = 0; i < raw.size(); ++i) lb.features[i] = half_to_float(raw[i]);
  }
  if (labels.defined()) {
    lb.labels.resize(sb.seeds.size());
    const int64_t* lab = labels.data<int64_t>();
    for (size_t i = 0; i < sb.seeds.size(); ++i) lb.labels[i] = lab[sb.seeds[i]];
  }
  lb.sample = std::move(sb);
  return lb;
}

}  // namespace dsp
