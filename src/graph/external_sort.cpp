#include "graph/external_sort.hpp"

namespace dsp {
namespace {
constexpr size_t kFlush = size_t{1} << 20;
}

CsrFileWriter::CsrFileWriter(const std::string& dir, int64_t num_nodes, int64_t max_entries,
                             DType index_dtype, bool weighted)
    : n_(num_nodes),
      index_dtype_(index_dtype),
      indptr_(dir + "/indptr.npy", DType::kInt64, {num_nodes + 1}),
      indices_(dir + "/indices.npy", index_dtype, {max_entries}) {
  DSP_CHECK(index_dtype == DType::kInt32 || index_dtype == DType::kInt64,
            "CSR indices must be int32 or int64");
  if (weighted) {
    weights_ = std::make_unique<NpyWriter>(dir + "/edge_weight.npy", DType::kFloat32,
                                           std::vector<int64_t>{max_entries});
  }
  ptr_buf_.reserve(kFlush);
  idx_buf_.reserve(kFlush);
  ptr_buf_.push_back(0);
}

// Closes every row before `row` (rows are visited in increasing order).
void CsrFileWriter::end_rows_before(int64_t row) {
  if (rows_ >= row) return;
  max_degree_ = std::max(max_degree_, entries_ - row_start_);
  for (; rows_ < row; ++rows_) {
    ptr_buf_.push_back(entries_);
    if (ptr_buf_.size() == kFlush) flush();
  }
  row_start_ = entries_;
}

inline void CsrFileWriter::entry(uint64_t key) {
  const int64_t row = static_cast<int64_t>(key >> 32);
  DSP_CHECK(row < n_ && row >= rows_, "CSR writer: row {} out of order", row);
  end_rows_before(row);
  idx_buf_.push_back(static_cast<int64_t>(key & 0xffffffffu));
  ++entries_;
  if (idx_buf_.size() == kFlush) flush();
}

void CsrFileWriter::add(const uint64_t* keys, size_t n) {
  for (size_t i = 0; i < n; ++i) entry(keys[i]);
}

void CsrFileWriter::add(const WeightedKey* recs, size_t n) {
  DSP_CHECK(weights_ != nullptr, "CSR writer: weights given to an unweighted writer");
  for (size_t i = 0; i < n; ++i) {
    w_buf_.push_back(recs[i].weight);  // flushed with the indices (same count)
    entry(recs[i].key);
  }
}

void CsrFileWriter::flush() {
  indptr_.write(ptr_buf_.data(), ptr_buf_.size() * sizeof(int64_t));
  ptr_buf_.clear();
  if (index_dtype_ == DType::kInt64) {
    indices_.write(idx_buf_.data(), idx_buf_.size() * sizeof(int64_t));
  } else {
    std::vector<int32_t> narrow(idx_buf_.begin(), idx_buf_.end());
    indices_.write(narrow.data(), narrow.size() * sizeof(int32_t));
  }
  idx_buf_.clear();
  if (weights_) {
    weights_->write(w_buf_.data(), w_buf_.size() * sizeof(float));
    w_buf_.clear();
  }
}

void CsrFileWriter::finish() {
  end_rows_before(n_);
  flush();
  indptr_.close();
  indices_.close_with_first_dim(entries_);
  if (weights_) weights_->close_with_first_dim(entries_);
}

}  // namespace dsp
