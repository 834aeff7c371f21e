#pragma once
// NumPy .npy files (format versions 1.0, 2.0 and 3.0), little-endian C-order arrays of the dtypes
// in core/dtype.hpp. This is the on-disk array format of every dataset directory, so Python users
// read and write datasets with plain numpy.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "graph/array.hpp"

namespace dsp {

struct NpyHeader {
  DType dtype = DType::kUInt8;
  std::vector<int64_t> shape;  // at least one dimension (0-d arrays are rejected)
  size_t data_offset = 0;      // byte offset of the first element
};

// Parses and checks the header of the .npy image data[0, size): magic, version, header length,
// the dict (descr, fortran_order, shape), dtype support, shape overflow, and that `size` holds
// the whole payload. Throws FormatError prefixed with `what`. Safe on arbitrary bytes.
NpyHeader parse_npy_header(const unsigned char* data, size_t size, const std::string& what);

// Loads a .npy file. With `mmap` the array is a read-only view of a private mapping of the file
// (kept alive by the array); otherwise the data are read into an owned array.
Array load_npy(const std::string& path, bool mmap = true);
// As above, and checks the dtype and the number of dimensions (ndim < 0: any).
Array load_npy(const std::string& path, DType expected, int ndim, bool mmap = true);

// Writes `a` as a version 1.0 file (2.0 if the header needs it) under a temporary name, renamed
// onto `path` when complete.
void save_npy(const std::string& path, const Array& a);

// Streams a .npy file whose payload is produced piece by piece (e.g. rows gathered in chunks), so
// large arrays never need a second copy in memory. Writes to `path.tmp.<pid>`; close() checks
// that exactly the shape's bytes were written and renames onto `path`. Destroyed without close(),
// the temporary file is removed.
class NpyWriter {
 public:
  NpyWriter(std::string path, DType dtype, std::vector<int64_t> shape);
  ~NpyWriter();
  NpyWriter(const NpyWriter&) = delete;
  NpyWriter& operator=(const NpyWriter&) = delete;
  void write(const void* data, size_t bytes);
  void close();
  // For a payload whose length is known only at the end (a merge that drops repeats): the
  // constructor's shape[0] was an upper bound; the header is rewritten for `first_dim` rows,
  // exactly as save_npy would write it, and exactly that many rows must have been written.
  void close_with_first_dim(int64_t first_dim);

 private:
  [[noreturn]] void fail(const char* what);
  void rewrite_header(const std::string& head);
  std::string path_, tmp_;
  std::FILE* file_ = nullptr;
  DType dtype_;
  std::vector<int64_t> shape_;
  size_t head_size_ = 0;
  uint64_t expected_ = 0, written_ = 0;
};

}  // namespace dsp
