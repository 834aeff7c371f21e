// dsp partition --feature-dtype / --feature-scale: features.npy in another dtype than the
// dataset's (core/quant.hpp defines the encodings), its int8 scales, and the error it costs.
//
// Two passes over the source. The first, in the dataset's row order, refuses the first value
// (row-major) that is not finite or would not stay finite in the target dtype, and takes the
// per-column maxima that int8 column scales need. The second writes the rows in the partition's
// order a chunk at a time (never the whole converted copy in memory), decoding each converted
// row exactly as the gather does to measure the error; per-row sums are added in row order, so
// the figures do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "graph/npy.hpp"
#include "layout/partition/partition.hpp"

namespace dsp {
namespace {

constexpr int64_t kScanRows = 4096;  // rows per block of the first pass

// Row `v` of the source (float32 or float16) as float32 into `out`.
void source_row(const Array& x, int64_t v, float* out) {
  const int64_t f = x.dim(1);
  if (x.dtype() == DType::kFloat16) {
    const uint16_t* h = x.data<uint16_t>() + v * f;
    for (int64_t j = 0; j < f; ++j) out[j] = half_to_float(h[j]);
  } else {
    const float* r = x.data<float>() + v * f;
    std::copy(r, r + f, out);
  }
}

// Whether x, and x stored as `to`, are finite.
bool stays_finite(DType to, float x) {
  if (!std::isfinite(x)) return false;
  if (to == DType::kFloat16) return std::isfinite(half_to_float(float_to_half(x)));
  if (to == DType::kBFloat16) return std::isfinite(bf16_to_float(float_to_bf16(x)));
  return true;
}

struct Scan {
  int64_t bad = -1;           // first flat index (row-major, dataset order) refused, or -1
  std::vector<float> absmax;  // per column (column scales only)
};

Scan scan_source(const Array& x, DType to, bool column_absmax) {
  const int64_t n = x.dim(0), f = x.dim(1), blocks = (n + kScanRows - 1) / kScanRows;
  std::vector<Scan> part(blocks);
  parallel_for(0, blocks, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> row(f);
    for (int64_t b = lo; b < hi; ++b) {
      Scan& s = part[b];
      if (column_absmax) s.absmax.assign(f, 0.0f);
      for (int64_t v = b * kScanRows; v < std::min(n, (b + 1) * kScanRows) && s.bad < 0; ++v) {
        source_row(x, v, row.data());
        for (int64_t j = 0; j < f; ++j) {
          if (!stays_finite(to, row[j])) {
            s.bad = v * f + j;
            break;
          }
          if (column_absmax) s.absmax[j] = std::max(s.absmax[j], std::fabs(row[j]));
        }
      }
    }
  });
  Scan out;
  if (column_absmax) out.absmax.assign(f, 0.0f);
  for (const Scan& s : part) {
    if (s.bad >= 0) return {s.bad, {}};
    for (int64_t j = 0; column_absmax && j < f; ++j) {
      out.absmax[j] = std::max(out.absmax[j], s.absmax[j]);
    }
  }
  return out;
}

// Row `src` (float32) stored as c.dtype into `dst`.
void encode_row(const FeatureCodec& c, const float* src, float row_scale, void* dst) {
  const int64_t f = c.dim;
  if (c.dtype == DType::kInt8) {
    auto* q = static_cast<int8_t*>(dst);
    for (int64_t j = 0; j < f; ++j) {
      q[j] = quantize_int8(src[j], c.column_scale ? c.column_scale[j] : row_scale);
    }
  } else if (c.dtype == DType::kBFloat16 || c.dtype == DType::kFloat16) {
    auto* h = static_cast<uint16_t*>(dst);
    const bool bf = c.dtype == DType::kBFloat16;
    for (int64_t j = 0; j < f; ++j) h[j] = bf ? float_to_bf16(src[j]) : float_to_half(src[j]);
  } else {
    std::copy(src, src + f, static_cast<float*>(dst));
  }
}

struct RowError {
  double max_abs = 0, squared = 0, reference = 0;  // max |x' - x|, sum (x' - x)^2, sum x^2
};

// Rows [b, e) of the partition (source rows new2old[i]) encoded into buf (row i - b), their
// errors into err[i - b]; per-row int8 scales are chosen here, into scales[i].
void convert_rows(const Array& x, const std::vector<int64_t>& new2old, int64_t b, int64_t e,
                  const FeatureCodec& codec, bool per_row, std::vector<float>& scales,
                  unsigned char* buf, std::vector<RowError>& err) {
  const int64_t f = codec.dim;
  const size_t rb = static_cast<size_t>(f) * dtype_size(codec.dtype);
  parallel_for(b, e, 256, [&](int64_t lo, int64_t hi) {
    std::vector<float> src(f), back(f);
    for (int64_t i = lo; i < hi; ++i) {
      source_row(x, new2old[i], src.data());
      float s = 1.0f;
      if (per_row) {
        float m = 0.0f;
        for (float v : src) m = std::max(m, std::fabs(v));
        s = scales[i] = int8_scale(m);
      }
      unsigned char* dst = buf + (i - b) * rb;
      encode_row(codec, src.data(), s, dst);
      decode_row(codec, dst, s, back.data());
      RowError& r = err[i - b];
      r = {};
      for (int64_t j = 0; j < f; ++j) {
        const double d = static_cast<double>(back[j]) - static_cast<double>(src[j]);
        r.max_abs = std::max(r.max_abs, std::fabs(d));
        r.squared += d * d;
        r.reference += static_cast<double>(src[j]) * src[j];
      }
    }
  });
}

[[noreturn]] void refuse_value(const Array& x, int64_t flat, DType to, const std::string& what) {
  const int64_t f = x.dim(1), v = flat / f, j = flat % f;
  std::vector<float> row(f);
  source_row(x, v, row.data());
  if (!std::isfinite(row[j])) {
    DSP_THROW_T(InvalidArgument,
                "{}: feature {} of node {} is {}: --feature-dtype {} needs finite features", what,
                j, v, row[j], dtype_name(to));
  }
  DSP_THROW_T(InvalidArgument,
              "{}: feature {} of node {} is {}, beyond the range of {} (it would be stored as "
              "inf)",
              what, j, v, row[j], dtype_name(to));
}

}  // namespace

DType partition_feature_dtype(const PartitionOptions& o, DType source) {
  const FeatureDtype t = o.feature_dtype;
  DSP_CHECK_ARG(o.feature_scale == FeatureScale::kAuto || t == FeatureDtype::kInt8,
                "--feature-scale needs --feature-dtype int8 (got --feature-dtype {})", t);
  DSP_CHECK_ARG(t == FeatureDtype::kKeep || o.preaggregate.empty(),
                "--feature-dtype {} with --preaggregate: the pre-aggregated rows are stored in the "
                "dataset's dtype; partition with --feature-dtype keep to pre-aggregate",
                t);
  return t == FeatureDtype::kKeep ? source : parse_dtype(name_of(t));
}

FeatureConversion write_converted_features(const Array& x, const std::vector<int64_t>& new2old,
                                           const PartitionOptions& opts, const std::string& what,
                                           const std::string& features_path,
                                           const std::string& scale_path) {
  const DType to = partition_feature_dtype(opts, x.dtype());
  const int64_t n = x.dim(0), f = x.dim(1);
  const bool int8 = to == DType::kInt8;
  FeatureConversion conv;
  conv.converted = true;
  conv.source_dtype = x.dtype();
  if (int8) {
    conv.scale =
        opts.feature_scale == FeatureScale::kRow ? StoredScale::kRow : StoredScale::kColumn;
  }
  const bool per_row = conv.scale == StoredScale::kRow;

  const Scan scan = scan_source(x, to, int8 && !per_row);
  if (scan.bad >= 0) refuse_value(x, scan.bad, to, what);
  std::vector<float> scales(per_row ? n : int8 ? f : 0);
  for (int64_t j = 0; int8 && !per_row && j < f; ++j) scales[j] = int8_scale(scan.absmax[j]);
  const FeatureCodec codec{to, f, int8 && !per_row ? scales.data() : nullptr};

  const size_t rb = static_cast<size_t>(f) * dtype_size(to);
  NpyWriter w(features_path, to, {n, f});
  const int64_t chunk = std::max<int64_t>(1, (8 << 20) / std::max<int64_t>(f * 4, 1));
  std::vector<unsigned char> buf(static_cast<size_t>(std::min(chunk, n)) * rb);
  std::vector<RowError> err(static_cast<size_t>(std::min(chunk, n)));
  double squared = 0, reference = 0;
  for (int64_t b = 0; b < n; b += chunk) {
    const int64_t e = std::min(n, b + chunk);
    convert_rows(x, new2old, b, e, codec, per_row, scales, buf.data(), err);
    for (int64_t i = 0; i < e - b; ++i) {
      conv.max_abs_error = std::max(conv.max_abs_error, err[i].max_abs);
      squared += err[i].squared;
      reference += err[i].reference;
    }
    w.write(buf.data(), static_cast<size_t>(e - b) * rb);
  }
  w.close();
  x.release_pages();
  conv.rel_rms_error = reference > 0 ? std::sqrt(squared / reference) : 0.0;
  if (int8) {
    const std::vector<int64_t> shape =
        per_row ? std::vector<int64_t>{n, 1} : std::vector{int64_t{1}, f};
    save_npy(scale_path, Array::from_vector(std::move(scales), shape));
  }
  return conv;
}

FeatureCodec stored_feature_codec(const Array& features, const Array& scale,
                                  const float** row_scale) {
  FeatureCodec c{features.dtype(), features.dim(1), nullptr};
  *row_scale = nullptr;
  if (c.dtype != DType::kInt8) return c;
  DSP_CHECK_ARG(scale.defined() && scale.ndim() == 2,
                "int8 features need their scales (feature_scale.npy)");
  const bool column = scale.dim(0) == 1 && scale.dim(1) == c.dim;
  DSP_CHECK_ARG(column || (scale.dim(0) == features.dim(0) && scale.dim(1) == 1),
                "int8 features [{}, {}] with scales {}: expected [1, {}] or [{}, 1]",
                features.dim(0), c.dim, scale.describe(), c.dim, features.dim(0));
  (column ? c.column_scale : *row_scale) = scale.data<float>();
  return c;
}

float stored_feature(const Array& features, const Array& scale, int64_t i, int64_t j) {
  const float* row_scale = nullptr;
  const FeatureCodec c = stored_feature_codec(features, scale, &row_scale);
  const auto* row =
      static_cast<const unsigned char*>(features.raw()) + i * c.dim * dtype_size(c.dtype);
  return decode_feature(c, row, j, row_scale ? row_scale[i] : 1.0f);
}

std::string describe_feature_storage(const PartitionMeta& m) {
  const FeatureConversion& c = m.feature_conversion;
  if (!c.converted) return "";
  const std::string scales =
      c.scale == StoredScale::kNone ? ""
      : c.scale == StoredScale::kRow
          ? fmt::format(", a scale per node (feature_scale.npy [{}, 1])", m.num_nodes)
          : fmt::format(", a scale per column (feature_scale.npy [1, {}])", m.feature_dim);
  return fmt::format(
      "features: {}{} from {}: max abs error {:.6g}, relative RMS error {:.6g} (over {} x {} "
      "entries)",
      dtype_name(m.feature_dtype), scales, dtype_name(c.source_dtype), c.max_abs_error,
      c.rel_rms_error, m.num_nodes, m.feature_dim);
}

}  // namespace dsp
