// Writing and loading partition directories (see partition.hpp for the layout).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <optional>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/hash.hpp"
#include "core/logging.hpp"
#include "core/parallel.hpp"
#include "core/timer.hpp"
#include "graph/npy.hpp"
#include "graph/validate.hpp"
#include "layout/partition/graph_scan.hpp"
#include "layout/partition/partition.hpp"
#include "layout/partition/partition_detail.hpp"
#include "layout/partition/partition_dir.hpp"
#include "layout/partition/partition_hetero.hpp"
#include "layout/partition/hotness.hpp"

namespace dsp {
namespace {

std::string part_dir(const std::string& root, int p) { return fmt::format("{}/part{}", root, p); }

Array map_ids_sorted(const Array& ids, const std::vector<int64_t>& old2new) {
  if (!ids.defined()) return {};
  std::vector<int64_t> out(ids.dim(0));
  for (int64_t i = 0; i < ids.dim(0); ++i) out[i] = old2new[ids.int_at(i)];
  std::sort(out.begin(), out.end());
  return Array::from_vector(std::move(out));
}

using Pair = std::pair<int64_t, int64_t>;

// An int64 [E, 2] array of pairs in new ids, rows in the order of `pairs` (undefined stays so).
Array map_pairs(const Array& pairs, const std::vector<int64_t>& old2new) {
  if (!pairs.defined()) return {};
  const int64_t* p = pairs.data<int64_t>();
  std::vector<int64_t> out(static_cast<size_t>(pairs.numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = old2new[p[i]];
  return Array::from_vector(std::move(out), {pairs.dim(0), 2});
}

// The training edges in new ids sorted by (src, dst): a part's are one contiguous range.
std::vector<Pair> sorted_link_train(const Dataset& ds, const std::vector<int64_t>& old2new) {
  std::vector<Pair> out;
  if (!ds.link_train.defined()) return out;
  const int64_t* p = ds.link_train.data<int64_t>();
  out.reserve(static_cast<size_t>(ds.link_train.dim(0)));
  for (int64_t i = 0; i < ds.link_train.dim(0); ++i) {
    out.emplace_back(old2new[p[2 * i]], old2new[p[2 * i + 1]]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Rows of `src` in the order `order` (row i of the result is src row order[i]), streamed to a
// .npy file in chunks so the renumbered copy never sits in memory whole. A mapped `src` keeps only
// the span of source rows of one chunk mapped: within a part new ids follow old ones, so the
// chunks of a part read the source forward, and each chunk's span is released once written.
void write_gathered_rows(const std::string& path, const Array& src,
                         const std::vector<int64_t>& order) {
  const int64_t n = static_cast<int64_t>(order.size());
  const size_t row_bytes =
      src.ndim() > 1 ? src.nbytes() / std::max<int64_t>(src.dim(0), 1) : dtype_size(src.dtype());
  NpyWriter w(path, src.dtype(), src.shape());
  const int64_t chunk = std::max<int64_t>(1, (8 << 20) / std::max<size_t>(row_bytes, 1));
  std::vector<unsigned char> buf(static_cast<size_t>(std::min(chunk, n)) * row_bytes);
  const auto* base = static_cast<const unsigned char*>(src.raw());
  for (int64_t b = 0; b < n; b += chunk) {
    int64_t e = std::min(n, b + chunk);
    parallel_for(b, e, 1024, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        std::memcpy(buf.data() + (i - b) * row_bytes, base + order[i] * row_bytes, row_bytes);
      }
    });
    w.write(buf.data(), static_cast<size_t>(e - b) * row_bytes);
    const auto [lo, hi] = std::minmax_element(order.begin() + b, order.begin() + e);
    src.release_rows(*lo, *hi + 1);
  }
  w.close();
  src.release_pages();
}

// Drops the pages of g's rows [lo, hi) (old ids) once a chunk of the writer has read them.
void release_rows(const Csr& g, int64_t lo, int64_t hi) {
  const int64_t* p = g.rowptr();
  const int64_t eb = p[lo], ee = p[hi];
  g.indices.release_rows(eb, ee);
  g.weights.release_rows(eb, ee);
  g.times.release_rows(eb, ee);
  g.indptr.release_rows(lo, hi + 1);
}

// The in-neighbour rows of new ids [b, e) into idx (their weights into ow when weighted, their
// times into ot when timed): entries renumbered, each row sorted, weights and times following
// their entries; ptr[r - b] is row r's offset in idx.
template <class T>
void fill_rows(const Csr& g, const std::vector<int64_t>& old2new,
               const std::vector<int64_t>& new2old, int64_t b, int64_t e,
               const std::vector<int64_t>& ptr, T* idx, float* ow, int64_t* ot) {
  const int64_t* p = g.rowptr();
  const T* src = g.indices.data<T>();
  const float* w = g.has_weights() ? g.weights.data<float>() : nullptr;
  const int64_t* t = g.has_times() ? g.times.data<int64_t>() : nullptr;
  parallel_for(0, e - b, 1024, [&](int64_t lo, int64_t hi) {
    std::vector<std::pair<T, int64_t>> tmp;  // (new id, source entry)
    for (int64_t r = lo; r < hi; ++r) {
      int64_t v = new2old[b + r], len = ptr[r + 1] - ptr[r];
      T* row = idx + ptr[r];
      if (!w && !t) {
        for (int64_t j = 0; j < len; ++j) row[j] = static_cast<T>(old2new[src[p[v] + j]]);
        std::sort(row, row + len);
        continue;
      }
      tmp.resize(len);
      for (int64_t j = 0; j < len; ++j) tmp[j] = {static_cast<T>(old2new[src[p[v] + j]]), p[v] + j};
      std::sort(tmp.begin(), tmp.end(),
                [](const auto& x, const auto& y) { return x.first < y.first; });
      for (int64_t j = 0; j < len; ++j) {
        row[j] = tmp[j].first;
        if (w) ow[ptr[r] + j] = w[tmp[j].second];
        if (t) ot[ptr[r] + j] = t[tmp[j].second];
      }
    }
  });
}

// The in-neighbour rows of new ids [begin, end) into <pd>/indptr.npy, indices.npy[,
// edge_weight.npy][, edge_time.npy], entries renumbered and each row sorted, in one pass over the
// (mapped) source rows: rows are built chunk_bytes at a time (row pointers and entries; a row
// longer than that alone) and appended to the files, so a part of billions of entries never sits in
// memory whole. chunk_bytes <= 0 builds the whole part at once. Returns the part's entry count. The
// source rows a chunk read (the span from its lowest to its highest old id: within a part new ids
// follow old ones, so the chunks read the source forward) are released after it, so a mapped source
// holds about one chunk's span resident, not the part's rows.
template <class T>
int64_t write_patch(const Csr& g, const std::vector<int64_t>& old2new,
                    const std::vector<int64_t>& new2old, int64_t begin, int64_t end,
                    const std::string& pd, int64_t chunk_bytes) {
  int64_t entries = 0;
  for (int64_t r = begin; r < end; ++r) entries += g.degree(new2old[r]);
  g.indptr.release_pages();
  const bool weighted = g.has_weights(), timed = g.has_times();
  const int64_t entry_bytes =
      sizeof(T) + (weighted ? sizeof(float) : 0) + (timed ? sizeof(int64_t) : 0);
  NpyWriter ptr_out(pd + "/indptr.npy", DType::kInt64, {end - begin + 1});
  NpyWriter idx_out(pd + "/indices.npy", dtype_of<T>(), {entries});
  std::optional<NpyWriter> w_out;
  if (weighted) w_out.emplace(pd + "/edge_weight.npy", DType::kFloat32, std::vector{entries});
  std::optional<NpyWriter> t_out;
  if (timed) t_out.emplace(pd + "/edge_time.npy", DType::kInt64, std::vector{entries});
  std::vector<int64_t> ptr, global, ot;
  std::vector<T> idx;
  std::vector<float> ow;
  int64_t written = 0;  // entries of the rows before the chunk
  const int64_t zero = 0;
  ptr_out.write(&zero, sizeof(zero));
  for (int64_t b = begin; b < end;) {
    // Rows [b, e): at least one, then as many as fit chunk_bytes.
    int64_t e = b, lo = INT64_MAX, hi = -1;  // [lo, hi]: the chunk's source rows
    ptr.assign(1, 0);
    while (e < end) {
      const int64_t v = new2old[e], len = g.degree(v);
      const int64_t bytes = (ptr.back() + len) * entry_bytes + 8 * static_cast<int64_t>(ptr.size());
      if (e > b && chunk_bytes > 0 && bytes > chunk_bytes) break;
      ptr.push_back(ptr.back() + len);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      ++e;
    }
    const int64_t n = ptr.back();
    idx.resize(n);
    ow.resize(weighted ? n : 0);
    ot.resize(timed ? n : 0);
    fill_rows<T>(g, old2new, new2old, b, e, ptr, idx.data(), ow.data(), ot.data());
    global.resize(ptr.size() - 1);
    for (size_t i = 1; i < ptr.size(); ++i) global[i - 1] = written + ptr[i];
    ptr_out.write(global.data(), global.size() * sizeof(int64_t));
    idx_out.write(idx.data(), n * sizeof(T));
    if (weighted) w_out->write(ow.data(), n * sizeof(float));
    if (timed) t_out->write(ot.data(), n * sizeof(int64_t));
    release_rows(g, lo, hi + 1);
    written += n;
    b = e;
  }
  ptr_out.close();
  idx_out.close();
  if (weighted) w_out->close();
  if (timed) t_out->close();
  return entries;
}

// Loads and checks <pd>/<prefix>indptr.npy, indices.npy[, edge_weight.npy][, edge_time.npy] as
// `rows` rows: monotone indptr ending at the entry count, rows sorted without repeats of ids < N,
// one finite weight >= 0 per entry, one int64 time per entry. Faults name row first_row + r.
template <class Need>
Csr load_rows(const std::string& pd, const std::string& prefix, int64_t rows, int64_t first_row,
              const PartitionMeta& m, Need&& need) {
  const std::string base = pd + "/" + prefix;
  Csr c;
  c.num_nodes = rows;
  c.indptr = load_npy(need(base + "indptr.npy"), DType::kInt64, 1);
  c.indices = load_npy(need(base + "indices.npy"), m.index_dtype, 1);
  DSP_CHECK_FORMAT(c.indptr.dim(0) == rows + 1, "{}indptr.npy: has {} entries, expected {}", base,
                   c.indptr.dim(0), rows + 1);
  if (m.has_weights) c.weights = load_npy(need(base + "edge_weight.npy"), DType::kFloat32, 1);
  const int64_t* p = c.rowptr();
  DSP_CHECK_FORMAT(p[0] == 0, "{}indptr.npy: indptr[0] = {}, expected 0", base, p[0]);
  for (int64_t r = 0; r < rows; ++r) {
    DSP_CHECK_FORMAT(p[r] <= p[r + 1], "{}indptr.npy: not monotone at row {}", base, r);
  }
  DSP_CHECK_FORMAT(p[rows] == c.num_edges(),
                   "{}indptr.npy: ends at {} but {}indices.npy has {} entries", base, p[rows],
                   prefix, c.num_edges());
  // Rows sorted without repeats and in range, weights finite and >= 0 (graph/validate.hpp). A
  // heterogeneous row is sorted per relation: load_hetero_part checks its segments.
  if (!m.hetero) check_csr_rows(c.indptr, c.indices, m.num_nodes, first_row, base + "indices.npy");
  if (m.has_weights) {
    DSP_CHECK_FORMAT(c.weights.dim(0) == c.num_edges(),
                     "{}edge_weight.npy: {} weights for {} entries", base, c.weights.dim(0),
                     c.num_edges());
    check_edge_weights(c.weights, c.indptr, first_row, base + "edge_weight.npy");
  }
  if (m.has_edge_time) {
    const std::string f = need(base + "edge_time.npy");
    c.times = load_npy(f);
    check_edge_times(c.times, c.num_edges(), f);
  }
  return c;
}

// One pass over the rows, a range of about 16M entries at a time, each range's mapped pages
// released once counted.
int64_t edge_cut(const Csr& g, const std::vector<int32_t>& assign) {
  const int64_t* p = g.rowptr();
  const int64_t n = g.num_nodes;
  int64_t cut = 0;
  with_indices(g, [&](const auto* idx) {
    for (int64_t b = 0; b < n;) {
      const int64_t e = std::max<int64_t>(
          b + 1, std::upper_bound(p + b + 1, p + n + 1, p[b] + (int64_t{1} << 24)) - p - 1);
#pragma omp parallel for reduction(+ : cut) schedule(dynamic, 4096)
      for (int64_t v = b; v < e; ++v) {
        const int32_t ov = assign[v];
        for (int64_t j = p[v]; j < p[v + 1]; ++j) cut += assign[static_cast<int64_t>(idx[j])] != ov;
      }
      release_rows(g, b, e);
      b = e;
    }
  });
  return cut;
}

// The part of every node by opts.method; methods with a report fill `report`.
std::vector<int32_t> assign_parts(const Dataset& ds, const PartitionOptions& opts,
                                  nlohmann::json* report) {
  if (opts.method == PartitionMethod::kMetis) {
    return assign_metis(ds, opts.parts, opts.seed, opts.verbose, kMetisMaxEntries,
                        opts.balance_entries);
  }
  if (opts.method == PartitionMethod::kBfsBlocks) {
    return assign_bfs_blocks(ds.graph, ds.train_idx, opts.parts, opts.bfs_blocks, opts.seed,
                             opts.verbose, report);
  }
  if (opts.method == PartitionMethod::kPagraph) {
    return assign_pagraph(ds.graph, ds.train_idx, opts.parts, opts.pagraph, opts.seed, opts.verbose,
                          report);
  }
  return assign_random(ds.meta.num_nodes, opts.parts, opts.seed);
}

// PaGraph: part p's halo (see detail::build_halo) into <pd>/halo_*.npy, its sizes into st.
void write_halo(const Csr& g, const Csr& halo_src, const PartitionMeta& meta,
                const std::vector<int64_t>& old2new, const std::vector<int64_t>& new2old,
                const std::vector<int64_t>& seeds, std::vector<int8_t>& depth,
                const std::string& pd, PartStats& st) {
  detail::Halo h =
      detail::build_halo(g, halo_src, old2new, new2old, st.begin, st.end, seeds, meta.hops, depth);
  st.halo_nodes = static_cast<int64_t>(h.ids.size());
  st.halo_edges = h.rows.num_edges();
  st.reach = h.reach;
  save_npy(pd + "/halo_ids.npy", Array::from_vector(std::move(h.ids)));
  save_npy(pd + "/halo_indptr.npy", h.rows.indptr);
  save_npy(pd + "/halo_indices.npy", h.rows.indices);
  if (h.rows.has_weights()) save_npy(pd + "/halo_edge_weight.npy", h.rows.weights);
}

}  // namespace

const Names<PartitionMethod>& names_of(PartitionMethod) {
  using M = PartitionMethod;
  static const Names<M> n("partition method", {{M::kMetis, "metis"},
                                               {M::kRandom, "random"},
                                               {M::kBfsBlocks, "bfs-blocks"},
                                               {M::kPagraph, "pagraph"}});
  return n;
}

const Names<FeatureStorage>& names_of(FeatureStorage) {
  static const Names<FeatureStorage> n(
      "feature storage",
      {{FeatureStorage::kCopy, "copy"}, {FeatureStorage::kReference, "reference"}});
  return n;
}

const Names<FeatureDtype>& names_of(FeatureDtype) {
  using D = FeatureDtype;
  static const Names<D> n("feature dtype", {{D::kKeep, "keep"},
                                            {D::kFloat32, "float32"},
                                            {D::kFloat16, "float16"},
                                            {D::kBFloat16, "bfloat16"},
                                            {D::kInt8, "int8"}});
  return n;
}

const Names<StoredScale>& names_of(StoredScale) {
  using S = StoredScale;
  static const Names<S> n("stored feature scale",
                          {{S::kNone, "none"}, {S::kColumn, "column"}, {S::kRow, "row"}});
  return n;
}

const Names<FeatureScale>& names_of(FeatureScale) {
  using S = FeatureScale;
  static const Names<S> n("feature scale",
                          {{S::kAuto, "auto"}, {S::kColumn, "column"}, {S::kRow, "row"}});
  return n;
}

void check_partition_method(const PartitionOptions& opts) {
  DSP_CHECK_ARG(opts.method != PartitionMethod::kPagraph ||
                    (opts.pagraph.hops >= 1 && opts.pagraph.hops <= 100),
                "--hops must be in [1, 100], got {}", opts.pagraph.hops);
}

void check_partition_out(const std::string& dataset_dir, const std::string& out) {
  DSP_CHECK_ARG(!path_within(dataset_dir, out),
                "OUT {} is the dataset {} or contains it: writing the partition there would "
                "destroy the dataset; choose another OUT",
                out, dataset_dir);
}

namespace {

const std::string& dataset_label(const Dataset& ds) {
  return ds.dir.empty() ? ds.meta.name : ds.dir;
}

// The checks of `opts` against `ds`, before any work.
void check_partition_options(const Dataset& ds, const PartitionOptions& opts) {
  const int64_t n = ds.meta.num_nodes;
  DSP_CHECK_ARG(opts.parts >= 1, "--parts must be >= 1, got {}", opts.parts);
  DSP_CHECK_ARG(opts.parts <= n, "--parts {} is larger than the node count {} of {}", opts.parts, n,
                dataset_label(ds));
  check_partition_method(opts);
  static_cache_policy(opts.cache_policy);  // "unknown cache policy ..."
  DSP_CHECK_ARG(opts.cache_ratio >= 0.0 && opts.cache_ratio <= 1.0,
                "--cache-ratio must be in [0, 1], got {}", opts.cache_ratio);
  DSP_CHECK_ARG(opts.seed_imbalance >= 0.0, "seed imbalance must be >= 0");
  DSP_CHECK_ARG(opts.preaggregate.empty() || ds.features.defined(),
                "--preaggregate needs node features, and {} has none", dataset_label(ds));
  DSP_CHECK_ARG(opts.method != PartitionMethod::kPagraph || !ds.graph.has_times(),
                "--method pagraph: the replicated halo rows do not carry edge times, and {} has "
                "edge_time.npy; partition it with --method metis, random or bfs-blocks",
                dataset_label(ds));
  if (ds.hetero) {
    DSP_CHECK_ARG(opts.method != PartitionMethod::kPagraph,
                  "--method {}: the replicated halo rows do not keep relations apart, and {} is a "
                  "heterogeneous graph; partition it with --method metis, random or bfs-blocks",
                  opts.method, dataset_label(ds));
    DSP_CHECK_ARG(opts.preaggregate.empty() && opts.feature_dtype == FeatureDtype::kKeep,
                  "{} is a heterogeneous graph: --preaggregate and --feature-dtype apply to one "
                  "features.npy, and its features stay per node type (each type keeps its dtype)",
                  dataset_label(ds));
  }
  partition_feature_dtype(opts, ds.meta.feature_dtype);  // --feature-dtype, --feature-scale
  if (opts.feature_storage == FeatureStorage::kReference) {
    DSP_CHECK_ARG(!ds.hetero && opts.feature_dtype == FeatureDtype::kKeep &&
                      ds.features.defined() && ds.features.is_mapped() && !ds.dir.empty(),
                  "--feature-storage reference reads {}/features.npy through the id map: it needs "
                  "a homogeneous dataset directory with node features and --feature-dtype keep",
                  dataset_label(ds));
  }
  DSP_CHECK_ARG(opts.feature_dtype == FeatureDtype::kKeep || ds.features.defined(),
                "--feature-dtype {}: {} has no node features", opts.feature_dtype,
                dataset_label(ds));
}

// Renumbering: part p's nodes, in old-id order, get the ids [offsets[p], offsets[p+1]).
struct Renumbering {
  std::vector<int64_t> offsets, old2new, new2old;
};

Renumbering renumber(const std::vector<int32_t>& assign, int parts) {
  const int64_t n = static_cast<int64_t>(assign.size());
  Renumbering r;
  r.offsets.assign(parts + 1, 0);
  for (int64_t v = 0; v < n; ++v) ++r.offsets[assign[v] + 1];
  for (int p = 0; p < parts; ++p) r.offsets[p + 1] += r.offsets[p];
  r.old2new.resize(n);
  r.new2old.resize(n);
  std::vector<int64_t> cursor(r.offsets.begin(), r.offsets.end() - 1);
  for (int64_t v = 0; v < n; ++v) {
    const int64_t id = cursor[assign[v]]++;
    r.old2new[v] = id;
    r.new2old[id] = v;
  }
  return r;
}

// The meta's description of the dataset, the method and the cache.
void describe(PartitionMeta& meta, const Dataset& ds, const PartitionOptions& opts,
              const StaticCachePolicy& policy, int64_t moved, nlohmann::json method_report) {
  const Csr& g = ds.graph;
  meta.method = name_of(opts.method);
  meta.cache_policy = policy.name();
  meta.cache_ratio = opts.cache_ratio;
  meta.cache_bytes = opts.cache_bytes;
  meta.num_nodes = ds.meta.num_nodes;
  meta.num_edges = g.num_edges();
  meta.feature_dim = ds.meta.feature_dim;
  meta.feature_dtype = partition_feature_dtype(opts, ds.meta.feature_dtype);
  meta.index_dtype = g.index_dtype();
  meta.num_classes = ds.meta.num_classes;
  meta.multilabel = ds.meta.multilabel;
  meta.link_negatives_per_positive = ds.meta.link_negatives_per_positive;
  meta.has_weights = g.has_weights();
  meta.has_edge_time = g.has_times();
  meta.has_node_time = ds.node_time.defined();
  meta.dataset_name = ds.meta.name;
  meta.extra = {{"seed", opts.seed},
                {"seeds_moved_for_balance", moved},
                {"directed", ds.meta.directed},
                {"method_report", std::move(method_report)}};
  if (opts.method == PartitionMethod::kMetis) meta.extra["balance_entries"] = opts.balance_entries;
  if (opts.method == PartitionMethod::kBfsBlocks) {
    meta.extra["balance_entries"] = opts.bfs_blocks.balance_entries;
  }
  for (const Preaggregation k : opts.preaggregate) {
    if (std::find(meta.preaggregated.begin(), meta.preaggregated.end(), k) ==
        meta.preaggregated.end()) {
      meta.preaggregated.push_back(k);
    }
  }
  if (opts.method == PartitionMethod::kPagraph) {
    meta.hops = opts.pagraph.hops;
    meta.halo_cap = opts.pagraph.halo_cap;
  }
  // Rows as stored: a narrower dtype caches more rows in the same budget.
  const size_t row_bytes =
      static_cast<size_t>(ds.meta.feature_dim) * dtype_size(meta.feature_dtype);
  if (opts.cache_bytes >= 0) {
    meta.cache_rows = row_bytes == 0 ? 0 : static_cast<int64_t>(opts.cache_bytes / row_bytes);
  } else {
    meta.cache_rows = -1;  // per part: cache_ratio of its own nodes
  }
}

// Hotness of every node under the policy, indexed by new id.
std::vector<int64_t> new_id_scores(const Dataset& ds, const PartitionOptions& opts,
                                   const StaticCachePolicy& policy,
                                   const std::vector<int64_t>& old2new) {
  std::vector<int64_t> train_old;
  for (int64_t i = 0; ds.train_idx.defined() && i < ds.train_idx.dim(0); ++i) {
    train_old.push_back(ds.train_idx.int_at(i));
  }
  std::vector<int64_t> score_old =
      hotness_scores(policy.name(), ds.graph, train_old, opts.seed, opts.presample);
  std::vector<int64_t> score(old2new.size());
  for (size_t v = 0; v < old2new.size(); ++v) score[old2new[v]] = score_old[v];
  return score;
}

uint64_t partition_id(const PartitionMeta& meta, const std::vector<int64_t>& new2old) {
  Hasher pid;
  pid.update(&meta.source_checksum, sizeof(uint64_t));
  pid.update(new2old.data(), new2old.size() * sizeof(int64_t));
  std::string pol =
      fmt::format("{}{}{}/{}", meta.cache_policy, meta.method, meta.hops, meta.halo_cap);
  pid.update(pol.data(), pol.size());
  return pid.digest();
}

// The arrays every rank maps: features (and pre-aggregated rows), labels, splits, in-degrees.
// Converted features (--feature-dtype other than keep) set meta.feature_conversion.
void write_shared_arrays(StagedDir& dir, const Dataset& ds, PartitionMeta& meta,
                         const PartitionOptions& opts, const Renumbering& r) {
  const Csr& g = ds.graph;
  const std::vector<int64_t>& old2new = r.old2new;
  if (ds.features.defined() && opts.feature_storage == FeatureStorage::kReference) {
    meta.feature_source = std::filesystem::canonical(ds.dir + "/features.npy").string();
    meta.feature_source_fingerprint = feature_fingerprint(ds.features);
  } else if (ds.features.defined() && opts.feature_dtype == FeatureDtype::kKeep) {
    write_gathered_rows(dir.file("features.npy"), ds.features, r.new2old);
  } else if (ds.features.defined()) {
    meta.feature_conversion =
        write_converted_features(ds.features, r.new2old, opts, dataset_label(ds) + "/features.npy",
                                 dir.file("features.npy"), dir.file("feature_scale.npy"));
  }
  for (const Preaggregation k : meta.preaggregated) {
    write_preaggregated(g, ds.features, r.new2old, k,
                        dir.file(fmt::format("preaggregated_{}.npy", k)));
    detail::release_pages(ds);
  }
  if (ds.hetero) {  // each type's features in its own file, rows in new id order
    for (int t = 0; t < ds.hetero->schema.num_types(); ++t) {
      const Array& f = ds.hetero->features[t];
      if (!f.defined()) continue;
      write_gathered_rows(
          dir.file(fmt::format("features_{}.npy", ds.hetero->schema.node_types[t].name)), f,
          detail::type_rows(*meta.hetero, *ds.hetero, r.new2old, t));
    }
  }
  if (ds.labels.defined()) write_gathered_rows(dir.file("labels.npy"), ds.labels, r.new2old);
  if (ds.node_time.defined()) {
    write_gathered_rows(dir.file("node_time.npy"), ds.node_time, r.new2old);
  }
  save_npy(dir.file("train_idx.npy"), ds.train_idx.defined() ? map_ids_sorted(ds.train_idx, old2new)
                                                             : Array(DType::kInt64, {0}));
  if (ds.valid_idx.defined())
    save_npy(dir.file("valid_idx.npy"), map_ids_sorted(ds.valid_idx, old2new));
  if (ds.test_idx.defined())
    save_npy(dir.file("test_idx.npy"), map_ids_sorted(ds.test_idx, old2new));
  const std::pair<const char*, const Array*> links[] = {{"link_valid.npy", &ds.link_valid},
                                                        {"link_test.npy", &ds.link_test},
                                                        {"link_valid_neg.npy", &ds.link_valid_neg},
                                                        {"link_test_neg.npy", &ds.link_test_neg}};
  for (const auto& [file, a] : links) {
    if (a->defined()) save_npy(dir.file(file), map_pairs(*a, old2new));
  }
  std::vector<int64_t> indeg(old2new.size());
  for (size_t v = 0; v < old2new.size(); ++v) indeg[old2new[v]] = g.degree(static_cast<int64_t>(v));
  save_npy(dir.file("in_degree.npy"), Array::from_vector(std::move(indeg)));
}

// What every part's writer shares: the graph, the renumbering, the scores, the halo sources.
struct PartWriter {
  const Csr& g;
  const PartitionOptions& opts;
  const StaticCachePolicy& policy;
  const PartitionMeta& meta;
  const Renumbering& r;
  const std::vector<int64_t>& score;
  const Array& train_new;
  Csr halo_src;                              // PaGraph: the rows replicated rows are cut from
  std::vector<int8_t> depth;                 // PaGraph: BFS scratch for the halos
  const std::vector<Pair>* links = nullptr;  // link_train in new ids, sorted; null: none
  const HeteroUnion* hetero = nullptr;       // a heterogeneous graph's relation segments

  // Part p's patch, seeds, halo and cache list into <tmp>/part<p>/.
  PartStats write(const std::string& tmp, int p);
};

PartStats PartWriter::write(const std::string& tmp, int p) {
  PartStats st;
  st.begin = meta.offsets[p];
  st.end = meta.offsets[p + 1];
  std::string pd = part_dir(tmp, p);
  std::filesystem::create_directories(pd);
  if (hetero) {
    st.edges = detail::write_hetero_patch(g, *hetero, r.old2new, r.new2old, st.begin, st.end, pd);
  } else {
    dispatch_index(g.index_dtype(), [&](auto tag) {
      st.edges = write_patch<decltype(tag)>(g, r.old2new, r.new2old, st.begin, st.end, pd,
                                            opts.write_chunk_bytes);
    });
  }
  std::vector<int64_t> seeds;
  const int64_t* t = train_new.data<int64_t>();
  for (int64_t i = 0; i < train_new.dim(0); ++i) {
    if (t[i] >= st.begin && t[i] < st.end) seeds.push_back(t[i]);
  }
  st.seeds = static_cast<int64_t>(seeds.size());
  if (meta.hops > 0) write_halo(g, halo_src, meta, r.old2new, r.new2old, seeds, depth, pd, st);
  detail::release_pages(g);
  save_npy(pd + "/seeds.npy", Array::from_vector(std::move(seeds)));
  if (links) {  // the training edges whose source the part owns: one range of the sorted list
    const auto lo = std::lower_bound(links->begin(), links->end(), Pair{st.begin, INT64_MIN});
    const auto hi = std::lower_bound(lo, links->end(), Pair{st.end, INT64_MIN});
    std::vector<int64_t> flat;
    for (auto it = lo; it != hi; ++it) {
      flat.push_back(it->first);
      flat.push_back(it->second);
    }
    st.link_train = hi - lo;
    save_npy(pd + "/link_train.npy", Array::from_vector(std::move(flat), {st.link_train, 2}));
  }
  int64_t cap =
      !policy.caches() ? 0
      : meta.cache_rows >= 0
          ? meta.cache_rows
          : static_cast<int64_t>(opts.cache_ratio * static_cast<double>(st.end - st.begin));
  std::vector<int64_t> cached = top_k_by_score(score, st.begin, st.end, cap);
  st.cached = static_cast<int64_t>(cached.size());
  save_npy(pd + "/cached.npy", Array::from_vector(std::move(cached)));
  nlohmann::json pj = {{"part", p},
                       {"begin", st.begin},
                       {"end", st.end},
                       {"partition_id", fmt::format("{:016x}", meta.partition_id)}};
  write_file_atomic(pd + "/part.json", pj.dump(2) + "\n");
  return st;
}

}  // namespace

PartitionMeta partition_dataset(const Dataset& ds, const PartitionOptions& opts,
                                const std::string& out) {
  if (!ds.dir.empty()) check_partition_out(ds.dir, out);
  check_partition_options(ds, opts);
  const StaticCachePolicy& policy = static_cache_policy(opts.cache_policy);
  Stopwatch total;
  detail::Progress progress(opts.verbose);
  auto phase = [&](const std::string& what) {
    const double s = progress.phase(what);
    detail::release_pages(ds);
    return s;
  };

  PartitionMeta meta;
  meta.source_checksum = dataset_checksum(ds);
  phase("checksum source");
  nlohmann::json method_report = nlohmann::json::object();
  std::vector<int32_t> assign = assign_parts(ds, opts, &method_report);
  method_report["assign_s"] = phase("assign parts");
  // Link prediction balances training edges (METIS's seed constraint counts them); moving
  // train_idx seeds would undo that, so rebalancing is skipped.
  const int64_t moved =
      ds.link_train.defined()
          ? 0
          : rebalance_seeds(ds.graph, ds.train_idx, opts.parts, opts.seed_imbalance, assign);
  phase(fmt::format("balance seeds ({} moved)", moved));

  Renumbering r = renumber(assign, opts.parts);
  meta.parts = opts.parts;
  meta.offsets = r.offsets;
  meta.edge_cut = edge_cut(ds.graph, assign);  // entries whose two ends have different owners
  std::vector<int32_t>().swap(assign);
  phase("renumber + edge cut");

  describe(meta, ds, opts, policy, moved, std::move(method_report));
  if (ds.hetero) {
    meta.hetero = std::make_shared<HeteroLayout>(
        detail::make_hetero_layout(*ds.hetero, meta.offsets, r.new2old));
  }
  const std::vector<int64_t> score = new_id_scores(ds, opts, policy, r.old2new);
  phase("hotness");

  StagedDir dir(out, opts.overwrite);
  meta.partition_id = partition_id(meta, r.new2old);
  write_shared_arrays(dir, ds, meta, opts, r);
  phase("write shared arrays");

  const Array train_new =
      ds.train_idx.defined() ? map_ids_sorted(ds.train_idx, r.old2new) : Array(DType::kInt64, {0});
  PartWriter w{ds.graph, opts, policy, meta, r, score, train_new, {}, {}};
  if (meta.hops > 0) {
    w.halo_src = detail::halo_rows_source(ds.graph, meta.halo_cap, opts.seed);
    w.depth.assign(ds.meta.num_nodes, -1);
  }
  const std::vector<Pair> links = sorted_link_train(ds, r.old2new);
  if (ds.link_train.defined()) w.links = &links;
  w.hetero = ds.hetero.get();
  for (int p = 0; p < opts.parts; ++p) meta.part.push_back(w.write(dir.tmp_path(), p));
  save_npy(dir.file("old2new.npy"), Array::from_vector(std::move(r.old2new)));
  save_npy(dir.file("new2old.npy"), Array::from_vector(std::move(r.new2old)));
  phase("write parts");
  write_file_atomic(dir.file("partition.json"), meta.to_json().dump(2) + "\n");
  dir.commit();
  if (opts.verbose) {
    DSP_INFO("partition", "wrote {} ({} parts, {:.2f} s total)", out, opts.parts, total.seconds());
  }
  return meta;
}

PartitionMeta load_partition_meta(const std::string& dir) {
  std::string path = dir + "/partition.json";
  check_file_readable(path, "missing (not a partition directory)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    DSP_THROW_T(FormatError, "{}: not valid JSON ({})", path, e.what());
  }
  return PartitionMeta::from_json(j, path);
}

void check_partition_source(const PartitionMeta& meta, const Dataset& ds) {
  uint64_t sum = dataset_checksum(ds);
  DSP_CHECK_FORMAT(sum == meta.source_checksum,
                   "{}: this partition was made from another dataset (checksum {:016x}, "
                   "dataset '{}' has {:016x})",
                   ds.dir.empty() ? ds.meta.name : ds.dir, meta.source_checksum, ds.meta.name, sum);
}

void share_node_arrays(const PartitionData& from, PartitionData& to) {
  to.features = from.features;
  to.feature_rows = from.feature_rows;
  to.feature_scale = from.feature_scale;
  to.labels = from.labels;
  to.node_time = from.node_time;
  to.train_idx = from.train_idx;
  to.valid_idx = from.valid_idx;
  to.test_idx = from.test_idx;
  to.in_degree = from.in_degree;
  to.link_valid = from.link_valid;
  to.link_test = from.link_test;
  to.link_valid_neg = from.link_valid_neg;
  to.link_test_neg = from.link_test_neg;
}

namespace {

// An int64 [E, 2] pairs file of a partition: ids in [0, n), and with owned = [lo, hi) the
// sources (column 0) in it; `expect` rows when >= 0. FormatError naming the file and the row.
Array load_pairs(const std::string& path, int64_t n, int64_t lo, int64_t hi, int64_t expect) {
  Array a = load_npy(path, DType::kInt64, 2);
  DSP_CHECK_FORMAT(a.dim(1) == 2 && (expect < 0 || a.dim(0) == expect),
                   "{}: shape {}, expected [{}, 2]", path, a.describe(),
                   expect < 0 ? std::string("E") : std::to_string(expect));
  const int64_t* p = a.data<int64_t>();
  for (int64_t r = 0; r < a.dim(0); ++r) {
    DSP_CHECK_FORMAT(p[2 * r] >= lo && p[2 * r] < hi && p[2 * r + 1] >= 0 && p[2 * r + 1] < n,
                     "{}: row {} ({}, {}) is outside [{}, {}) x [0, {})", path, r, p[2 * r],
                     p[2 * r + 1], lo, hi, n);
  }
  return a;
}

// The part's training edges (sources owned) and the shared held-out pairs, when written.
template <class Need>
void load_links(PartitionData& d, Need&& need) {
  const PartitionMeta& m = d.meta;
  const int64_t begin = m.offsets[d.part], end = m.offsets[d.part + 1], n = m.num_nodes;
  const std::string pd = part_dir(d.dir, d.part);
  const int64_t count = m.part[d.part].link_train;
  if (count > 0 || path_exists(pd + "/link_train.npy")) {
    d.link_train = load_pairs(need(pd + "/link_train.npy"), n, begin, end, count);
  }
  const std::pair<const char*, Array*> shared[] = {{"link_valid.npy", &d.link_valid},
                                                   {"link_test.npy", &d.link_test},
                                                   {"link_valid_neg.npy", &d.link_valid_neg},
                                                   {"link_test_neg.npy", &d.link_test_neg}};
  for (const auto& [file, a] : shared) {
    const std::string path = d.dir + "/" + file;
    if (path_exists(path)) *a = load_pairs(path, n, 0, n, -1);
  }
  const int64_t per = m.link_negatives_per_positive;
  for (int i = 0; i < 2 && per > 0; ++i) {
    const Array& pos = *shared[i].second;
    const Array& neg = *shared[i + 2].second;
    DSP_CHECK_FORMAT(!pos.defined() || (neg.defined() && neg.dim(0) == pos.dim(0) * per),
                     "{}/{}: {} pairs, but partition.json's link_negatives_per_positive {} needs "
                     "{} for the {} positives of {}",
                     d.dir, shared[i + 2].first, neg.defined() ? neg.dim(0) : 0, per,
                     pos.dim(0) * per, pos.dim(0), shared[i].first);
  }
}

// A partition's features.npy rows [begin, end) are finite (int8 always is), and int8 features
// have their scales: feature_scale.npy of the shape partition.json's scale mode gives, every scale
// finite and >= 0. FormatError naming the file.
void check_stored_features(PartitionData& d, const Array& features, int64_t begin, int64_t end,
                           const std::string& path) {
  const DType t = d.meta.feature_dtype;
  if (t == DType::kFloat32 || t == DType::kFloat16) {
    check_finite_features(features, begin, end, path);
  } else if (t == DType::kBFloat16) {
    const int64_t f = features.dim(1);
    const auto* h = static_cast<const uint16_t*>(features.raw());
    for (int64_t i = begin * f; i < end * f; ++i) {
      DSP_CHECK_FORMAT((h[i] & 0x7f80u) != 0x7f80u, "{}: feature {} of node {} is {}", path, i % f,
                       i / f, bf16_to_float(h[i]));
    }
  }
  if (t != DType::kInt8) return;
  const std::string sp = d.dir + "/feature_scale.npy";
  check_file_readable(sp, "missing (int8 features need their scales)");
  d.feature_scale = load_npy(sp, DType::kFloat32, 2);
  const bool per_row = d.meta.feature_conversion.scale == StoredScale::kRow;
  const int64_t rows = per_row ? d.meta.num_nodes : 1, cols = per_row ? 1 : d.meta.feature_dim;
  DSP_CHECK_FORMAT(d.feature_scale.dim(0) == rows && d.feature_scale.dim(1) == cols,
                   "{}: shape {}, expected [{}, {}] (one scale per {}, as partition.json says)", sp,
                   d.feature_scale.describe(), rows, cols, per_row ? "node" : "column");
  const float* s = d.feature_scale.data<float>();
  for (int64_t i = 0; i < rows * cols; ++i) {
    DSP_CHECK_FORMAT(std::isfinite(s[i]) && s[i] >= 0, "{}: scale {} is {} (must be finite, >= 0)",
                     sp, i, s[i]);
  }
}

// --feature-storage reference: the dataset's features.npy (partition.json "feature_source", its
// shape, dtype and fingerprint as partitioned) and new2old.npy as the row of every new id (each in
// [0, N)). Part p checks the finiteness of the source's rows [N p / P, N (p + 1) / P): read in
// order, and every row is checked by some rank, as with a features.npy of the partition's own.
void load_feature_source(PartitionData& d) {
  const PartitionMeta& m = d.meta;
  const std::string& src = m.feature_source;
  const int64_t n = m.num_nodes;
  DSP_CHECK_FORMAT(path_exists(src),
                   "{}/partition.json: its features are read from {} (--feature-storage "
                   "reference), which is missing: the dataset was moved or removed; partition it "
                   "again",
                   d.dir, src);
  d.features = load_npy(src, m.feature_dtype, 2);
  DSP_CHECK_FORMAT(d.features.dim(0) == n && d.features.dim(1) == m.feature_dim &&
                       feature_fingerprint(d.features) == m.feature_source_fingerprint,
                   "{}: not the features {}/partition.json was made from ({}, expected {} nodes "
                   "x {} features, or other values): the dataset changed; partition it again",
                   src, d.dir, d.features.describe(), n, m.feature_dim);
  const std::string map = new2old_path(d.dir);
  check_file_readable(map);
  d.feature_rows = load_npy(map, DType::kInt64, 1);
  DSP_CHECK_FORMAT(d.feature_rows.dim(0) == n, "{}: {} ids, expected {}", map,
                   d.feature_rows.dim(0), n);
  const int64_t* r = d.feature_rows.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    DSP_CHECK_FORMAT(r[i] >= 0 && r[i] < n, "{}: id {} is outside [0, {})", map, r[i], n);
  }
  const int64_t p = d.part, parts = m.parts;
  check_stored_features(d, d.features, n * p / parts, n * (p + 1) / parts, src);
}

// features.npy (this part's rows checked), or the dataset's by reference.
void load_features(PartitionData& d) {
  const PartitionMeta& m = d.meta;
  if (!m.feature_source.empty()) return load_feature_source(d);
  const std::string path = d.dir + "/features.npy";
  check_file_readable(path);
  d.features = load_npy(path, m.feature_dtype, 2);
  DSP_CHECK_FORMAT(d.features.dim(0) == m.num_nodes && d.features.dim(1) == m.feature_dim,
                   "{}: shape {} does not match {} nodes x {} features", path,
                   d.features.describe(), m.num_nodes, m.feature_dim);
  check_stored_features(d, d.features, m.offsets[d.part], m.offsets[d.part + 1], path);
}

}  // namespace

std::vector<int64_t> link_destination_counts(const std::string& dir, const PartitionMeta& m) {
  std::vector<int64_t> counts(static_cast<size_t>(m.num_nodes), 0);
  for (int p = 0; p < m.parts; ++p) {
    const std::string path = part_dir(dir, p) + "/link_train.npy";
    const int64_t expect = p < static_cast<int>(m.part.size()) ? m.part[p].link_train : -1;
    if (expect == 0 && !path_exists(path)) continue;
    check_file_readable(path, "missing (link prediction's training edges of the part)");
    const Array a = load_pairs(path, m.num_nodes, m.offsets[p], m.offsets[p + 1], expect);
    const int64_t* e = a.data<int64_t>();
    for (int64_t i = 0; i < a.dim(0); ++i) ++counts[e[2 * i + 1]];
  }
  return counts;
}

PartitionData load_partition(const std::string& dir, int part, int expected_parts) {
  PartitionData d;
  d.meta = load_partition_meta(dir);
  d.dir = dir;
  d.part = part;
  const PartitionMeta& m = d.meta;
  DSP_CHECK_ARG(expected_parts <= 0 || expected_parts == m.parts,
                "{}: the partition has {} parts but the job has {} ranks; partition again with "
                "--parts {}",
                dir, m.parts, expected_parts, expected_parts);
  DSP_CHECK_ARG(part >= 0 && part < m.parts, "{}: part {} does not exist ({} parts)", dir, part,
                m.parts);
  std::string pd = part_dir(dir, part);
  std::string pj_path = pd + "/part.json";
  check_file_readable(pj_path, "missing part file");
  nlohmann::json pj;
  try {
    pj = nlohmann::json::parse(read_file(pj_path));
    DSP_CHECK_FORMAT(pj.at("part").get<int>() == part && pj.at("partition_id").get<std::string>() ==
                                                             fmt::format("{:016x}", m.partition_id),
                     "{}: belongs to another partition than {}/partition.json", pj_path, dir);
  } catch (const nlohmann::json::exception&) {
    DSP_THROW_T(FormatError, "{}: malformed", pj_path);
  }
  const int64_t begin = m.offsets[part], end = m.offsets[part + 1], rows = end - begin;
  const int64_t n = m.num_nodes;
  auto need = [&](const std::string& path) {
    check_file_readable(path);
    return path;
  };
  d.patch = load_rows(pd, "", rows, begin, m, need);
  if (m.hetero) detail::load_hetero_part(d);
  auto ids_in = [&](const std::string& path, int64_t lo, int64_t hi) {
    Array a = load_npy(need(path), DType::kInt64, 1);
    const int64_t* v = a.data<int64_t>();
    for (int64_t i = 0; i < a.dim(0); ++i) {
      DSP_CHECK_FORMAT(v[i] >= lo && v[i] < hi, "{}: id {} is outside [{}, {})", path, v[i], lo,
                       hi);
    }
    return a;
  };
  d.seeds = ids_in(pd + "/seeds.npy", begin, end);
  d.cached = ids_in(pd + "/cached.npy", begin, end);
  if (m.feature_dim > 0) load_features(d);
  if (path_exists(dir + "/labels.npy")) {
    d.labels = load_npy(dir + "/labels.npy");
    check_label_layout(d.labels, n, m.multilabel ? m.num_classes : 0, dir + "/labels.npy",
                       "partition.json");
  }
  if (m.has_node_time) {
    const std::string f = need(dir + "/node_time.npy");
    d.node_time = load_npy(f);
    check_node_times(d.node_time, n, f);
  }
  d.train_idx = ids_in(dir + "/train_idx.npy", 0, n);
  if (path_exists(dir + "/valid_idx.npy")) d.valid_idx = ids_in(dir + "/valid_idx.npy", 0, n);
  if (path_exists(dir + "/test_idx.npy")) d.test_idx = ids_in(dir + "/test_idx.npy", 0, n);
  if (m.hops > 0) {
    // Replicated rows: ascending ids of other parts' nodes, then their rows.
    d.halo_ids = ids_in(pd + "/halo_ids.npy", 0, n);
    const int64_t* h = d.halo_ids.data<int64_t>();
    for (int64_t i = 0; i < d.halo_ids.dim(0); ++i) {
      DSP_CHECK_FORMAT((i == 0 || h[i - 1] < h[i]) && (h[i] < begin || h[i] >= end),
                       "{}/halo_ids.npy: id {} at {} is not ascending or is owned by part {}", pd,
                       h[i], i, part);
    }
    d.halo = load_rows(pd, "halo_", d.halo_ids.dim(0), 0, m, need);
  }
  load_links(d, need);
  d.in_degree = load_npy(need(dir + "/in_degree.npy"), DType::kInt64, 1);
  DSP_CHECK_FORMAT(d.in_degree.dim(0) == n, "{}/in_degree.npy: {} entries for {} nodes", dir,
                   d.in_degree.dim(0), n);
  return d;
}

}  // namespace dsp
