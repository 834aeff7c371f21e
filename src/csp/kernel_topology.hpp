#pragma once
// A rank's adjacency in a device sampler backend's executor memory (csp/kernel_backend.hpp):
// indptr, and cum and weights when biased, times when temporal; the neighbour array too if it fits
// `index_budget` bytes. Otherwise the array is read where it is through map_host (UVA on a GPU),
// and the hottest rows (LocalTopology::hot_nodes first, then ascending ids) that fit the budget
// are copied to executor memory: DSP's adjacency position list, row_loc[r] = the row's offset
// there, or -1 for a row read from the host.
#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "core/exec_memory.hpp"
#include "csp/backend.hpp"

namespace dsp {

template <class Exec>
class DeviceTopology {
 public:
  DeviceTopology(Exec& ex, const LocalTopology& topo, bool biased, bool temporal,
                 size_t index_budget)
      : host(topo),
        biased_(biased),
        indptr_(ex.buffer()),
        indices_buf_(ex.buffer()),
        cum_(ex.buffer()),
        weights_(ex.buffer()),
        hot_indices_(ex.buffer()),
        row_loc_(ex.buffer()),
        times_(ex.buffer()) {
    DSP_CHECK_ARG(topo.num_edges < (int64_t{1} << 31) || !topo.idx32,
                  "sampler backend: int32 neighbour ids with more than 2^31 entries");
    upload(ex, indptr_, topo.indptr, topo.num_rows + 1);
    const size_t ib = topo.indices_bytes();
    if (ib <= index_budget) {
      indices_ = upload(ex, indices_buf_, static_cast<const unsigned char*>(topo.indices),
                        static_cast<int64_t>(ib));
    } else {
      indices_ = ex.map_host(topo.indices, ib, topo.indices_mapped, indices_reg_);
      indices_on_host_ = true;
      if (index_budget > 0) split_rows(ex, index_budget);
    }
    if (biased) {
      upload(ex, cum_, topo.cum, topo.num_edges);
      upload(ex, weights_, topo.weights, topo.num_edges);
    }
    if (temporal) upload(ex, times_, topo.times, topo.num_edges);
  }

  const LocalTopology host;  // the host arrays it was made from
  bool indices_on_host() const { return indices_on_host_; }
  int64_t hot_rows() const { return hot_rows_; }
  const int64_t* indptr() const { return static_cast<const int64_t*>(indptr_.data()); }
  template <class Id>
  const Id* indices() const {
    return static_cast<const Id*>(indices_);
  }
  // The position list (null when every row is read where the neighbour array is).
  template <class Id>
  const Id* hot_indices() const {
    return hot_rows_ ? static_cast<const Id*>(hot_indices_.data()) : nullptr;
  }
  const int64_t* row_loc() const {
    return hot_rows_ ? static_cast<const int64_t*>(row_loc_.data()) : nullptr;
  }
  const double* cum() const { return biased_ ? static_cast<const double*>(cum_.data()) : nullptr; }
  const float* weights() const {
    return biased_ ? static_cast<const float*>(weights_.data()) : nullptr;
  }
  const int64_t* times() const { return static_cast<const int64_t*>(times_.data()); }

 private:
  using Buffer = typename Exec::Buffer;
  // The adjacency position list: rows in hotness order while their entries fit the budget.
  void split_rows(Exec& ex, size_t budget) {
    const LocalTopology& t = host;
    const size_t elem = t.idx32 ? 4 : 8;
    std::vector<int64_t> loc(static_cast<size_t>(t.num_rows), -1);
    std::vector<unsigned char> hot;
    auto take = [&](int64_t r) {
      if (r < 0 || r >= t.num_rows || loc[r] >= 0) return true;
      const int64_t deg = t.indptr[r + 1] - t.indptr[r];
      if (hot.size() + deg * elem > budget) return false;
      loc[r] = static_cast<int64_t>(hot.size() / elem);
      const auto* src = static_cast<const unsigned char*>(t.indices) + t.indptr[r] * elem;
      hot.insert(hot.end(), src, src + deg * elem);
      return true;
    };
    bool room = true;
    for (int64_t k = 0; k < t.num_hot && room; ++k) room = take(t.hot_nodes[k] - t.row_base);
    for (int64_t r = 0; r < t.num_rows && room; ++r) room = take(r);
    for (int64_t r = 0; r < t.num_rows; ++r) hot_rows_ += loc[r] >= 0;
    upload(ex, hot_indices_, hot.data(), static_cast<int64_t>(hot.size()));
    upload(ex, row_loc_, loc.data(), static_cast<int64_t>(loc.size()));
  }

  bool biased_;
  bool indices_on_host_ = false;
  int64_t hot_rows_ = 0;
  // Every buffer is the executor's (its stream orders their growths; they are counted).
  Buffer indptr_, indices_buf_, cum_, weights_, hot_indices_, row_loc_, times_;
  typename Exec::Registration indices_reg_;
  const void* indices_ = nullptr;
};

}  // namespace dsp
