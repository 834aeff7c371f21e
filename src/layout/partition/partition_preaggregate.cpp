// PaGraph's first-layer pre-aggregation (PP, GNNSys'21 section 3.4): preaggregated_<kind>.npy of
// a partition directory (see partition.hpp for the two aggregations).
#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/half.hpp"
#include "core/parallel.hpp"
#include "graph/npy.hpp"
#include "graph/validate.hpp"
#include "layout/partition/partition.hpp"

namespace dsp {
namespace {

// Entries naming each node, over the whole graph (GCN's source degrees without the self loop).
template <class T>
std::vector<int64_t> out_degrees(const Csr& g) {
  std::vector<int64_t> d(g.num_nodes, 0);
  const T* idx = g.indices.data<T>();
  for (int64_t e = 0; e < g.num_edges(); ++e) ++d[idx[e]];
  return d;
}

float feature_at(const Array& x, int64_t row, int64_t j) {
  const int64_t f = x.dim(1);
  if (x.dtype() == DType::kFloat16) return half_to_float(x.data<uint16_t>()[row * f + j]);
  return x.data<float>()[row * f + j];
}

// Row `out` = [x_v | a_v] of node v (old id) in `dtype`; acc is F doubles of scratch.
template <class T>
void preaggregated_row(const Csr& g, const Array& x, const std::vector<int64_t>& out_deg, bool gcn,
                       int64_t v, double* acc, unsigned char* out) {
  const int64_t f = x.dim(1);
  const int64_t* p = g.rowptr();
  const T* idx = g.indices.data<T>();
  const int64_t deg = p[v + 1] - p[v];
  std::fill(acc, acc + f, 0.0);
  const float* x32 = x.dtype() == DType::kFloat32 ? x.data<float>() : nullptr;
  auto add = [&](int64_t u, double w) {
    if (x32) {
      for (int64_t j = 0; j < f; ++j) acc[j] += w * x32[u * f + j];
    } else {
      for (int64_t j = 0; j < f; ++j) acc[j] += w * feature_at(x, u, j);
    }
  };
  if (gcn) {
    const double dst = static_cast<double>(deg + 1);
    for (int64_t e = p[v]; e < p[v + 1]; ++e) {
      add(idx[e], 1.0 / std::sqrt(static_cast<double>(out_deg[idx[e]] + 1) * dst));
    }
    add(v, 1.0 / std::sqrt(static_cast<double>(out_deg[v] + 1) * dst));
  } else {
    for (int64_t e = p[v]; e < p[v + 1]; ++e) add(idx[e], 1.0);
    if (deg > 0) {
      for (int64_t j = 0; j < f; ++j) acc[j] /= static_cast<double>(deg);
    }
  }
  const bool half = x.dtype() == DType::kFloat16;
  const size_t row_bytes = static_cast<size_t>(f) * dtype_size(x.dtype());
  std::memcpy(out, static_cast<const unsigned char*>(x.raw()) + v * row_bytes, row_bytes);
  for (int64_t j = 0; j < f; ++j) {
    const float a = static_cast<float>(acc[j]);
    if (half) {
      const uint16_t h = float_to_half(a);
      std::memcpy(out + row_bytes + j * sizeof(uint16_t), &h, sizeof(h));
    } else {
      std::memcpy(out + row_bytes + j * sizeof(float), &a, sizeof(a));
    }
  }
}

}  // namespace

const Names<Preaggregation>& names_of(Preaggregation) {
  using P = Preaggregation;
  static const Names<P> n("pre-aggregation kind", {{P::kMean, "mean"}, {P::kGcn, "gcn"}});
  return n;
}

void write_preaggregated(const Csr& g, const Array& features, const std::vector<int64_t>& new2old,
                         Preaggregation kind, const std::string& path) {
  DSP_CHECK_ARG(features.defined() && features.ndim() == 2,
                "--preaggregate needs node features, and the dataset has none");
  DSP_CHECK_ARG(features.dtype() == DType::kFloat32 || features.dtype() == DType::kFloat16,
                "--preaggregate: features of dtype {} are not supported (float32, float16)",
                dtype_name(features.dtype()));
  const bool gcn = kind == Preaggregation::kGcn;
  const int64_t n = static_cast<int64_t>(new2old.size()), f = features.dim(1);
  std::vector<int64_t> out_deg;
  if (gcn) {
    out_deg =
        dispatch_index(g.index_dtype(), [&](auto tag) { return out_degrees<decltype(tag)>(g); });
  }
  const size_t row_bytes = 2 * static_cast<size_t>(f) * dtype_size(features.dtype());
  NpyWriter w(path, features.dtype(), {n, 2 * f});
  const int64_t chunk = std::max<int64_t>(1, (8 << 20) / static_cast<int64_t>(row_bytes));
  std::vector<unsigned char> buf(static_cast<size_t>(std::min(chunk, n)) * row_bytes);
  for (int64_t b = 0; b < n; b += chunk) {
    const int64_t e = std::min(n, b + chunk);
    parallel_for(b, e, 256, [&](int64_t lo, int64_t hi) {
      std::vector<double> acc(f);
      dispatch_index(g.index_dtype(), [&](auto tag) {
        for (int64_t i = lo; i < hi; ++i) {
          preaggregated_row<decltype(tag)>(g, features, out_deg, gcn, new2old[i], acc.data(),
                                           buf.data() + (i - b) * row_bytes);
        }
      });
    });
    w.write(buf.data(), static_cast<size_t>(e - b) * row_bytes);
  }
  w.close();
}

Array load_preaggregated(const PartitionData& part, Preaggregation kind) {
  const PartitionMeta& m = part.meta;
  const auto& have = m.preaggregated;
  DSP_CHECK_ARG(std::find(have.begin(), have.end(), kind) != have.end(),
                "{}: the partition has no pre-aggregated '{}' rows (it has: {}); write them with "
                "dsp partition --preaggregate",
                part.dir, kind, have.empty() ? "none" : fmt::format("{}", fmt::join(have, ", ")));
  const std::string path = fmt::format("{}/preaggregated_{}.npy", part.dir, kind);
  check_file_readable(path);
  Array a = load_npy(path, m.feature_dtype, 2);
  DSP_CHECK_FORMAT(a.dim(0) == m.num_nodes && a.dim(1) == 2 * m.feature_dim,
                   "{}: shape {} does not match {} nodes x 2 * {} features", path, a.describe(),
                   m.num_nodes, m.feature_dim);
  check_finite_features(a, m.offsets[part.part], m.offsets[part.part + 1], path);
  return a;
}

}  // namespace dsp
