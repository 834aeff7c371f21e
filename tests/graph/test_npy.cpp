#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "graph/io_test_util.hpp"
#include "graph/npy.hpp"

namespace dsp {
namespace {
using iotest::TempDir;

const DType kAllDtypes[] = {DType::kInt32,   DType::kInt64,   DType::kFloat16,
                            DType::kFloat32, DType::kFloat64, DType::kUInt8};

Array patterned(DType t, std::vector<int64_t> shape) {
  Array a(t, std::move(shape));
  auto* p = static_cast<unsigned char*>(a.raw_mutable());
  for (size_t i = 0; i < a.nbytes(); ++i) p[i] = static_cast<unsigned char>(i * 37 + 11);
  return a;
}

void expect_same(const Array& a, const Array& b) {
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.nbytes(), b.nbytes());
  if (a.nbytes() > 0) {
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0);
  }
}

// The bytes numpy (>= 1.14) writes for np.save(f, np.arange(3, dtype='<i8')): a 1.0 header padded
// with spaces so that the payload starts at byte 128.
std::string numpy_arange3() {
  std::string dict = "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }";
  std::string s("\x93NUMPY\x01\x00\x76\x00", 10);
  s += dict + std::string(60, ' ') + "\n";
  for (int64_t v = 0; v < 3; ++v) s.append(reinterpret_cast<const char*>(&v), 8);
  return s;
}

std::string make_npy(int major, const std::string& dict, size_t payload_bytes) {
  std::string body = dict + "\n";
  std::string s("\x93NUMPY", 6);
  s.push_back(static_cast<char>(major));
  s.push_back(0);
  int len_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < len_bytes; ++i)
    s.push_back(static_cast<char>((body.size() >> (8 * i)) & 0xff));
  s += body;
  s.append(payload_bytes, '\x01');
  return s;
}

NpyHeader parse(const std::string& s) {
  return parse_npy_header(reinterpret_cast<const unsigned char*>(s.data()), s.size(), "x.npy");
}

void expect_format_error(const std::string& bytes, const std::string& needle) {
  try {
    parse(bytes);
    ADD_FAILURE() << "no error, expected '" << needle << "'";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message: " << e.what() << "\nexpected: " << needle;
    EXPECT_EQ(std::string(e.what()).rfind("x.npy: ", 0), 0u) << e.what();
  }
}

TEST(Npy, RoundTripEveryDtypeAndShape) {
  TempDir tmp("npy_rt");
  for (DType t : kAllDtypes) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{7}, {3, 5}, {0}, {4, 0}, {1000, 3}}) {
      Array a = patterned(t, shape);
      std::string f = tmp / "a.npy";
      save_npy(f, a);
      SCOPED_TRACE(a.describe());
      for (bool mmap : {true, false}) {
        Array b = load_npy(f, mmap);
        expect_same(a, b);
        EXPECT_EQ(b.is_mapped(), mmap);
      }
      // The payload starts on a 64-byte boundary, as numpy writes it.
      std::string bytes = iotest::slurp(f);
      NpyHeader h =
          parse_npy_header(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), f);
      EXPECT_EQ(h.data_offset % 64, 0u);
      EXPECT_EQ(bytes.size(), h.data_offset + a.nbytes());
      EXPECT_EQ(h.shape, a.shape());
    }
  }
  // Nothing but the final file is left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(tmp.path()), {}), 1);
}

TEST(Npy, ReadsNumpyWrittenFiles) {
  TempDir tmp("npy_numpy");
  std::string f = tmp / "arange.npy";
  iotest::write_text(f, numpy_arange3());
  for (bool mmap : {true, false}) {
    Array a = load_npy(f, DType::kInt64, 1, mmap);
    ASSERT_EQ(a.shape(), std::vector<int64_t>{3});
    EXPECT_EQ(a.data<int64_t>()[0], 0);
    EXPECT_EQ(a.data<int64_t>()[2], 2);
  }
  // Our writer produces byte-identical output for the same array.
  save_npy(tmp / "ours.npy", Array::from_vector(std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(iotest::slurp(tmp / "ours.npy"), numpy_arange3());

  // Version 2.0 and 3.0 headers, double quotes, a 2-d shape without trailing comma, and an
  // unaligned payload (read by copying instead of mapping).
  std::string v2 =
      make_npy(2, "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, 3)}", 24);
  NpyHeader h = parse(v2);
  EXPECT_EQ(h.dtype, DType::kFloat32);
  EXPECT_EQ(h.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(h.data_offset, v2.size() - 24);
  EXPECT_EQ(
      parse(make_npy(3, "{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }", 5)).dtype,
      DType::kUInt8);
  std::string odd = make_npy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,)}", 16);
  ASSERT_NE((odd.size() - 16) % 8, 0u);
  iotest::write_text(tmp / "odd.npy", odd);
  Array a = load_npy(tmp / "odd.npy", true);
  EXPECT_EQ(a.describe(), "float64[2]");
  EXPECT_FALSE(a.is_mapped());
}

TEST(Npy, RejectsBadHeadersWithSpecificMessages) {
  const std::string ok = "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }";
  expect_format_error("", "too short");
  expect_format_error(std::string("\x93NUMPX\x01\x00\x00\x00", 10), "bad magic");
  expect_format_error(make_npy(4, ok, 24), "unsupported .npy format version 4.0");
  expect_format_error(make_npy(1, ok, 16),
                      "truncated: header says int64[3] (24 bytes of data) but the file has 16");
  std::string cut = make_npy(1, ok, 0);
  expect_format_error(cut.substr(0, 40), "truncated");
  expect_format_error(make_npy(1, "{'descr': '>i8', 'fortran_order': False, 'shape': (3,), }", 24),
                      "big-endian");
  expect_format_error(make_npy(1, "{'descr': '<i8', 'fortran_order': True, 'shape': (3,), }", 24),
                      "Fortran-order");
  expect_format_error(make_npy(1, "{'descr': '<c16', 'fortran_order': False, 'shape': (3,), }", 48),
                      "unsupported .npy dtype '<c16'");
  expect_format_error(make_npy(1, "{'descr': '<i8', 'fortran_order': False}", 24),
                      "missing key 'shape'");
  expect_format_error(make_npy(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (-3,)}", 24),
                      "non-negative");
  expect_format_error(
      make_npy(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", 8),
      "overflows");
  expect_format_error(
      make_npy(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (99999999999999999999,)}", 8),
      "too large");
  expect_format_error(make_npy(1, "{'descr': '<i8', 'fortran_order': False, 'shape': ()}", 8),
                      "0-d");
  expect_format_error(make_npy(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,", 24),
                      "bad .npy header");
  expect_format_error(make_npy(1, "{'descr': '<i8', 'fortran_order': maybe, 'shape': (3,)}", 24),
                      "True or False");
  // A header length field pointing past the end of the file.
  std::string big = make_npy(1, ok, 0);
  big[8] = '\xff';
  big[9] = '\xff';
  expect_format_error(big, "truncated");
}

TEST(Npy, LoadNamesThePathAndTheFault) {
  TempDir tmp("npy_err");
  std::string f = tmp / "feat.npy";
  save_npy(f, Array(DType::kFloat32, {4, 2}));
  try {
    load_npy(f, DType::kInt64, 2, true);
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_EQ(std::string(e.what()), f + ": wrong dtype: expected int64, got float32");
  }
  EXPECT_THROW(load_npy(f, DType::kFloat32, 1, true), FormatError);

  // A file cut short on disk.
  std::filesystem::resize_file(f, std::filesystem::file_size(f) - 5);
  for (bool mmap : {true, false}) {
    try {
      load_npy(f, mmap);
      FAIL();
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(f + ": truncated: header says float32[4, 2] (32 bytes"),
                std::string::npos)
          << e.what();
    }
  }
  try {
    load_npy(tmp / "missing.npy", false);
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(tmp / "missing.npy"), std::string::npos);
  }
  EXPECT_THROW(load_npy(tmp / "missing.npy", true), IoError);
  EXPECT_THROW(save_npy(tmp / "nodir/x.npy", Array(DType::kInt32, {2})), IoError);
}

// A header length that ends inside the 12 bytes first read (found by fuzz_dataset_dir): the
// copying reader once shrank its buffer below them and read past it. Both readers refuse it.
TEST(Npy, HeaderEndingInsideThePrefixIsRefused) {
  TempDir tmp("npy_short_header");
  const std::string f = tmp / "x.npy";
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes += std::string("\x01\x00", 2);  // header length 1: ends at byte 11
  bytes += std::string(180, 'x');
  iotest::write_text(f, bytes);
  for (bool mmap : {true, false}) {
    EXPECT_THROW(load_npy(f, mmap), FormatError) << "mmap " << mmap;
  }
}

TEST(Npy, MappedArrayOutlivesItsFileHandle) {
  TempDir tmp("npy_keep");
  std::string f = tmp / "a.npy";
  save_npy(f, Array::from_vector(std::vector<int32_t>{5, 6, 7}));
  Array a = load_npy(f, true);
  std::filesystem::remove(f);  // the mapping keeps the data reachable
  Array b = a;
  a = Array();
  EXPECT_EQ(b.data<int32_t>()[2], 7);
  EXPECT_THROW(b.mutable_data<int32_t>(), Error);
}

}  // namespace
}  // namespace dsp
