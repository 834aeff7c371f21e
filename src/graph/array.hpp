#pragma once
// A typed, C-ordered n-d array that either owns its bytes or views a read-only memory mapping.
// This is how .npy files are held in memory: loading a dataset maps its files instead of copying.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"

namespace dsp {

class Array {
 public:
  Array() = default;
  // Zero-initialized owned array.
  Array(DType dtype, std::vector<int64_t> shape);
  // A view over `data`, kept alive by `keepalive` (e.g. a shared MappedFile). Read-only, and
  // `data` must lie in a read-only file mapping: release_pages() drops its pages.
  Array(DType dtype, std::vector<int64_t> shape, const void* data, std::shared_ptr<const void> keepalive);

  template <class T>
  static Array from_vector(std::vector<T> v, std::vector<int64_t> shape = {}) {
    if (shape.empty()) shape = {static_cast<int64_t>(v.size())};
    Array a;
    a.dtype_ = dtype_of<T>();
    a.shape_ = std::move(shape);
    DSP_CHECK(a.numel() == static_cast<int64_t>(v.size()), "Array::from_vector: shape mismatch");
    auto owner = std::make_shared<std::vector<T>>(std::move(v));
    a.data_ = owner->data();
    a.mutable_ = true;
    a.keepalive_ = std::shared_ptr<const void>(owner, owner.get());
    return a;
  }

  bool defined() const { return !shape_.empty(); }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_.at(i); }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool is_mapped() const { return !mutable_ && defined(); }

  const void* raw() const { return data_; }
  void* raw_mutable();  // throws if this is a read-only view

  template <class T>
  const T* data() const {
    check_type(dtype_of<T>());
    return static_cast<const T*>(data_);
  }
  template <class T>
  T* mutable_data() {
    check_type(dtype_of<T>());
    return static_cast<T*>(raw_mutable());
  }
  // Element i of a 1-d integer array (int32 or int64), widened to int64.
  int64_t int_at(int64_t i) const {
    return dtype_ == DType::kInt32 ? static_cast<const int32_t*>(data_)[i]
                                   : static_cast<const int64_t*>(data_)[i];
  }
  // Shrinks the first dimension in place (keeps the buffer): for arrays built with an upper bound.
  void shrink_first_dim(int64_t n) {
    DSP_CHECK(!shape_.empty() && n >= 0 && n <= shape_[0], "shrink_first_dim: bad size {}", n);
    shape_[0] = n;
  }
  // Drops this process's resident pages of a mapped array, whole, bytes [offset, offset + bytes)
  // or rows [begin, end) of the first dimension (release_mapped_pages: whole pages inside the
  // range; ranges are clipped to the array). The data stays in the file and is mapped again when
  // read. A no-op for an owned array (anonymous memory, which it would zero). For code that reads
  // a large mapped dataset piece by piece: what it has read stops counting in its resident set.
  void release_pages() const { release_pages(0, nbytes()); }
  void release_pages(size_t offset, size_t bytes) const;
  void release_rows(int64_t begin, int64_t end) const;
  // A human-readable "int64[2708]" / "float32[2708, 1433]".
  std::string describe() const;

 private:
  void check_type(DType want) const;
  DType dtype_ = DType::kUInt8;
  std::vector<int64_t> shape_;
  void* data_ = nullptr;
  bool mutable_ = false;
  std::shared_ptr<const void> keepalive_;
};

// Calls f(T{}) with T the C++ type of an integer index dtype (int32 or int64).
template <class F>
decltype(auto) dispatch_index(DType t, F&& f) {
  if (t == DType::kInt32) return f(int32_t{});
  DSP_CHECK(t == DType::kInt64, "expected an int32 or int64 index array, got {}", dtype_name(t));
  return f(int64_t{});
}

}  // namespace dsp
