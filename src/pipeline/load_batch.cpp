#include "pipeline/load_batch.hpp"

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/error.hpp"
#include "core/half.hpp"

namespace dsp {
namespace {

// The distinct ids of `input` (ascending) and, per input position, its row among them; false (and
// nothing written) when the ids are distinct already. A temporal batch's input nodes are (id,
// time) pairs, so one id may appear at several times, and the feature store gathers distinct ids.
bool distinct_inputs(const std::vector<int64_t>& input, std::vector<int64_t>& ids,
                     std::vector<int64_t>& row) {
  ids = input;
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (ids.size() == input.size()) return false;
  row.resize(input.size());
  for (size_t i = 0; i < input.size(); ++i) {
    row[i] = std::lower_bound(ids.begin(), ids.end(), input[i]) - ids.begin();
  }
  return true;
}

// Rows of the distinct ids, expanded to the input positions: out row i = rows[row[i]].
void expand_rows(const unsigned char* rows, const std::vector<int64_t>& row, size_t row_bytes,
                 unsigned char* out) {
  for (size_t i = 0; i < row.size(); ++i) {
    std::memcpy(out + i * row_bytes, rows + row[i] * row_bytes, row_bytes);
  }
}

// Stored rows (n of store's out_row_bytes, host) as float32: bfloat16 and int8 come decoded by
// the gather, float16 is widened here.
void rows_to_float(const FeatureStore& store, const unsigned char* raw, int64_t n,
                   std::vector<float>& out) {
  out.resize(n * store.format().dim);
  if (store.format().out_dtype == DType::kFloat32) {
    std::memcpy(out.data(), raw, out.size() * sizeof(float));
  } else {
    const auto* h = reinterpret_cast<const uint16_t*>(raw);
    for (size_t i = 0; i < out.size(); ++i) out[i] = half_to_float(h[i]);
  }
}

// The input rows as float32 on the host. Ids that may repeat (`temporal`) are gathered once per
// distinct id and expanded; a device store's rows then come back through the host.
void host_features(FeatureStore& store, const std::vector<int64_t>& input, bool temporal,
                   std::vector<float>& out) {
  std::vector<int64_t> ids, row;
  const bool repeats = temporal && distinct_inputs(input, ids, row);
  const std::vector<int64_t>& want = repeats ? ids : input;
  std::vector<unsigned char> raw(want.size() * store.format().out_row_bytes);
  if (store.backend().device().is_cuda()) {
    raw = store.gather(want);
  } else {
    store.gather(want.data(), static_cast<int64_t>(want.size()), raw.data());
  }
  std::vector<unsigned char> expanded;
  if (repeats) {
    expanded.resize(input.size() * store.format().out_row_bytes);
    expand_rows(raw.data(), row, store.format().out_row_bytes, expanded.data());
    raw.swap(expanded);
  }
  rows_to_float(store, raw.data(), static_cast<int64_t>(input.size()), out);
}

// Every featured type's input rows in one gather round (gather_stores), as float32 on the host.
void typed_host_features(const std::vector<FeatureStore*>& stores,
                         const std::vector<std::vector<int64_t>>& ids,
                         std::vector<std::vector<float>*> out) {
  std::vector<std::shared_ptr<void>> rows(stores.size());
  std::vector<void*> outs(stores.size());
  for (size_t s = 0; s < stores.size(); ++s) {
    rows[s] = stores[s]->allocate_rows(static_cast<int64_t>(ids[s].size()));
    outs[s] = rows[s].get();
  }
  gather_stores(stores, ids, outs);
  std::vector<unsigned char> host;
  for (size_t s = 0; s < stores.size(); ++s) {
    const int64_t n = static_cast<int64_t>(ids[s].size());
    host.resize(std::max<size_t>(n * stores[s]->format().out_row_bytes, 1));
    stores[s]->backend().copy_to_host(outs[s], n * stores[s]->format().out_row_bytes, host.data());
    rows_to_float(*stores[s], host.data(), n, *out[s]);
  }
}

// The seeds' labels: int64 [N] into lb.labels, or the rows of multi-label int8 [N, L] into
// lb.label_matrix (lb.labels stays empty).
void load_labels(const SampledBatch& sb, const Array& labels, LoadedBatch& lb) {
  if (!labels.defined()) return;
  if (labels.dtype() == DType::kInt8 && labels.ndim() == 2) {
    const int64_t L = labels.dim(1);
    const int8_t* rows = labels.data<int8_t>();
    lb.label_columns = L;
    lb.label_matrix.resize(sb.seeds.size() * static_cast<size_t>(L));
    for (size_t i = 0; i < sb.seeds.size(); ++i) {
      std::memcpy(lb.label_matrix.data() + i * L, rows + sb.seeds[i] * L, static_cast<size_t>(L));
    }
    return;
  }
  lb.labels.resize(sb.seeds.size());
  const int64_t* lab = labels.data<int64_t>();
  for (size_t i = 0; i < sb.seeds.size(); ++i) lb.labels[i] = lab[sb.seeds[i]];
}

// The input ids a device sampler left in its memory (SamplerOptions::ids_on_device), where the
// store gathers them (the same device: FeatureStore::gather_resident), else null, the ids brought
// to the host first for a store elsewhere.
const int64_t* resident_input(Block& in, FeatureStore* store) {
  if (!in.ids_on_device()) return nullptr;
  if (store && store->backend().device() == in.on_device->device) return in.on_device->src_ids;
  in.ids_to_host();
  return nullptr;
}

}  // namespace

LoadedBatch load_batch(SampledBatch&& sb, FeatureStore* store, const Array& labels) {
  LoadedBatch lb;
  const int64_t F = store ? store->format().dim : 0;
  lb.feature_dim = F;
  // Temporal blocks' inputs may repeat an id (and are on the host); a plain batch's are distinct.
  const bool temporal = !sb.blocks.empty() && !sb.blocks.front().src_times.empty();
  const int64_t* resident = sb.blocks.empty() ? nullptr : resident_input(sb.blocks.front(), store);
  const int64_t n =
      resident ? sb.blocks.front().num_src : static_cast<int64_t>(sb.input_nodes().size());
  if (store && store->backend().device().is_cuda() && !temporal) {
    // Rows stay in device memory, in gather's output dtype (float32, or a float16 file's rows,
    // which the trainer widens there).
    lb.device = store->backend().device();
    lb.device_dtype = store->format().out_dtype;
    lb.device_features = store->allocate_rows(n, &lb.device_features_fence);
    if (resident) {
      store->gather_resident(resident, n, lb.device_features.get());
    } else {
      store->gather(sb.input_nodes().data(), n, lb.device_features.get());
    }
  } else if (store && resident) {  // a host-memory backend's (the emulated device path)
    std::vector<unsigned char> raw(std::max<size_t>(n * store->format().out_row_bytes, 1));
    store->gather_resident(resident, n, raw.data());
    rows_to_float(*store, raw.data(), n, lb.features);
  } else if (store) {
    host_features(*store, sb.input_nodes(), temporal, lb.features);
  }
  load_labels(sb, labels, lb);
  lb.sample = std::move(sb);
  return lb;
}

LoadedBatch load_hetero_batch(SampledBatch&& sb, const HeteroLayout& layout,
                              const std::vector<FeatureStore*>& stores, const Array& labels) {
  DSP_CHECK_ARG(!labels.defined() || labels.dtype() != DType::kInt8,
                "multi-label labels (int8 [N, {}]) are not supported for heterogeneous graphs: "
                "their target type has one class per node",
                labels.defined() && labels.ndim() == 2 ? labels.dim(1) : 0);
  const int T = layout.num_types();
  DSP_CHECK_ARG(static_cast<int>(stores.size()) == T, "{} feature stores for {} node types",
                stores.size(), T);
  LoadedBatch lb;
  lb.typed_rows.assign(T, {});
  lb.typed_features.assign(T, {});
  lb.typed_dims.assign(T, 0);
  if (!sb.blocks.empty()) {
    const Block& b = sb.blocks.front();
    DSP_CHECK_ARG(static_cast<int64_t>(b.src_types.size()) == b.num_src,
                  "a heterogeneous batch's input block has {} source types for {} sources",
                  b.src_types.size(), b.num_src);
    for (int64_t j = 0; j < b.num_src; ++j) {
      const int t = b.src_types[j];
      DSP_CHECK_ARG(t >= 0 && t < T, "input node {} has node type {} of {}", j, t, T);
      lb.typed_rows[t].push_back(j);
    }
  }
  // The featured types' rows in one gather round, stores in type order on every rank.
  std::vector<FeatureStore*> featured;
  std::vector<std::vector<int64_t>> ids;
  std::vector<std::vector<float>*> out;
  for (int t = 0; t < T; ++t) {
    if (!stores[t]) continue;
    featured.push_back(stores[t]);
    ids.emplace_back();
    ids.back().reserve(lb.typed_rows[t].size());
    for (const int64_t j : lb.typed_rows[t]) {
      ids.back().push_back(layout.type_index(sb.blocks.front().src_ids[j]));
    }
    out.push_back(&lb.typed_features[t]);
    lb.typed_dims[t] = stores[t]->format().dim;
  }
  if (!featured.empty()) typed_host_features(featured, ids, out);
  load_labels(sb, labels, lb);
  lb.sample = std::move(sb);
  return lb;
}

}  // namespace dsp
