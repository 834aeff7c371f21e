#pragma once
// Small building blocks shared by the BFS-based partitioners and seed orders: a pseudo-random
// visiting order of [0, n) in O(1) memory, and typed access to a CSR's index array.
#include <cstdint>
#include <numeric>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "graph/csr.hpp"

namespace dsp {

// i -> (offset + i * stride) mod n with stride coprime to n: a permutation of [0, n) drawn from
// `key`, without the 8n bytes of a stored permutation (the BFS partitioners draw their random
// roots from it). Not uniform over all permutations; uniform in where it starts and how it strides.
class ScanOrder {
 public:
  ScanOrder(int64_t n, uint64_t key) : n_(static_cast<uint64_t>(n)) {
    if (n_ <= 1) return;
    RngStream s(key, 0, 0x7363'616e);  // "scan"
    offset_ = s.uniform_int(n_);
    stride_ = 1 + s.uniform_int(n_ - 1);
    while (std::gcd(stride_, n_) != 1) stride_ = stride_ % (n_ - 1) + 1;
  }
  int64_t size() const { return static_cast<int64_t>(n_); }
  int64_t operator[](int64_t i) const {
    if (n_ <= 1) return 0;
    unsigned __int128 x = static_cast<unsigned __int128>(static_cast<uint64_t>(i)) * stride_;
    return static_cast<int64_t>((x + offset_) % n_);
  }

 private:
  uint64_t n_, offset_ = 0, stride_ = 1;
};

// Calls f(indices) with the typed (int32 or int64) index array of `g`; a graph without entries
// gets a null int64 pointer.
template <class F>
decltype(auto) with_indices(const Csr& g, F&& f) {
  if (!g.indices.defined() || g.num_edges() == 0) return f(static_cast<const int64_t*>(nullptr));
  return dispatch_index(g.index_dtype(), [&](auto tag) {
    using T = decltype(tag);
    return f(g.indices.data<T>());
  });
}

}  // namespace dsp
