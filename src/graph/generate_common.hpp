#pragma once
// What the generators' files share (generate.cpp: R-MAT and the writing; generate_community.cpp:
// the community graph, timed or not): the keys of their streams, filling feature and label rows,
// splits, the dataset's meta, drawing edges into a CSR or an external sort, and the out-of-core
// writer's steps. Private to src/graph.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <numeric>
#include <tuple>
#include <vector>

#include "core/disk.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/half.hpp"
#include "core/logging.hpp"
#include "core/memory.hpp"
#include "core/parallel.hpp"
#include "core/rng.hpp"
#include "core/timer.hpp"
#include "graph/external_sort.hpp"
#include "graph/generate.hpp"
#include "graph/generate_detail.hpp"
#include "graph/npy.hpp"

namespace dsp::gen {

using detail::normals;
using detail::random_permutation;
using detail::split_ids;
using detail::SplitSizes;

// Keys are rng_key(seed, kDomain, generator, purpose): a generator never shares a stream with
// sampling (whose keys use small epoch numbers) or with the other generator.
constexpr uint64_t kDomain = 0x67656e6572617465ULL;  // "generate"
constexpr uint64_t kGenRmat = 1, kGenCommunity = 2;
enum Purpose : uint64_t {
  kEdges = 1,
  kPermutation,
  kFeatures,
  kLabels,
  kSplits,
  kThetas,
  kCentroids,
  kTemporalNodes,
  kLabelSets,
};

inline uint64_t key_for(uint64_t seed, uint64_t generator, uint64_t purpose) {
  return rng_key(seed, kDomain, generator, purpose);
}

constexpr int64_t kEdgeGrain = int64_t{1} << 15;
constexpr int64_t kNodeGrain = int64_t{1} << 12;
// Out of core: the smallest sort buffer, the rows of features/labels written per step, and room
// for what the estimates do not itemise (thread stacks, allocator slack, the binary).
constexpr uint64_t kMinSortBytes = uint64_t{1} << 16;
constexpr uint64_t kMinNodeChunkBytes = uint64_t{1} << 20;
constexpr uint64_t kMaxNodeChunkBytes = uint64_t{64} << 20;
constexpr uint64_t kSlackBytes = uint64_t{64} << 20;
// The most runs a budget-sized sort buffer may spill (a buffer of 1/4096 of the entries at least).
constexpr uint64_t kMaxSortRuns = 4096;
inline uint64_t min_sort_bytes(uint64_t entries) {
  return std::max(kMinSortBytes, 8 * entries / kMaxSortRuns);
}

// Fills rows [b, e) of `out` (row-major, row b first) with fill(v, float* row), converted to
// `dtype` (float32 or float16), in parallel.
template <class Fill>
void fill_feature_rows(int64_t b, int64_t e, int64_t dim, DType dtype, const Fill& fill,
                       void* out) {
  if (dtype == DType::kFloat32) {
    float* x = static_cast<float*>(out);
    parallel_for(b, e, kNodeGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t v = lo; v < hi; ++v) fill(v, x + (v - b) * dim);
    });
  } else {
    uint16_t* x = static_cast<uint16_t*>(out);
    parallel_for(b, e, kNodeGrain, [&](int64_t lo, int64_t hi) {
      std::vector<float> row(dim);
      for (int64_t v = lo; v < hi; ++v) {
        fill(v, row.data());
        for (int64_t j = 0; j < dim; ++j) x[(v - b) * dim + j] = float_to_half(row[j]);
      }
    });
  }
}

template <class Label>
void fill_labels(int64_t b, int64_t e, const Label& label, int64_t* out) {
  parallel_for(b, e, kNodeGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t v = lo; v < hi; ++v) out[v - b] = label(v);
  });
}

// Features [n, dim] of `dtype` in memory.
template <class Fill>
Array make_features(int64_t n, int64_t dim, DType dtype, const Fill& fill) {
  Array out(dtype, {n, dim});
  fill_feature_rows(0, n, dim, dtype, fill, out.raw_mutable());
  return out;
}

template <class Label>
Array make_labels(int64_t n, const Label& label) {
  Array out(DType::kInt64, {n});
  fill_labels(0, n, label, out.mutable_data<int64_t>());
  return out;
}

// Sizes of the three splits of n nodes.
// The split sizes of a generator's options (the one place both paths, in memory and out of
// core, take them from).
template <class Options>
SplitSizes split_sizes(const Options& o) {
  return detail::split_sizes(o.num_nodes, o.train_frac, o.valid_frac, o.test_frac);
}

// Random train/valid/test split of [0, n) with the given sizes; each split sorted ascending.
inline void make_splits(Dataset& ds, int64_t n, const SplitSizes& s, uint64_t key) {
  std::vector<std::vector<int64_t>> ids = split_ids(n, s, key);
  ds.train_idx = Array::from_vector(std::move(ids[0]));
  ds.valid_idx = Array::from_vector(std::move(ids[1]));
  ds.test_idx = Array::from_vector(std::move(ids[2]));
}

// Each fraction in [0, 1] and their sum at most 1 (test unset: the rest, so not counted).
inline void check_splits(double train_frac, double valid_frac,
                         const std::optional<double>& test_frac) {
  DSP_CHECK_ARG(train_frac >= 0 && train_frac <= 1, "train fraction {} is outside [0, 1]",
                train_frac);
  DSP_CHECK_ARG(valid_frac >= 0 && valid_frac <= 1, "valid fraction {} is outside [0, 1]",
                valid_frac);
  if (!test_frac) {
    DSP_CHECK_ARG(train_frac + valid_frac <= 1 + 1e-12,
                  "train + valid fractions ({} + {}) exceed 1", train_frac, valid_frac);
    return;
  }
  const double test = *test_frac;
  DSP_CHECK_ARG(test >= 0 && test <= 1, "test fraction {} is outside [0, 1]", test);
  DSP_CHECK_ARG(train_frac + valid_frac + test <= 1 + 1e-12,
                "train + valid + test fractions ({} + {} + {}) exceed 1", train_frac, valid_frac,
                test);
}

inline void check_common(int64_t num_nodes, int64_t num_edges, int64_t feature_dim,
                         DType feature_dtype, int64_t num_classes) {
  DSP_CHECK_ARG(num_nodes > 0, "the number of nodes must be positive, got {}", num_nodes);
  DSP_CHECK_ARG(num_edges >= 0, "the number of edges must not be negative, got {}", num_edges);
  DSP_CHECK_ARG(feature_dim >= 0, "the feature dimension must not be negative, got {}",
                feature_dim);
  DSP_CHECK_ARG(feature_dtype == DType::kFloat32 || feature_dtype == DType::kFloat16,
                "features must be float32 or float16, got {}", dtype_name(feature_dtype));
  DSP_CHECK_ARG(num_classes >= 0 && num_classes <= std::numeric_limits<int32_t>::max(),
                "the number of classes must be in [0, 2^31), got {}", num_classes);
}

// dataset.json of a generated graph; feature_dtype stays the default when there are no features.
inline DatasetMeta generated_meta(const std::string& name, bool directed, int64_t n,
                                  int64_t entries, DType index_dtype, int64_t feature_dim,
                                  DType feature_dtype, int64_t num_classes,
                                  const SplitSizes& splits) {
  DatasetMeta m;
  m.name = name;
  m.num_nodes = n;
  m.num_edges = entries;
  m.directed = directed;
  m.index_dtype = index_dtype;
  m.feature_dim = feature_dim;
  if (feature_dim > 0) m.feature_dtype = feature_dtype;
  m.has_weights = false;
  m.num_classes = num_classes;
  m.num_train = splits.train;
  m.num_valid = splits.valid;
  m.num_test = splits.test;
  return m;
}

inline DType index_dtype_for(int64_t n) {
  return n < (int64_t{1} << 31) ? DType::kInt32 : DType::kInt64;
}
inline int64_t id_bytes(int64_t n) { return n < (int64_t{1} << 31) ? 4 : 8; }

// ---------------------------------------------------------------- drawing edges

// Draws edges [0, m) with draw(i, u, v) and builds the CSR in memory.
template <class Id, class Draw>
Csr draw_csr(int64_t n, int64_t m, bool symmetrize, const Draw& draw) {
  Stopwatch sw;
  std::vector<Id> src(m), dst(m);
  parallel_for(0, m, kEdgeGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      int64_t u, v;
      draw(i, u, v);
      src[i] = static_cast<Id>(u);
      dst[i] = static_cast<Id>(v);
    }
  });
  DSP_DEBUG("generate", "drew {} edges in {:.2f} s", m, sw.seconds());
  sw.reset();
  CsrBuildOptions co;
  co.symmetrize = symmetrize;
  co.dedup = true;
  co.remove_self_loops = true;
  Csr g = build_in_csr<Id>(n, src.data(), dst.data(), m, nullptr, co);
  DSP_DEBUG("generate", "built the CSR ({} entries) in {:.2f} s", g.num_edges(), sw.seconds());
  return g;
}

// Draws edges [0, m) into an external sort as in-neighbour keys, self loops dropped: the same
// entries draw_csr keeps, before repeats are removed.
template <class Draw>
void draw_sorted(ExternalSorter<uint64_t>& sorter, int64_t m, bool symmetrize, const Draw& draw) {
  const int64_t per = symmetrize ? 2 : 1;
  const int64_t chunk = static_cast<int64_t>(sorter.capacity()) / per;
  for (int64_t b0 = 0; b0 < m; b0 += chunk) {
    const int64_t e0 = std::min(m, b0 + chunk);
    uint64_t* out = sorter.append_space(static_cast<size_t>((e0 - b0) * per));
    parallel_for(b0, e0, kEdgeGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        int64_t u, v;
        draw(i, u, v);
        uint64_t* slot = out + (i - b0) * per;
        slot[0] = u == v ? kNoEdge : edge_key(v, u);
        if (symmetrize) slot[1] = u == v ? kNoEdge : edge_key(u, v);
      }
    });
    sorter.appended(static_cast<size_t>((e0 - b0) * per));
  }
}

// meta.extra with the test fraction when one was given (none: the rest, and dataset.json as it
// was before the option existed).
inline nlohmann::json with_test_frac(nlohmann::json extra, const std::optional<double>& test_frac) {
  if (test_frac) extra["test_frac"] = *test_frac;
  return extra;
}

// ---------------------------------------------------------------- out of core

// Streams features and labels into the staged directory, `chunk_bytes` of rows at a time.
template <class Fill, class Label>
void write_node_files(const StagedDir& dir, int64_t n, int64_t dim, DType dtype, const Fill& fill,
                      int64_t classes, const Label& label, uint64_t chunk_bytes) {
  if (dim > 0) {
    const int64_t row_bytes = dim * static_cast<int64_t>(dtype_size(dtype));
    const int64_t rows = std::max<int64_t>(1, static_cast<int64_t>(chunk_bytes) / row_bytes);
    std::vector<unsigned char> buf(static_cast<size_t>(std::min(rows, n) * row_bytes));
    NpyWriter w(dir.file("features.npy"), dtype, {n, dim});
    for (int64_t b = 0; b < n; b += rows) {
      const int64_t e = std::min(n, b + rows);
      fill_feature_rows(b, e, dim, dtype, fill, buf.data());
      w.write(buf.data(), static_cast<size_t>((e - b) * row_bytes));
    }
    w.close();
  }
  if (classes > 0) {
    const int64_t rows = std::max<int64_t>(1, static_cast<int64_t>(chunk_bytes / 8));
    std::vector<int64_t> buf(static_cast<size_t>(std::min(rows, n)));
    NpyWriter w(dir.file("labels.npy"), DType::kInt64, {n});
    for (int64_t b = 0; b < n; b += rows) {
      const int64_t e = std::min(n, b + rows);
      fill_labels(b, e, label, buf.data());
      w.write(buf.data(), static_cast<size_t>(e - b) * 8);
    }
    w.close();
  }
}

inline void write_splits(const StagedDir& dir, int64_t n, const SplitSizes& sizes, uint64_t key) {
  Dataset ds;
  make_splits(ds, n, sizes, key);
  save_npy(dir.file("train_idx.npy"), ds.train_idx);
  save_npy(dir.file("valid_idx.npy"), ds.valid_idx);
  save_npy(dir.file("test_idx.npy"), ds.test_idx);
}

// Peak disk of the out-of-core path (an upper bound: repeats are not dropped yet): the runs
// (8 bytes per drawn entry) beside the CSR files while merging; the runs are gone before the
// node files are written.
inline uint64_t peak_disk_bytes(int64_t n, int64_t max_entries, int64_t dim, DType dtype,
                                bool labels) {
  const uint64_t graph = static_cast<uint64_t>(8 * (n + 1) + max_entries * id_bytes(n));
  const uint64_t nodes = static_cast<uint64_t>(n * dim * static_cast<int64_t>(dtype_size(dtype)) +
                                               (labels ? 8 * n : 0) + 8 * n);
  return std::max(graph + 8 * static_cast<uint64_t>(max_entries), graph + nodes);
}

// Refuses before any work when the runs or the output cannot fit on OUT's disk.
inline void check_generate_disk(const std::string& out, uint64_t needed) {
  check_disk("dsp generate (out of core: sorted runs, then the output)", out, needed,
             "lower --edges or --features, or write elsewhere");
}

// Sort buffer of the out-of-core path: what the budget leaves beside what the process holds
// already (the draw's tables are built by now, so they are in its resident set), or the explicit
// cap; no more than the entries drawn (records are 8 bytes). When the budget leaves a buffer that
// would spill more than kMaxSortRuns runs (each a file, merged kMaxFanIn at a time), the command
// stops with the one-line refusal instead of writing thousands of tiny runs.
inline size_t sort_capacity(const GenerateWriteOptions& w, int64_t max_entries) {
  const uint64_t left = memory_left(w.memory_budget);
  uint64_t bytes = left > kSlackBytes ? left - kSlackBytes : 0;
  if (w.sort_buffer_bytes > 0) bytes = std::min(bytes, w.sort_buffer_bytes);
  const uint64_t need = min_sort_bytes(static_cast<uint64_t>(max_entries));
  // An explicit buffer below `need` is the tests' way of forcing many runs; the budget's is not.
  if (bytes < need && (w.sort_buffer_bytes == 0 || w.sort_buffer_bytes >= need)) {
    check_memory(
        "dsp generate (out of core)", need + kSlackBytes, w.memory_budget,
        fmt::format("raise --memory-budget: the external sort needs a buffer of {} at least "
                    "(the draw's tables take the rest)",
                    format_bytes(need)));
    bytes = need;  // the resident set shrank since memory_left: the budget holds it now
  }
  bytes = std::max(bytes, kMinSortBytes);
  return static_cast<size_t>(std::min<uint64_t>(bytes / 8, static_cast<uint64_t>(max_entries) + 1));
}

// Rows of features and labels are produced and written this many bytes at a time.
inline uint64_t node_chunk_bytes(uint64_t budget) {
  return std::clamp(budget / 16, kMinNodeChunkBytes, kMaxNodeChunkBytes);
}

// Merges the sorted entries into indptr.npy / indices.npy; on_block(keys, count) sees each block.
template <class OnBlock>
std::pair<int64_t, int64_t> merge_to_csr(ExternalSorter<uint64_t>& sorter, const StagedDir& dir,
                                         int64_t n, int64_t max_entries, const OnBlock& on_block) {
  CsrFileWriter w(dir.tmp_path(), n, max_entries, index_dtype_for(n), /*weighted=*/false);
  sorter.merge([&](const uint64_t* keys, size_t count) {
    w.add(keys, count);
    on_block(keys, count);
  });
  w.finish();
  return {w.entries(), w.max_degree()};
}

inline GenerateResult finish_out_of_core(StagedDir& staged, DatasetMeta meta, int64_t max_degree,
                                         const ExternalSorter<uint64_t>& sorter,
                                         const Stopwatch& sw) {
  write_file_atomic(staged.file("dataset.json"), meta.to_json().dump(2) + "\n");
  // Not validated again: reading it back would map every file into this process (its peak RSS
  // would then be the dataset's size); the files equal the in-memory path's, which write_dataset
  // validates (tests/graph/test_out_of_core.cpp).
  staged.commit();
  GenerateResult r;
  r.meta = std::move(meta);
  r.max_in_degree = max_degree;
  r.out_of_core = true;
  r.sort_runs = sorter.runs();
  r.spilled_bytes = sorter.spilled_bytes();
  r.generate_s = sw.seconds();
  return r;
}

// In memory: generate, then write_dataset.
inline GenerateResult write_in_memory(Dataset ds, const std::string& dir, bool overwrite,
                                      double generate_s) {
  Stopwatch sw;
  write_dataset(ds, dir, overwrite);
  GenerateResult r;
  r.generate_s = generate_s;
  r.write_s = sw.seconds();
  for (int64_t v = 0; v < ds.graph.num_nodes; ++v) {
    r.max_in_degree = std::max(r.max_in_degree, ds.graph.degree(v));
  }
  r.meta = std::move(ds.meta);
  return r;
}

// Picks the path: in memory when its estimate fits the budget (and it is not forced out of
// core), else out of core when that fits, else the one-line refusal.
inline bool choose_out_of_core(const MemoryEstimate& est, int64_t n,
                               const GenerateWriteOptions& w) {
  if (!w.force_out_of_core && est.in_memory <= memory_left(w.memory_budget)) return false;
  DSP_CHECK_ARG(n <= kMaxExternalNodes, "out-of-core generation supports up to {} nodes, got {}",
                kMaxExternalNodes, n);
  check_memory("dsp generate (out of core)", est.out_of_core, w.memory_budget,
               "lower --nodes or raise --memory-budget");
  return true;
}

}  // namespace dsp::gen
