#include "graph/array.hpp"

#include <fmt/ranges.h>

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

std::string Array::describe() const {
  return fmt::format("{}[{}]", dtype_name(dtype_), fmt::join(shape_, ", "));
}

void Array::check_type(DType want) const {
  DSP_CHECK(dtype_ == want, "array {} accessed as {}", describe(), dtype_name(want));
}

}  // namespace dsp
