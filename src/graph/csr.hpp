#pragma once
// Compressed sparse rows. Sampling follows messages backwards, so the graphs of dsp are stored in
// the in-neighbour orientation (CSC of the adjacency): row v lists every u with an edge u -> v.
#include <cstdint>

#include "graph/array.hpp"

namespace dsp {

struct Csr {
  int64_t num_nodes = 0;
  Array indptr;   // int64 [num_nodes + 1], indptr[0] == 0, non-decreasing
  Array indices;  // int32 or int64 [num_edges], in-neighbours, each row sorted ascending
  Array weights;  // optional float32 [num_edges], weight of the edge indices[e] -> row

  int64_t num_edges() const { return indices.defined() ? indices.dim(0) : 0; }
  DType index_dtype() const { return indices.dtype(); }
  bool has_weights() const { return weights.defined(); }
  const int64_t* rowptr() const { return indptr.data<int64_t>(); }
  int64_t degree(int64_t v) const { return rowptr()[v + 1] - rowptr()[v]; }
};

struct CsrBuildOptions {
  bool symmetrize = false;         // add v -> u for every u -> v (undirected input)
  bool dedup = true;               // drop repeated (u, v) pairs, keeping the first weight
  bool remove_self_loops = false;  // drop u -> u
  // Index dtype of the result; kInt32 is chosen automatically when num_nodes < 2^31 unless
  // force_int64 is set.
  bool force_int64 = false;
};

// Builds the in-neighbour CSR of the edges src[i] -> dst[i], i < m. `weights` may be null.
// Ids must lie in [0, num_nodes): the importers check them with file and line first; this
// re-checks and throws FormatError naming the edge index. Rows come out sorted by neighbour id.
template <class Id>
Csr build_in_csr(int64_t num_nodes, const Id* src, const Id* dst, int64_t m, const float* weights,
                 const CsrBuildOptions& opts = {});

// Full validation (graph/validate.hpp): shapes, monotone indptr, every row sorted without a
// repeated neighbour and in range, weights finite and >= 0. FormatError prefixed with `what`
// (e.g. the indices file), or `weights_file` for faults of the weights when given.
void validate_csr(const Csr& g, const std::string& what, const std::string& weights_file = "");

}  // namespace dsp
