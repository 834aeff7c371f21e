// Low-precision feature storage (dsp partition --feature-dtype, core/quant.hpp): the encoders
// against independent references (tests/layout/quant_reference.hpp), the partition's stored
// values, scales and printed error against a recomputation, the refusals (non-finite values, bad
// options, bad metadata) with their exact messages, and the gather decoding them identically on
// every backend (tests/backends.hpp). Multi-rank gathers of quantized rows are in
// mpi/test_layout_mpi.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numeric>

#include "backends.hpp"
#include "ccc/communicator.hpp"
#include "core/fs.hpp"
#include "core/quant.hpp"
#include "core/rng.hpp"
#include "error_of.hpp"
#include "graph/generate.hpp"
#include "graph/npy.hpp"
#include "layout/layout_fixtures.hpp"
#include "layout/partition/partition.hpp"
#include "layout/partition/partition_command.hpp"
#include "layout/quant_reference.hpp"
#include "layout/store/feature_store.hpp"

namespace dsp {
namespace {

using test::error_of;
using testing::QuantReference;
namespace fs = std::filesystem;

float bits_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint32_t float_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

TEST(QuantScalar, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(bits_float(0x3f808000u)), 0x3f80);            // tie, even below
  EXPECT_EQ(float_to_bf16(bits_float(0x3f818000u)), 0x3f82);            // tie, even above
  EXPECT_EQ(float_to_bf16(bits_float(0x3f808001u)), 0x3f81);            // above the tie
  EXPECT_EQ(float_to_bf16(bits_float(0xbf807fffu)), 0xbf80);            // negative, below the tie
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
  EXPECT_EQ(bf16_to_float(0xc040), -3.0f);
  RngStream s(rng_key(5), 0);
  for (int i = 0; i < 200000; ++i) {
    const float f = bits_float(s.next_u32());
    if (!std::isfinite(f)) continue;
    ASSERT_EQ(float_bits(bf16_to_float(float_to_bf16(f))), float_bits(testing::ref_bf16(f))) << f;
  }
}

TEST(QuantScalar, Float16MatchesTheCompilersConversion) {
  RngStream s(rng_key(6), 0);
  for (int i = 0; i < 200000; ++i) {
    const float f = (static_cast<float>(s.next_u32()) / 4294967296.0f - 0.5f) *
                    std::ldexp(1.0f, static_cast<int>(s.uniform_int(40)) - 24);
    ASSERT_EQ(float_bits(half_to_float(float_to_half(f))), float_bits(testing::ref_f16(f))) << f;
  }
}

TEST(QuantScalar, Int8RoundsTiesToEvenAndClampsSymmetrically) {
  EXPECT_EQ(quantize_int8(2.5f, 1.0f), 2);
  EXPECT_EQ(quantize_int8(3.5f, 1.0f), 4);
  EXPECT_EQ(quantize_int8(-2.5f, 1.0f), -2);
  EXPECT_EQ(quantize_int8(-3.5f, 1.0f), -4);
  EXPECT_EQ(quantize_int8(2.4999f, 1.0f), 2);
  EXPECT_EQ(quantize_int8(126.5f, 1.0f), 126);
  EXPECT_EQ(quantize_int8(127.6f, 1.0f), 127);
  EXPECT_EQ(quantize_int8(1e9f, 1.0f), 127);
  EXPECT_EQ(quantize_int8(-1e9f, 1.0f), -127);  // never -128
  EXPECT_EQ(quantize_int8(5.0f, 0.0f), 0);      // an all-zero column's scale
  EXPECT_EQ(int8_scale(254.0f), 2.0f);
  EXPECT_EQ(int8_scale(0.0f), 0.0f);
  EXPECT_EQ(dequantize_int8(-127, 0.5f), -63.5f);
  RngStream s(rng_key(7), 0);
  for (int i = 0; i < 100000; ++i) {
    const float x = static_cast<float>(s.next_u32()) / 4294967296.0f * 8.0f - 4.0f;
    const float sc = int8_scale(4.0f);
    ASSERT_EQ(quantize_int8(x, sc), testing::ref_int8(x, sc)) << x;
  }
}

// A small community graph whose features hold negatives, an all-zero column (0) and an all-zero
// row (node 3).
Dataset small_dataset(int64_t n = 300, int64_t f = 12) {
  CommunityOptions co;
  co.num_nodes = n;
  co.num_edges = 6 * n;
  co.num_communities = 4;
  co.feature_dim = f;
  co.seed = 21;
  Dataset ds = generate_community(co);
  float* x = ds.features.mutable_data<float>();
  for (int64_t v = 0; v < n; ++v) x[v * f] = 0.0f;
  for (int64_t j = 0; j < f; ++j) x[3 * f + j] = 0.0f;
  x[5 * f + 7] = -3.75f;
  return ds;
}

std::vector<std::vector<float>> rows_of(const Dataset& ds) {
  const int64_t n = ds.features.dim(0), f = ds.features.dim(1);
  const float* x = ds.features.data<float>();
  std::vector<std::vector<float>> out(n);
  for (int64_t v = 0; v < n; ++v) out[v].assign(x + v * f, x + (v + 1) * f);
  return out;
}

PartitionMeta partition(const Dataset& ds, const std::string& dir, const std::string& dtype,
                        const std::string& scale = "", int parts = 2, double ratio = 0.3) {
  PartitionOptions o;
  o.parts = parts;
  o.method = PartitionMethod::kRandom;
  o.cache_ratio = ratio;
  o.verbose = false;
  o.overwrite = true;
  o.feature_dtype = parse_choice<FeatureDtype>(dtype);
  o.feature_scale = scale.empty() ? FeatureScale::kAuto : parse_choice<FeatureScale>(scale);
  return partition_dataset(ds, o, dir);
}

struct Mode {
  std::string dtype, scale;
};
const std::vector<Mode>& modes() {
  static const std::vector<Mode> m = {
      {"float32", ""}, {"float16", ""}, {"bfloat16", ""}, {"int8", "column"}, {"int8", "row"}};
  return m;
}

TEST(PartitionQuant, StoredValuesScalesAndPrintedErrorMatchTheReference) {
  const Dataset ds = small_dataset();
  const QuantReference base("float32", "", rows_of(ds));
  const std::string dir = testing::temp_dir("quant_values");
  for (const Mode& md : modes()) {
    SCOPED_TRACE(md.dtype + " " + md.scale);
    const PartitionMeta m = partition(ds, dir, md.dtype, md.scale);
    const QuantReference ref(md.dtype, md.scale.empty() ? "" : md.scale, base.x);
    const PartitionData part = load_partition(dir, 0);
    EXPECT_EQ(dtype_name(part.features.dtype()), md.dtype);
    const Array new2old = load_npy(dir + "/new2old.npy", DType::kInt64, 1);
    const int64_t n = part.features.dim(0), f = part.features.dim(1);
    double max_abs = 0, sq = 0, ref_sq = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = new2old.data<int64_t>()[i];
      for (int64_t j = 0; j < f; ++j) {
        const float got = stored_feature(part.features, part.feature_scale, i, j);
        ASSERT_EQ(float_bits(got), float_bits(ref.value(v, j))) << "node " << v << " col " << j;
        const double d = static_cast<double>(got) - base.x[v][j];
        max_abs = std::max(max_abs, std::fabs(d));
        sq += d * d;
        ref_sq += static_cast<double>(base.x[v][j]) * base.x[v][j];
      }
    }
    if (md.dtype == "int8") {
      ASSERT_TRUE(part.feature_scale.defined());
      const float* s = part.feature_scale.data<float>();
      if (md.scale == "row") {
        ASSERT_EQ(part.feature_scale.shape(), (std::vector<int64_t>{n, 1}));
        for (int64_t i = 0; i < n; ++i)
          EXPECT_EQ(s[i], ref.scale_of(new2old.data<int64_t>()[i], 0));
        EXPECT_EQ(s[std::find(new2old.data<int64_t>(), new2old.data<int64_t>() + n, 3) -
                    new2old.data<int64_t>()],
                  0.0f);  // the all-zero row
      } else {
        ASSERT_EQ(part.feature_scale.shape(), (std::vector<int64_t>{1, f}));
        for (int64_t j = 0; j < f; ++j) EXPECT_EQ(s[j], ref.column_scale[j]);
        EXPECT_EQ(s[0], 0.0f);  // the all-zero column
      }
    } else {
      EXPECT_FALSE(part.feature_scale.defined());
    }
    // The figures partition.json keeps and dsp partition prints: a recomputation from the source.
    const FeatureConversion& c = part.meta.feature_conversion;
    EXPECT_TRUE(c.converted);
    EXPECT_EQ(c.max_abs_error, max_abs);
    EXPECT_NEAR(c.rel_rms_error, std::sqrt(sq / ref_sq), 1e-12 * std::sqrt(sq / ref_sq));
    if (md.dtype == "float32") {
      EXPECT_EQ(c.max_abs_error, 0.0);
    }
    ::testing::internal::CaptureStdout();
    partition_report(dir, m, true);
    std::fflush(stdout);
    const std::string out = ::testing::internal::GetCapturedStdout();
    EXPECT_NE(out.find(fmt::format("features: {}", md.dtype)), std::string::npos) << out;
    EXPECT_NE(out.find(fmt::format("max abs error {:.6g}, relative RMS error {:.6g}", max_abs,
                                   std::sqrt(sq / ref_sq))),
              std::string::npos)
        << out;
  }
  fs::remove_all(dir);
}

TEST(PartitionQuant, KeepWritesTheDatasetsBytesAndFloat32FromFloat32IsTheSame) {
  const Dataset ds = small_dataset();
  const std::string a = testing::temp_dir("quant_keep"), b = testing::temp_dir("quant_f32");
  partition(ds, a, "keep");
  partition(ds, b, "float32");
  EXPECT_EQ(read_file(a + "/features.npy"), read_file(b + "/features.npy"));
  EXPECT_EQ(read_file(a + "/partition.json").find("feature_conversion"), std::string::npos);
  EXPECT_NE(read_file(b + "/partition.json").find("feature_conversion"), std::string::npos);
  EXPECT_FALSE(fs::exists(a + "/feature_scale.npy"));
  // A narrower dtype caches more rows in the same byte budget.
  PartitionOptions o;
  o.method = PartitionMethod::kRandom;
  o.verbose = false;
  o.overwrite = true;
  o.cache_bytes = 12 * 4 * 10;  // ten float32 rows
  o.feature_dtype = FeatureDtype::kInt8;
  EXPECT_EQ(partition_dataset(ds, o, b).cache_rows, 40);
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST(PartitionQuant, NonFiniteAndOverflowingValuesAreRefused) {
  Dataset ds = small_dataset();
  const std::string dir = testing::temp_dir("quant_nan");
  float* x = ds.features.mutable_data<float>();
  x[5 * 12 + 2] = std::nanf("");
  EXPECT_EQ(error_of<InvalidArgument>([&] { partition(ds, dir, "int8"); }),
            "community/features.npy: feature 2 of node 5 is nan: --feature-dtype int8 needs "
            "finite features");
  x[5 * 12 + 2] = 1.0f;
  x[7 * 12 + 4] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(error_of<InvalidArgument>([&] { partition(ds, dir, "bfloat16"); }),
            "community/features.npy: feature 4 of node 7 is -inf: --feature-dtype bfloat16 needs "
            "finite features");
  x[7 * 12 + 4] = 1.0f;
  x[9 * 12 + 1] = 70000.0f;
  EXPECT_EQ(error_of<InvalidArgument>([&] { partition(ds, dir, "float16"); }),
            "community/features.npy: feature 1 of node 9 is 70000, beyond the range of float16 "
            "(it would be stored as inf)");
  EXPECT_EQ(error_of([&] { partition(ds, dir, "int8", "row"); }), "no error");
  fs::remove_all(dir);
}

TEST(PartitionQuant, BadOptionsAreRefused) {
  const Dataset ds = small_dataset();
  const std::string dir = testing::temp_dir("quant_opts");
  EXPECT_EQ(error_of<InvalidArgument>([&] { partition(ds, dir, "int4"); }),
            "unknown feature dtype 'int4' (keep, float32, float16, bfloat16, int8)");
  EXPECT_EQ(error_of<InvalidArgument>([&] { partition(ds, dir, "bfloat16", "row"); }),
            "--feature-scale needs --feature-dtype int8 (got --feature-dtype bfloat16)");
  EXPECT_EQ(error_of<InvalidArgument>([&] { partition(ds, dir, "int8", "tensor"); }),
            "unknown feature scale 'tensor' (auto, column, row)");
  PartitionCommand cmd;
  cmd.dataset = "in";
  cmd.out = "out";
  cmd.preaggregate = true;
  cmd.o.feature_dtype = FeatureDtype::kInt8;
  EXPECT_EQ(error_of<InvalidArgument>([&] { cmd.validate(); }),
            "--feature-dtype int8 with --preaggregate: the pre-aggregated rows are stored in the "
            "dataset's dtype; partition with --feature-dtype keep to pre-aggregate");
  Dataset bare = small_dataset();
  bare.features = Array();
  bare.meta.feature_dim = 0;
  EXPECT_EQ(error_of<InvalidArgument>([&] { partition(bare, dir, "bfloat16"); }),
            "--feature-dtype bfloat16: community has no node features");
  fs::remove_all(dir);
}

// Edits partition.json's feature_conversion with `edit`, returns load_partition's message.
template <class Edit>
std::string load_error_after(const std::string& dir, Edit edit) {
  const std::string path = dir + "/partition.json";
  const std::string saved = read_file(path);
  nlohmann::json j = nlohmann::json::parse(saved);
  edit(j);
  write_file_atomic(path, j.dump(2));
  const std::string e = error_of<FormatError>([&] { load_partition(dir, 0); });
  write_file_atomic(path, saved);
  return e;
}

TEST(PartitionQuant, BadMetadataAndScaleFilesAreRefused) {
  const Dataset ds = small_dataset();
  const std::string dir = testing::temp_dir("quant_meta");
  partition(ds, dir, "int8", "column", 1);
  const std::string pj = dir + "/partition.json";
  EXPECT_EQ(load_error_after(dir, [](auto& j) { j["feature_conversion"]["scale"] = "diag"; }),
            pj + ": feature_conversion.scale 'diag' is not column or row (int8 features)");
  EXPECT_EQ(load_error_after(dir, [](auto& j) { j.erase("feature_conversion"); }),
            pj + ": feature_dtype int8 needs a 'feature_conversion' entry");
  EXPECT_EQ(load_error_after(dir, [](auto& j) { j["feature_conversion"].erase("max_abs_error"); }),
            pj + ": malformed 'feature_conversion' (source_dtype, scale, max_abs_error, "
                 "rel_rms_error)");
  EXPECT_EQ(load_error_after(dir, [](auto& j) { j["feature_conversion"]["rel_rms_error"] = -1; }),
            pj + ": feature_conversion errors must be finite and >= 0");
  EXPECT_EQ(load_error_after(dir,
                             [](auto& j) {
                               j["feature_dtype"] = "float16";
                               j["feature_conversion"]["scale"] = "row";
                             }),
            pj + ": feature_conversion.scale 'row' for float16 features (only int8 has scales)");
  // partition.json says per node: feature_scale.npy holds one per column.
  EXPECT_EQ(
      load_error_after(dir, [](auto& j) { j["feature_conversion"]["scale"] = "row"; }),
      dir +
          "/feature_scale.npy: shape float32[1, 12], expected [300, 1] (one scale per node, as "
          "partition.json says)");
  const std::string sp = dir + "/feature_scale.npy";
  const std::string saved = read_file(sp);
  save_npy(sp, Array::from_vector(std::vector<float>(11, 1.0f), {1, 11}));
  EXPECT_EQ(error_of<FormatError>([&] { load_partition(dir, 0); }),
            sp +
                ": shape float32[1, 11], expected [1, 12] (one scale per column, as partition.json "
                "says)");
  std::vector<float> bad(12, 1.0f);
  bad[4] = -2.0f;
  save_npy(sp, Array::from_vector(std::move(bad), {1, 12}));
  EXPECT_EQ(error_of<FormatError>([&] { load_partition(dir, 0); }),
            sp + ": scale 4 is -2 (must be finite, >= 0)");
  fs::remove(sp);
  EXPECT_NE(error_of([&] {
              load_partition(dir, 0);
            }).find(sp + ": missing (int8 features need their scales)"),
            std::string::npos);
  write_file_atomic(sp, saved);
  EXPECT_EQ(error_of([&] { load_partition(dir, 0); }), "no error");
  fs::remove_all(dir);
}

// The gather of a quantized partition on every backend: float32 rows equal to the reference,
// stored (narrow) bytes counted, hot and cold rows both decoded.
class QuantGather : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { DSP_SKIP_UNAVAILABLE_BACKEND(GetParam()); }
};

TEST_P(QuantGather, RowsDecodeToTheReferenceOnEveryBackend) {
  const Dataset ds = small_dataset(500, 13);
  const QuantReference base("float32", "", rows_of(ds));
  const std::string dir = testing::temp_dir("quant_gather_" + GetParam());
  auto comm = make_communicator("self");
  for (const Mode& md : modes()) {
    SCOPED_TRACE(md.dtype + " " + md.scale);
    partition(ds, dir, md.dtype, md.scale, 1, 0.4);
    const QuantReference ref(md.dtype, md.scale, base.x);
    const PartitionData part = load_partition(dir, 0);
    const Array new2old = load_npy(dir + "/new2old.npy", DType::kInt64, 1);
    FeatureStore store(part, *comm, {}, test::feature_backend(GetParam()));
    const bool decodes = md.dtype == "int8" || md.dtype == "bfloat16";
    EXPECT_EQ(store.format().out_dtype, decodes ? DType::kFloat32 : store.format().dtype);
    std::vector<int64_t> ids(500);
    std::iota(ids.begin(), ids.end(), 0);
    RngStream s(rng_key(3), 0);
    for (int64_t i = 499; i > 0; --i) std::swap(ids[i], ids[s.uniform_int(i + 1)]);
    ids.resize(300);
    const std::vector<unsigned char> got = store.gather(ids);
    ASSERT_EQ(got.size(), ids.size() * store.format().out_row_bytes);
    for (size_t i = 0; i < ids.size(); ++i) {
      const int64_t v = new2old.data<int64_t>()[ids[i]];
      for (int64_t j = 0; j < 13; ++j) {
        float x;
        if (md.dtype == "float16") {
          uint16_t h;
          std::memcpy(&h, got.data() + i * store.format().out_row_bytes + 2 * j, 2);
          x = half_to_float(h);
        } else {
          std::memcpy(&x, got.data() + i * store.format().out_row_bytes + 4 * j, 4);
        }
        ASSERT_EQ(float_bits(x), float_bits(ref.value(v, j))) << "row " << i << " col " << j;
      }
    }
    const GatherStats& st = store.stats();
    EXPECT_GT(st.rows_local_hot, 0);
    EXPECT_GT(st.rows_cold, 0);
    EXPECT_EQ(st.bytes(), 300 * 13 * static_cast<int64_t>(dtype_size(store.format().dtype)));
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Backends, QuantGather, ::testing::ValuesIn(test::backend_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dsp
