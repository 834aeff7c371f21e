#include "graph/csr.hpp"

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/parallel.hpp"
#include "graph/validate.hpp"

namespace dsp {
namespace {

// Fills ptr[0, n] with the row offsets of the in-CSR of the m edges src[i] -> dst[i] (both
// directions when symmetrize), checking every id is in [0, n). ptr must be zero.
template <class Id>
void count_rows(int64_t n, const Id* src, const Id* dst, int64_t m, bool symmetrize, int64_t* ptr) {
  for (int64_t i = 0; i < m; ++i) {
    int64_t s = src[i], d = dst[i];
    DSP_CHECK_FORMAT(s >= 0 && s < n && d >= 0 && d < n,
                     "edge {} ({} -> {}) has a node id outside [0, {})", i, s, d, n);
    ++ptr[d + 1];
    if (symmetrize) ++ptr[s + 1];
  }
  for (int64_t v = 0; v < n; ++v) ptr[v + 1] += ptr[v];
}

// The optional per-entry values of a CSR being built: weights and times (null: none).
struct EntryValues {
  float* w = nullptr;
  int64_t* t = nullptr;
  bool any() const { return w != nullptr || t != nullptr; }
};

// Places each edge's source (and weight and time, when given) in its destination's row, in edge
// order; with symmetrize also its destination in its source's row.
template <class Out, class Id>
void fill_rows(int64_t n, const Id* src, const Id* dst, int64_t m, const float* w, const int64_t* t,
               bool symmetrize, const int64_t* ptr, Out* idx, EntryValues out) {
  std::vector<int64_t> pos(ptr, ptr + n);
  auto place = [&](int64_t p, Id u, int64_t i) {
    idx[p] = static_cast<Out>(u);
    if (out.w) out.w[p] = w[i];
    if (out.t) out.t[p] = t[i];
  };
  for (int64_t i = 0; i < m; ++i) {
    place(pos[dst[i]]++, src[i], i);
    if (symmetrize) place(pos[src[i]]++, dst[i], i);
  }
}

// Sorts row v (len entries), dropping duplicates / self loops as o says; returns the row's new
// length.
template <class Out>
int64_t clean_row(Out* row, int64_t len, int64_t v, const CsrBuildOptions& o) {
  int64_t out = 0;
  std::sort(row, row + len);
  for (int64_t j = 0; j < len; ++j) {
    if (o.remove_self_loops && row[j] == static_cast<Out>(v)) continue;
    if (o.dedup && out > 0 && row[out - 1] == row[j]) continue;
    row[out++] = row[j];
  }
  return out;
}

// One entry of a row with values: neighbour, time (0 without times), weight.
template <class Out>
struct ValuedEntry {
  Out id;
  int64_t time;
  float weight;
};

// clean_row for a row with weights and/or times (vals at the row's first entry): a stable sort by
// (neighbour, time), so a repeated neighbour keeps its earliest entry, the first listed among
// equal times (without times: the first listed), with that entry's weight; tmp is scratch.
template <class Out>
int64_t clean_valued_row(Out* row, EntryValues vals, int64_t len, int64_t v,
                         const CsrBuildOptions& o, std::vector<ValuedEntry<Out>>& tmp) {
  tmp.resize(len);
  for (int64_t j = 0; j < len; ++j) {
    tmp[j] = {row[j], vals.t ? vals.t[j] : 0, vals.w ? vals.w[j] : 0.0f};
  }
  std::stable_sort(tmp.begin(), tmp.end(), [](const auto& a, const auto& b) {
    return a.id < b.id || (a.id == b.id && a.time < b.time);
  });
  int64_t out = 0;
  for (int64_t j = 0; j < len; ++j) {
    if (o.remove_self_loops && tmp[j].id == static_cast<Out>(v)) continue;
    if (o.dedup && out > 0 && row[out - 1] == tmp[j].id) continue;
    row[out] = tmp[j].id;
    if (vals.w) vals.w[out] = tmp[j].weight;
    if (vals.t) vals.t[out] = tmp[j].time;
    ++out;
  }
  return out;
}

// Compacts the rows to the left (in place: rows only move towards lower addresses), row v keeping
// its first kept[v] entries, and rewrites ptr to match; returns the number of entries.
template <class Out>
int64_t compact_rows(int64_t n, const std::vector<int64_t>& kept, int64_t* ptr, Out* idx,
                     EntryValues vals) {
  int64_t write = 0;
  for (int64_t v = 0; v < n; ++v) {
    int64_t read = ptr[v];
    if (write != read) {
      std::memmove(idx + write, idx + read, kept[v] * sizeof(Out));
      if (vals.w) std::memmove(vals.w + write, vals.w + read, kept[v] * sizeof(float));
      if (vals.t) std::memmove(vals.t + write, vals.t + read, kept[v] * sizeof(int64_t));
    }
    ptr[v] = write;
    write += kept[v];
  }
  ptr[n] = write;
  return write;
}

template <class Out, class Id>
Csr build_typed(int64_t n, const Id* src, const Id* dst, int64_t m, const float* w,
                const int64_t* t, const CsrBuildOptions& o) {
  int64_t entries = o.symmetrize ? 2 * m : m;
  Csr g;
  g.num_nodes = n;
  g.indptr = Array(DType::kInt64, {n + 1});
  int64_t* ptr = g.indptr.mutable_data<int64_t>();
  count_rows(n, src, dst, m, o.symmetrize, ptr);

  g.indices = Array(dtype_of<Out>(), {entries});
  Out* idx = g.indices.mutable_data<Out>();
  EntryValues vals;
  if (w) {
    g.weights = Array(DType::kFloat32, {entries});
    vals.w = g.weights.mutable_data<float>();
  }
  if (t) {
    g.times = Array(DType::kInt64, {entries});
    vals.t = g.times.mutable_data<int64_t>();
  }
  fill_rows(n, src, dst, m, w, t, o.symmetrize, ptr, idx, vals);

  // Sort each row, drop duplicates / self loops, and record the new row lengths.
  std::vector<int64_t> kept(n, 0);
  parallel_for(0, n, 4096, [&](int64_t b, int64_t e) {
    std::vector<ValuedEntry<Out>> tmp;
    for (int64_t v = b; v < e; ++v) {
      Out* row = idx + ptr[v];
      int64_t len = ptr[v + 1] - ptr[v];
      EntryValues rv{vals.w ? vals.w + ptr[v] : nullptr, vals.t ? vals.t + ptr[v] : nullptr};
      kept[v] = vals.any() ? clean_valued_row(row, rv, len, v, o, tmp) : clean_row(row, len, v, o);
    }
  });
  const int64_t write = compact_rows(n, kept, ptr, idx, vals);
  g.indices.shrink_first_dim(write);
  if (w) g.weights.shrink_first_dim(write);
  if (t) g.times.shrink_first_dim(write);
  return g;
}

}  // namespace

template <class Id>
Csr build_in_csr(int64_t num_nodes, const Id* src, const Id* dst, int64_t m, const float* weights,
                 const CsrBuildOptions& opts, const int64_t* times) {
  DSP_CHECK_ARG(num_nodes >= 0 && m >= 0, "build_in_csr: negative size");
  bool narrow = !opts.force_int64 && num_nodes < (int64_t{1} << 31);
  return narrow ? build_typed<int32_t>(num_nodes, src, dst, m, weights, times, opts)
                : build_typed<int64_t>(num_nodes, src, dst, m, weights, times, opts);
}
template Csr build_in_csr<int32_t>(int64_t, const int32_t*, const int32_t*, int64_t, const float*,
                                   const CsrBuildOptions&, const int64_t*);
template Csr build_in_csr<int64_t>(int64_t, const int64_t*, const int64_t*, int64_t, const float*,
                                   const CsrBuildOptions&, const int64_t*);

void validate_csr(const Csr& g, const std::string& what, const std::string& weights_file,
                  const std::string& times_file) {
  const std::string& weights_what = weights_file.empty() ? what : weights_file;
  DSP_CHECK_FORMAT(g.num_nodes >= 0, "{}: negative node count", what);
  DSP_CHECK_FORMAT(g.indptr.defined() && g.indptr.dtype() == DType::kInt64 &&
                       g.indptr.ndim() == 1 && g.indptr.dim(0) == g.num_nodes + 1,
                   "{}: indptr must be int64[{}], got {}", what, g.num_nodes + 1,
                   g.indptr.defined() ? g.indptr.describe() : "nothing");
  DSP_CHECK_FORMAT(g.indices.defined() && g.indices.ndim() == 1 &&
                       (g.indices.dtype() == DType::kInt32 || g.indices.dtype() == DType::kInt64),
                   "{}: indices must be a 1-d int32 or int64 array, got {}", what,
                   g.indices.defined() ? g.indices.describe() : "nothing");
  const int64_t e = g.num_edges();
  check_indptr(g.indptr, e, what);
  check_csr_rows(g.indptr, g.indices, g.num_nodes, 0, what);
  if (g.has_weights()) {
    DSP_CHECK_FORMAT(
        g.weights.dtype() == DType::kFloat32 && g.weights.ndim() == 1 && g.weights.dim(0) == e,
        "{}: edge weights must be float32[{}], got {}", weights_what, e, g.weights.describe());
    check_edge_weights(g.weights, g.indptr, 0, weights_what);
  }
  if (g.has_times()) {
    check_edge_times(g.times, e, times_file.empty() ? what : times_file);
  }
}

}  // namespace dsp
