#include "graph/npy.hpp"

#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string_view>

#include "core/error.hpp"
#include "core/fs.hpp"

namespace dsp {
namespace {

constexpr unsigned char kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr int kMaxDims = 32;

const char* npy_descr(DType t) {
  switch (t) {
    case DType::kInt32:
      return "<i4";
    case DType::kInt64:
      return "<i8";
    case DType::kFloat16:
      return "<f2";
    case DType::kFloat32:
      return "<f4";
    case DType::kFloat64:
      return "<f8";
    case DType::kUInt8:
      return "|u1";
    case DType::kInt8:
      return "|i1";
    case DType::kBFloat16:  // numpy has no bfloat16: its bits as uint16 (view as ml_dtypes')
      return "<u2";
  }
  return "?";
}

// Size of the fixed prefix (magic, version, header length) and of the whole header, from the
// first bytes of the file. Reads only data[0, avail).
size_t npy_prefix_and_header_size(const unsigned char* data, size_t avail, const std::string& what,
                                  size_t* prefix) {
  DSP_CHECK_FORMAT(avail >= 10, "{}: not a .npy file: too short ({} bytes)", what, avail);
  DSP_CHECK_FORMAT(std::memcmp(data, kMagic, sizeof(kMagic)) == 0, "{}: not a .npy file: bad magic",
                   what);
  const int major = data[6], minor = data[7];
  DSP_CHECK_FORMAT(major >= 1 && major <= 3 && minor == 0,
                   "{}: unsupported .npy format version {}.{} (supported: 1.0, 2.0, 3.0)", what,
                   major, minor);
  size_t hlen;
  if (major == 1) {
    *prefix = 10;
    hlen = static_cast<size_t>(data[8]) | (static_cast<size_t>(data[9]) << 8);
  } else {
    DSP_CHECK_FORMAT(avail >= 12, "{}: truncated .npy header", what);
    *prefix = 12;
    hlen = static_cast<size_t>(data[8]) | (static_cast<size_t>(data[9]) << 8) |
           (static_cast<size_t>(data[10]) << 16) | (static_cast<size_t>(data[11]) << 24);
  }
  return *prefix + hlen;
}

// A parser for the Python dict literal of a .npy header, e.g.
//   {'descr': '<i8', 'fortran_order': False, 'shape': (2708,), }
class HeaderDict {
 public:
  HeaderDict(std::string_view text, const std::string& what)
      : p_(text.data()), end_(text.data() + text.size()), what_(what) {}

  void parse(std::string_view* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    expect('{');
    while (!eat('}')) {
      std::string_view key = string();
      expect(':');
      if (key == "descr") {
        *descr = string();
        have_descr = true;
      } else if (key == "fortran_order") {
        *fortran = boolean();
        have_fortran = true;
      } else if (key == "shape") {
        *shape = tuple();
        have_shape = true;
      } else {
        fail(fmt::format("unexpected key '{}'", key));
      }
      if (!eat(',')) {
        expect('}');
        break;
      }
    }
    if (!have_descr || !have_fortran || !have_shape) {
      fail(fmt::format("missing key '{}'", !have_descr     ? "descr"
                                           : !have_fortran ? "fortran_order"
                                                           : "shape"));
    }
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    DSP_THROW_T(FormatError, "{}: bad .npy header: {}", what_, why);
  }
  void ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  bool eat(char c) {
    ws();
    if (p_ < end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(fmt::format("expected '{}'", c));
  }
  std::string_view string() {
    ws();
    if (p_ >= end_ || (*p_ != '\'' && *p_ != '"')) fail("expected a quoted string");
    char q = *p_++;
    const char* b = p_;
    while (p_ < end_ && *p_ != q) ++p_;
    if (p_ >= end_) fail("unterminated string");
    std::string_view s(b, static_cast<size_t>(p_ - b));
    ++p_;
    return s;
  }
  bool boolean() {
    ws();
    auto rest = static_cast<size_t>(end_ - p_);
    if (rest >= 4 && std::memcmp(p_, "True", 4) == 0) {
      p_ += 4;
      return true;
    }
    if (rest >= 5 && std::memcmp(p_, "False", 5) == 0) {
      p_ += 5;
      return false;
    }
    fail("fortran_order must be True or False");
  }
  int64_t integer() {
    ws();
    int64_t v = 0;
    auto r = std::from_chars(p_, end_, v);
    if (r.ec == std::errc::result_out_of_range) fail("shape dimension too large");
    if (r.ec != std::errc() || v < 0) fail("shape dimensions must be non-negative integers");
    p_ = r.ptr;
    if (p_ < end_ && *p_ == 'L') ++p_;  // Python 2 long literal
    return v;
  }
  std::vector<int64_t> tuple() {
    expect('(');
    std::vector<int64_t> dims;
    if (eat(')')) return dims;
    while (true) {
      if (dims.size() >= kMaxDims) fail("too many dimensions");
      dims.push_back(integer());
      if (eat(')')) break;
      expect(',');
      if (eat(')')) break;
    }
    return dims;
  }

  const char* p_;
  const char* end_;
  const std::string& what_;
};

DType parse_descr(std::string_view d, const std::string& what) {
  if (d.size() == 3 && d[0] == '>' && d.substr(1) != "u1" && d.substr(1) != "i1") {
    DSP_THROW_T(FormatError, "{}: big-endian .npy data ('{}') is not supported", what, d);
  }
  if (d == "<i4") return DType::kInt32;
  if (d == "<i8") return DType::kInt64;
  if (d == "<f2") return DType::kFloat16;
  if (d == "<f4") return DType::kFloat32;
  if (d == "<f8") return DType::kFloat64;
  if (d == "|u1" || d == "<u1" || d == ">u1") return DType::kUInt8;
  if (d == "|i1" || d == "<i1" || d == ">i1") return DType::kInt8;
  if (d == "<u2") return DType::kBFloat16;  // dsp writes bfloat16 as its uint16 bits
  DSP_THROW_T(FormatError,
              "{}: unsupported .npy dtype '{}' (supported: <i4 <i8 <f2 <f4 <f8 |u1 |i1 <u2)",
              what, d);
}

// Parses a header of which data[0, avail) is in memory, for a file of `total` bytes.
NpyHeader parse_impl(const unsigned char* data, size_t avail, uint64_t total,
                     const std::string& what) {
  size_t prefix = 0;
  size_t header_end = npy_prefix_and_header_size(data, avail, what, &prefix);
  DSP_CHECK_FORMAT(header_end <= avail,
                   "{}: truncated: the .npy header is {} bytes but the file has {}", what,
                   header_end, total);
  std::string_view text(reinterpret_cast<const char*>(data + prefix), header_end - prefix);
  std::string_view descr;
  bool fortran = false;
  NpyHeader h;
  HeaderDict(text, what).parse(&descr, &fortran, &h.shape);
  h.dtype = parse_descr(descr, what);
  DSP_CHECK_FORMAT(!fortran, "{}: Fortran-order .npy arrays are not supported (save C order)",
                   what);
  DSP_CHECK_FORMAT(!h.shape.empty(), "{}: 0-d .npy arrays are not supported", what);
  h.data_offset = header_end;
  uint64_t n = 1;
  for (int64_t d : h.shape) {
    DSP_CHECK_FORMAT(!__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n),
                     "{}: .npy shape ({}) overflows", what, fmt::join(h.shape, ", "));
  }
  uint64_t nbytes = 0;
  DSP_CHECK_FORMAT(!__builtin_mul_overflow(n, dtype_size(h.dtype), &nbytes) &&
                       nbytes <= static_cast<uint64_t>(INT64_MAX),
                   "{}: .npy shape ({}) overflows", what, fmt::join(h.shape, ", "));
  uint64_t have = total - header_end;
  if (nbytes > have) {
    DSP_THROW_T(FormatError,
                "{}: truncated: header says {}[{}] ({} bytes of data) but the file has {}", what,
                dtype_name(h.dtype), fmt::join(h.shape, ", "), nbytes, have);
  }
  return h;
}

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f) std::fclose(f);
  }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

void read_exact(std::FILE* f, void* dst, size_t n, const std::string& path) {
  auto* out = static_cast<unsigned char*>(dst);
  while (n > 0) {
    size_t chunk = std::min<size_t>(n, size_t{64} << 20);
    size_t got = std::fread(out, 1, chunk, f);
    DSP_CHECK_T(IoError, got == chunk, "{}: read failed: {}", path,
                std::ferror(f) ? std::strerror(errno) : "unexpected end of file");
    out += got;
    n -= got;
  }
}

Array load_copy(const std::string& path) {
  FilePtr f(std::fopen(path.c_str(), "rb"));
  DSP_CHECK_T(IoError, f != nullptr, "{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  DSP_CHECK_T(IoError, ::fstat(::fileno(f.get()), &st) == 0, "{}: cannot stat: {}", path,
              std::strerror(errno));
  const uint64_t total = static_cast<uint64_t>(st.st_size);
  std::vector<unsigned char> head(std::min<uint64_t>(total, 12));
  read_exact(f.get(), head.data(), head.size(), path);
  size_t prefix = 0;
  size_t header_end = npy_prefix_and_header_size(head.data(), head.size(), path, &prefix);
  // A header that ends within the bytes already read (a malformed length) must not shrink the
  // buffer below them: the parse below then names the fault.
  const size_t have = head.size();
  head.resize(std::max<uint64_t>(have, std::min<uint64_t>(header_end, total)));
  read_exact(f.get(), head.data() + have, head.size() - have, path);
  NpyHeader h = parse_impl(head.data(), head.size(), total, path);
  Array a(h.dtype, h.shape);
  read_exact(f.get(), a.raw_mutable(), a.nbytes(), path);
  return a;
}

}  // namespace

NpyHeader parse_npy_header(const unsigned char* data, size_t size, const std::string& what) {
  return parse_impl(data, size, size, what);
}

Array load_npy(const std::string& path, bool mmap) {
  if (!mmap) return load_copy(path);
  auto file = std::make_shared<MappedFile>(path);
  NpyHeader h = parse_npy_header(file->data(), file->size(), path);
  // A view needs the payload aligned for its element type; numpy pads headers to 64 bytes, but
  // other writers may not, and misaligned loads are undefined behaviour.
  if (h.data_offset % dtype_size(h.dtype) != 0) return load_copy(path);
  const unsigned char* payload = file->data() + h.data_offset;
  std::shared_ptr<const void> keep(file, payload);
  return Array(h.dtype, std::move(h.shape), payload, std::move(keep));
}

Array load_npy(const std::string& path, DType expected, int ndim, bool mmap) {
  Array a = load_npy(path, mmap);
  DSP_CHECK_FORMAT(a.dtype() == expected, "{}: wrong dtype: expected {}, got {}", path,
                   dtype_name(expected), dtype_name(a.dtype()));
  DSP_CHECK_FORMAT(ndim < 0 || a.ndim() == ndim,
                   "{}: wrong number of dimensions: expected {}, got {} (shape {})", path, ndim,
                   a.ndim(), a.describe());
  return a;
}

std::string npy_header_bytes(DType dtype, const std::vector<int64_t>& shape_v) {
  std::string shape =
      shape_v.size() == 1 ? fmt::format("{},", shape_v[0]) : fmt::format("{}", fmt::join(shape_v, ", "));
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}",
                                 npy_descr(dtype), shape);
  // Pad with spaces so the payload starts on a 64-byte boundary, as numpy does.
  size_t prefix = dict.size() + 1 + 10 <= 65535 ? 10 : 12;
  size_t len = prefix + dict.size() + 1;
  dict.append((64 - len % 64) % 64, ' ');
  dict.push_back('\n');
  const size_t hlen = dict.size();
  std::string head(reinterpret_cast<const char*>(kMagic), sizeof(kMagic));
  head.push_back(static_cast<char>(prefix == 10 ? 1 : 2));
  head.push_back(0);
  for (size_t i = 0; i < prefix - 8; ++i)
    head.push_back(static_cast<char>((hlen >> (8 * i)) & 0xff));
  head += dict;
  return head;
}

NpyWriter::NpyWriter(std::string path, DType dtype, std::vector<int64_t> shape)
    : path_(std::move(path)),
      tmp_(fmt::format("{}.tmp.{}", path_, ::getpid())),
      dtype_(dtype),
      shape_(shape) {
  DSP_CHECK_ARG(!shape.empty(), "{}: cannot write a 0-d array", path_);
  expected_ = dtype_size(dtype);
  for (auto d : shape) {
    DSP_CHECK_ARG(d >= 0, "{}: negative dimension {}", path_, d);
    expected_ *= static_cast<uint64_t>(d);
  }
  remove_stale_temps(path_);
  std::remove(tmp_.c_str());  // created exclusively, as write_file_atomic's temporary file is
  file_ = std::fopen(tmp_.c_str(), "wbx");
  DSP_CHECK_T(IoError, file_ != nullptr, "{}: cannot open for writing: {}", tmp_,
              std::strerror(errno));
  std::string head = npy_header_bytes(dtype, shape);
  head_size_ = head.size();
  if (std::fwrite(head.data(), 1, head.size(), file_) != head.size()) fail("write failed");
}

NpyWriter::~NpyWriter() {
  if (file_) {
    std::fclose(file_);
    std::remove(tmp_.c_str());
  }
}

void NpyWriter::fail(const char* what) {
  int e = errno;
  if (file_) std::fclose(file_);
  file_ = nullptr;
  std::remove(tmp_.c_str());
  DSP_THROW_T(IoError, "{}: {}: {}", path_, what, std::strerror(e));
}

void NpyWriter::write(const void* data, size_t n) {
  DSP_CHECK(file_ != nullptr, "{}: write after close", path_);
  DSP_CHECK(written_ + n <= expected_, "{}: more data than the shape holds ({} > {} bytes)", path_,
            written_ + n, expected_);
  const auto* p = static_cast<const unsigned char*>(data);
  size_t left = n;
  while (left > 0) {
    size_t chunk = std::min<size_t>(left, size_t{64} << 20);
    if (std::fwrite(p, 1, chunk, file_) != chunk) fail("write failed");
    p += chunk;
    left -= chunk;
  }
  written_ += n;
}

void NpyWriter::close() {
  DSP_CHECK(file_ != nullptr, "{}: closed twice", path_);
  DSP_CHECK(written_ == expected_, "{}: {} of {} data bytes written", path_, written_, expected_);
  if (std::fflush(file_) != 0) fail("write failed");
  int rc = std::fclose(file_);
  file_ = nullptr;
  if (rc != 0) {
    std::remove(tmp_.c_str());
    DSP_THROW_T(IoError, "{}: write failed: {}", path_, std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp_, path_, ec);
  if (ec) {
    std::remove(tmp_.c_str());
    DSP_THROW_T(IoError, "{}: cannot rename into place: {}", path_, ec.message());
  }
}

void NpyWriter::close_with_first_dim(int64_t first_dim) {
  DSP_CHECK(file_ != nullptr, "{}: closed twice", path_);
  DSP_CHECK(first_dim >= 0 && first_dim <= shape_[0], "{}: {} rows exceed the bound {}", path_,
            first_dim, shape_[0]);
  shape_[0] = first_dim;
  expected_ = dtype_size(dtype_);
  for (auto d : shape_) expected_ *= static_cast<uint64_t>(d);
  DSP_CHECK(written_ == expected_, "{}: {} of {} data bytes written", path_, written_, expected_);
  rewrite_header(npy_header_bytes(dtype_, shape_));
  close();
}

// Puts `head` over the reserved header. Headers are padded to 128 bytes for every shape of up
// to two dimensions of 19 digits each, so the final header always has the reserved length.
void NpyWriter::rewrite_header(const std::string& head) {
  DSP_CHECK(head.size() == head_size_,
            "{}: the final .npy header ({} bytes) does not fit the {} reserved",
            path_, head.size(), head_size_);
  if (std::fflush(file_) != 0) fail("write failed");
  if (std::fseek(file_, 0, SEEK_SET) != 0) fail("seek failed");
  if (std::fwrite(head.data(), 1, head.size(), file_) != head.size()) fail("write failed");
  if (std::fseek(file_, 0, SEEK_END) != 0) fail("seek failed");
}

void save_npy(const std::string& path, const Array& a) {
  DSP_CHECK_ARG(a.defined(), "{}: cannot save an undefined array", path);
  NpyWriter w(path, a.dtype(), a.shape());
  w.write(a.raw(), a.nbytes());
  w.close();
}

}  // namespace dsp
