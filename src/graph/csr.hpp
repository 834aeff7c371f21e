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
  // Optional int64 [num_edges], time of the edge indices[e] -> row: the edge exists from then on
  // (temporal sampling takes it for a seed of time T iff time < T).
  Array times;

  int64_t num_edges() const { return indices.defined() ? indices.dim(0) : 0; }
  DType index_dtype() const { return indices.dtype(); }
  bool has_weights() const { return weights.defined(); }
  bool has_times() const { return times.defined(); }
  const int64_t* rowptr() const { return indptr.data<int64_t>(); }
  int64_t degree(int64_t v) const { return rowptr()[v + 1] - rowptr()[v]; }
};

struct CsrBuildOptions {
  bool symmetrize = false;  // add v -> u for every u -> v (undirected input)
  // Drop repeated (u, v) pairs. The kept entry is the first listed; with times, the earliest (the
  // edge exists from its first time on), the first listed among equal times; it keeps its weight.
  bool dedup = true;
  bool remove_self_loops = false;  // drop u -> u
  // Index dtype of the result; kInt32 is chosen automatically when num_nodes < 2^31 unless
  // force_int64 is set.
  bool force_int64 = false;
};

// Builds the in-neighbour CSR of the edges src[i] -> dst[i], i < m. `weights` and `times` (the
// edges' times, carried as weights are: a reverse edge takes its edge's) may be null. Ids must lie
// in [0, num_nodes): the importers check them with file and line first; this re-checks and throws
// FormatError naming the edge index. Rows come out sorted by neighbour id.
template <class Id>
Csr build_in_csr(int64_t num_nodes, const Id* src, const Id* dst, int64_t m, const float* weights,
                 const CsrBuildOptions& opts = {}, const int64_t* times = nullptr);

// Full validation (graph/validate.hpp): shapes, monotone indptr, every row sorted without a
// repeated neighbour and in range, weights finite and >= 0, times int64 [num_edges]. FormatError
// prefixed with `what` (e.g. the indices file), or `weights_file` / `times_file` for faults of the
// weights / times when given.
void validate_csr(const Csr& g, const std::string& what, const std::string& weights_file = "",
                  const std::string& times_file = "");

}  // namespace dsp
