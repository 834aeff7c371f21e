#include "graph/array.hpp"

#include <fmt/ranges.h>

#include <algorithm>

#include "core/fs.hpp"

namespace dsp {

Array::Array(DType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
  for (auto d : shape_) DSP_CHECK(d >= 0, "negative array dimension {}", d);
  size_t n = nbytes();
  auto owner = std::shared_ptr<unsigned char[]>(new unsigned char[n > 0 ? n : 1]());
  data_ = owner.get();
  mutable_ = true;
  keepalive_ = std::shared_ptr<const void>(owner, owner.get());
}

Array::Array(DType dtype, std::vector<int64_t> shape, const void* data,
             std::shared_ptr<const void> keepalive)
    : dtype_(dtype),
      shape_(std::move(shape)),
      data_(const_cast<void*>(data)),
      mutable_(false),
      keepalive_(std::move(keepalive)) {}

int64_t Array::numel() const {
  if (shape_.empty()) return 0;
  int64_t n = 1;
  for (auto d : shape_) n *= d;
  return n;
}

void* Array::raw_mutable() {
  DSP_CHECK(mutable_, "array {} is a read-only view of a mapped file", describe());
  return data_;
}

void Array::release_pages(size_t offset, size_t bytes) const {
  const size_t total = nbytes();
  if (!is_mapped() || offset >= total) return;
  release_mapped_pages(static_cast<const unsigned char*>(data_) + offset,
                       std::min(bytes, total - offset));
}

void Array::release_rows(int64_t begin, int64_t end) const {
  if (!is_mapped() || shape_[0] <= 0) return;
  begin = std::clamp<int64_t>(begin, 0, shape_[0]);
  end = std::clamp<int64_t>(end, begin, shape_[0]);
  const size_t row = nbytes() / static_cast<size_t>(shape_[0]);
  release_pages(static_cast<size_t>(begin) * row, static_cast<size_t>(end - begin) * row);
}

std::string Array::describe() const {
  return fmt::format("{}[{}]", dtype_name(dtype_), fmt::join(shape_, ", "));
}

void Array::check_type(DType want) const {
  DSP_CHECK(dtype_ == want, "array {} accessed as {}", describe(), dtype_name(want));
}

}  // namespace dsp
