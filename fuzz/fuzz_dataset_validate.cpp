// The dataset validator (validate_dataset: graph/dataset.cpp, graph/validate.cpp) over the arrays
// of a small valid dataset, edited by the input. Whatever the edits, it either accepts the
// dataset, and then a slow, obviously correct reference agrees that every invariant of the format
// holds, or it throws FormatError, and then the reference finds a fault too. It never crashes,
// reads out of bounds or throws anything else.
//
// Input: byte 0 picks a shape fault (low 2 bits: 1 drops the last entry of indices.npy, 2 of
// edge_weight.npy); then 4-byte edits [array, offset low, offset high, value] overwrite one byte
// of indptr, indices, edge weights, features, labels or a split.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "graph/dataset.hpp"

namespace {

using dsp::Array;
using dsp::Dataset;

Dataset base_dataset() {
  const int64_t n = 24;
  std::vector<int64_t> src, dst;
  std::vector<float> w;
  for (int64_t i = 0; i < 90; ++i) {
    src.push_back((i * 7 + 3) % n);
    dst.push_back((i * 5 + i / 7) % n);
    w.push_back(0.25f * static_cast<float>(i % 9));
  }
  Dataset ds;
  ds.graph = dsp::build_in_csr<int64_t>(n, src.data(), dst.data(), 90, w.data());
  std::vector<float> feat(static_cast<size_t>(n) * 3);
  for (size_t i = 0; i < feat.size(); ++i) feat[i] = 0.5f * static_cast<float>(i) - 7.0f;
  ds.features = Array::from_vector(std::move(feat), {n, 3});
  std::vector<int64_t> labels(n);
  for (int64_t i = 0; i < n; ++i) labels[i] = i % 5 == 4 ? -1 : i % 4;
  ds.labels = Array::from_vector(std::move(labels));
  ds.train_idx = Array::from_vector(std::vector<int64_t>{0, 3, 6, 9, 12, 15});
  ds.valid_idx = Array::from_vector(std::vector<int64_t>{1, 4, 7});
  ds.test_idx = Array::from_vector(std::vector<int64_t>{2, 5, 8, 23});
  ds.meta.name = "fuzz";
  ds.sync_meta();
  return ds;
}

// The format's invariants, checked the slow way.
bool reference_valid(const Dataset& ds) {
  const int64_t n = ds.meta.num_nodes;
  const int64_t* p = ds.graph.indptr.data<int64_t>();
  const int64_t e = ds.graph.indices.numel();
  if (p[0] != 0 || p[n] != e || e != ds.meta.num_edges) return false;
  for (int64_t v = 0; v < n; ++v) {
    if (p[v + 1] < p[v]) return false;
  }
  const int32_t* idx = ds.graph.indices.data<int32_t>();
  for (int64_t v = 0; v < n; ++v) {
    for (int64_t j = p[v]; j < p[v + 1]; ++j) {
      if (idx[j] < 0 || idx[j] >= n) return false;
      if (j > p[v] && idx[j] <= idx[j - 1]) return false;
    }
  }
  if (ds.graph.weights.numel() != e) return false;
  const float* w = ds.graph.weights.data<float>();
  for (int64_t j = 0; j < e; ++j) {
    if (std::isnan(w[j]) || std::isinf(w[j]) || w[j] < 0) return false;
  }
  const float* f = ds.features.data<float>();
  for (int64_t i = 0; i < ds.features.numel(); ++i) {
    if (!std::isfinite(f[i])) return false;
  }
  const int64_t* l = ds.labels.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (l[i] < -1 || l[i] >= ds.meta.num_classes) return false;
  }
  for (const Array* s : {&ds.train_idx, &ds.valid_idx, &ds.test_idx}) {
    std::vector<bool> seen(static_cast<size_t>(n), false);
    for (int64_t i = 0; i < s->numel(); ++i) {
      const int64_t v = s->data<int64_t>()[i];
      if (v < 0 || v >= n || seen[v]) return false;
      seen[v] = true;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Dataset kBase = base_dataset();
  Dataset ds = kBase;
  // Deep copies: the edits must not leak into the next input.
  Array* arrays[] = {&ds.graph.indptr, &ds.graph.indices, &ds.graph.weights, &ds.features,
                     &ds.labels,       &ds.train_idx,     &ds.valid_idx,     &ds.test_idx};
  for (Array* a : arrays) {
    Array copy(a->dtype(), a->shape());
    std::memcpy(copy.raw_mutable(), a->raw(), a->nbytes());
    *a = copy;
  }
  if (size > 0) {
    if (data[0] & 1) ds.graph.indices.shrink_first_dim(ds.graph.indices.dim(0) - 1);
    if (data[0] & 2) ds.graph.weights.shrink_first_dim(ds.graph.weights.dim(0) - 1);
  }
  for (size_t k = 1; k + 4 <= size; k += 4) {
    Array& a = *arrays[data[k] % 8];
    const size_t off =
        (static_cast<size_t>(data[k + 1]) | static_cast<size_t>(data[k + 2]) << 8) % a.nbytes();
    static_cast<uint8_t*>(a.raw_mutable())[off] = data[k + 3];
  }
  const bool shape_fault = size > 0 && (data[0] & 3) != 0;
  bool accepted = true;
  try {
    dsp::validate_dataset(ds, "fuzz");
  } catch (const dsp::FormatError&) {
    accepted = false;
  }
  // Only evaluate the reference on arrays of the right shapes (it indexes by them).
  const bool valid = !shape_fault && reference_valid(ds);
  if (accepted != valid) __builtin_trap();
  return 0;
}
