// `dsp convert` out of core (edge lists and OGB raw directories): the edges stream through an
// external sort into the dataset directory (graph/external_sort.hpp), node features straight into
// features.npy, so the size is bounded by disk, not memory.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <type_traits>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/logging.hpp"
#include "core/memory.hpp"
#include "core/timer.hpp"
#include "graph/external_sort.hpp"
#include "graph/import.hpp"
#include "graph/import_detail.hpp"
#include "graph/npy.hpp"

namespace dsp {
namespace {

// The sort buffer's floor: 1024 keys, the sorter's own least capacity.
constexpr uint64_t kMinSortBytes = uint64_t{1} << 13;
// A parsed chunk (16 MiB of text, up to about 1M edges as int64 pairs and weights) and its text.
constexpr uint64_t kParseBytes = uint64_t{64} << 20;
constexpr uint64_t kSlackBytes = uint64_t{64} << 20;

// Pushes one chunk of parsed edges into the sorter: entry (dst <- src), and (src <- dst) when
// undirected; self loops dropped when asked.
template <class Rec>
void push_edges(ExternalSorter<Rec>& sorter, const EdgeListData& d, const EdgeListOptions& opts) {
  const size_t m = d.src.size(), per = opts.undirected ? 2 : 1;
  const size_t chunk = sorter.capacity() / per;
  for (size_t b = 0; b < m; b += chunk) {
    const size_t e = std::min(m, b + chunk);
    Rec* out = sorter.append_space((e - b) * per);
    for (size_t i = b; i < e; ++i) {
      const uint64_t s = static_cast<uint64_t>(d.src[i]), t = static_cast<uint64_t>(d.dst[i]);
      const bool drop = opts.remove_self_loops && s == t;
      Rec* r = out + (i - b) * per;
      if constexpr (std::is_same_v<Rec, WeightedKey>) {
        r[0] = {drop ? kNoEdge : edge_key(t, s), d.weight[i]};
        if (per == 2) r[1] = {drop ? kNoEdge : edge_key(s, t), d.weight[i]};
      } else {
        r[0] = drop ? kNoEdge : edge_key(t, s);
        if (per == 2) r[1] = drop ? kNoEdge : edge_key(s, t);
      }
    }
    sorter.appended((e - b) * per);
  }
}

DType csr_index_dtype(int64_t n) { return n < (int64_t{1} << 31) ? DType::kInt32 : DType::kInt64; }

// Records of the sort buffer: what the budget leaves beside the parse buffers, capped by
// --sort-buffer and by what `expected` entries need (a quarter over; a short estimate only spills).
template <class Rec>
size_t sort_capacity(const OutOfCoreImportOptions& w, uint64_t expected) {
  // stable_sort of weighted records takes a buffer of the same size.
  const uint64_t per_record = sizeof(Rec) * (std::is_same_v<Rec, WeightedKey> ? 2 : 1);
  const uint64_t left = memory_left(w.memory_budget);
  uint64_t bytes = left > kParseBytes + kSlackBytes ? left - kParseBytes - kSlackBytes : 0;
  if (w.sort_buffer_bytes > 0) bytes = std::min(bytes, w.sort_buffer_bytes);
  bytes = std::min(bytes, (expected + expected / 4 + 1024) * per_record);
  bytes = std::max(bytes, kMinSortBytes);
  return static_cast<size_t>(bytes / per_record);
}

// Merges the sorted entries into the staged directory's indptr.npy, indices.npy and (weighted
// records) edge_weight.npy; returns the entries written.
template <class Rec>
int64_t write_sorted_csr(ExternalSorter<Rec>& sorter, const StagedDir& staged, int64_t n,
                         int64_t max_entries, ImportStats* stats) {
  CsrFileWriter writer(staged.tmp_path(), n, max_entries, csr_index_dtype(n),
                       std::is_same_v<Rec, WeightedKey>);
  sorter.merge([&](const Rec* recs, size_t count) { writer.add(recs, count); });
  writer.finish();
  DSP_DEBUG("convert", "{} sorted runs, {} spilled", sorter.runs(),
            format_bytes(sorter.spilled_bytes()));
  if (stats) stats->sort_runs = sorter.runs();
  return writer.entries();
}

template <class Rec>
DatasetMeta import_sorted(const std::string& path, const EdgeListOptions& opts,
                          const std::string& name, StagedDir& staged,
                          const OutOfCoreImportOptions& w, const EdgeListSample& sample,
                          ImportStats* stats) {
  constexpr bool kWeighted = std::is_same_v<Rec, WeightedKey>;
  const uint64_t expected = static_cast<uint64_t>(sample.edges) * (opts.undirected ? 2 : 1);
  Stopwatch sw;
  ExternalSorter<Rec> sorter(staged.file("sort-runs"), sort_capacity<Rec>(w, expected));
  int64_t max_id = -1, input_edges = 0;
  stream_edge_list(path, opts, [&](const EdgeListData& d) {
    if (d.src.empty()) return;
    DSP_CHECK_FORMAT(d.max_id < kMaxExternalNodes,
                     "{}: node id {} is too large for the out-of-core import (ids must be below "
                     "{})",
                     path, d.max_id, kMaxExternalNodes);
    DSP_CHECK_FORMAT(d.weight.empty() != kWeighted || !opts.weighted_auto,
                     "{}: the weight column changes after the first MiB", path);
    push_edges(sorter, d, opts);
    max_id = std::max(max_id, d.max_id);
    input_edges += static_cast<int64_t>(d.src.size());
  });
  const double parse_s = sw.seconds();
  const int64_t n = opts.num_nodes >= 0 ? opts.num_nodes : max_id + 1;
  DSP_CHECK_FORMAT(n > 0, "{}: empty graph: no edges{}", path,
                   opts.num_nodes < 0 ? " (and no --num-nodes)" : "");
  DSP_CHECK_FORMAT(n <= kMaxExternalNodes, "{}: {} nodes are too many for the out-of-core import",
                   path, n);
  sw.reset();
  const int64_t max_entries = input_edges * (opts.undirected ? 2 : 1);

  // The metadata import_edge_list + sync_meta produce.
  DatasetMeta m;
  m.num_edges = write_sorted_csr(sorter, staged, n, max_entries, stats);
  m.name = name.empty() ? std::filesystem::path(path).stem().string() : name;
  m.directed = !opts.undirected;
  m.extra = {{"importer", "edgelist"},
             {"source", std::filesystem::absolute(path).string()},
             {"input_edges", input_edges}};
  m.num_nodes = n;
  m.index_dtype = csr_index_dtype(n);
  m.has_weights = kWeighted;
  write_file_atomic(staged.file("dataset.json"), m.to_json().dump(2) + "\n");
  if (stats) {
    stats->parse_s = parse_s;
    stats->build_s = sw.seconds();
    stats->input_edges = input_edges;
  }
  return m;
}

// edge.csv through the external sort into the staged CSR files, with import_ogb_raw's checks
// (ids below the node count, two columns, the edge count); returns the entries written.
int64_t sort_ogb_edges(const detail::OgbRaw& in, const OgbImportOptions& opts, StagedDir& staged,
                       const OutOfCoreImportOptions& w, ImportStats* stats) {
  EdgeListOptions eo;
  eo.num_nodes = in.num_nodes;
  eo.undirected = opts.undirected;  // symmetrized, repeats merged and self loops kept, as there
  const int64_t per = opts.undirected ? 2 : 1;
  Stopwatch sw;
  ExternalSorter<uint64_t> sorter(
      staged.file("sort-runs"),
      sort_capacity<uint64_t>(w, static_cast<uint64_t>(per * in.num_edges)));
  int64_t edges = 0;
  bool weighted = false;
  stream_edge_list(in.edge_file, eo, [&](const EdgeListData& d) {
    weighted = weighted || !d.weight.empty();
    push_edges(sorter, d, eo);
    edges += static_cast<int64_t>(d.src.size());
  });
  detail::check_ogb_edges(in, weighted, edges);
  const double parse_s = sw.seconds();
  sw.reset();
  const int64_t entries = write_sorted_csr(sorter, staged, in.num_nodes, edges * per, stats);
  if (stats) {
    stats->parse_s = parse_s;
    stats->build_s = sw.seconds();
  }
  return entries;
}

// node-feat streamed into the staged features.npy (float32 [N, F]); returns F, 0 without the file.
int64_t write_ogb_features(const detail::OgbRaw& in, StagedDir& staged) {
  const std::string f = detail::find_ogb_csv(in, "node-feat");
  if (f.empty()) return 0;
  const int64_t n = in.num_nodes;
  std::unique_ptr<NpyWriter> out;
  int64_t rows = 0;
  const int64_t dim =
      detail::stream_ogb_features(f, n, [&](const std::vector<float>& v, int64_t d) {
        if (!out) {
          out = std::make_unique<NpyWriter>(staged.file("features.npy"), DType::kFloat32,
                                            std::vector<int64_t>{n, d});
        }
        // Rows past the node count are only counted: stream_ogb_features names the fault at the
        // end.
        const int64_t r = std::min(static_cast<int64_t>(v.size()) / d, n - rows);
        out->write(v.data(), static_cast<size_t>(r * d) * sizeof(float));
        rows += r;
      });
  out->close();
  return dim;
}

}  // namespace

uint64_t edge_list_out_of_core_bytes() { return kMinSortBytes + kParseBytes + kSlackBytes; }

DatasetMeta import_edge_list_to_dir(const std::string& path, const EdgeListOptions& opts,
                                    const std::string& name, const std::string& dir,
                                    const OutOfCoreImportOptions& w, ImportStats* stats) {
  DSP_CHECK_ARG(opts.num_nodes >= -1, "--num-nodes must be non-negative, got {}", opts.num_nodes);
  DSP_CHECK_ARG(opts.time_column == 0,
                "--time-column needs the in-memory conversion (repeated edges keep their earliest "
                "time); drop --out-of-core");
  const EdgeListSample sample = sample_edge_list(path);
  StagedDir staged(dir, w.overwrite);
  DatasetMeta m = sample.weighted && opts.weighted_auto
                      ? import_sorted<WeightedKey>(path, opts, name, staged, w, sample, stats)
                      : import_sorted<uint64_t>(path, opts, name, staged, w, sample, stats);
  validate_staged_dataset(staged.tmp_path(), dir);
  staged.commit();
  return m;
}

DatasetMeta import_ogb_to_dir(const std::string& dir, const OgbImportOptions& opts,
                              const std::string& out_dir, const OutOfCoreImportOptions& w,
                              ImportStats* stats) {
  const detail::OgbRaw in = detail::open_ogb_raw(dir);
  DSP_CHECK_FORMAT(in.num_nodes <= kMaxExternalNodes,
                   "{}: {} nodes are too many for the out-of-core import", in.nodes_file,
                   in.num_nodes);
  StagedDir staged(out_dir, w.overwrite);
  // The graph goes to disk first, so that the sort buffer is gone when the node data is read.
  const int64_t entries = sort_ogb_edges(in, opts, staged, w, stats);
  Stopwatch sw;
  const int64_t dim = write_ogb_features(in, staged);
  Dataset node_data;  // labels and split ids, written as write_dataset writes them
  const std::string split = detail::read_ogb_labels_and_split(in, opts, node_data);
  const std::pair<const char*, const Array*> arrays[] = {{"labels.npy", &node_data.labels},
                                                         {"train_idx.npy", &node_data.train_idx},
                                                         {"valid_idx.npy", &node_data.valid_idx},
                                                         {"test_idx.npy", &node_data.test_idx}};
  for (auto [file, a] : arrays) {
    if (a->defined()) save_npy(staged.file(file), *a);
  }
  // What import_ogb_raw + sync_meta produce: the counts of the held arrays, then the graph's and
  // the features' (node_data has neither).
  node_data.meta = detail::ogb_meta(in, opts, split);
  node_data.sync_meta();
  DatasetMeta& m = node_data.meta;
  m.num_nodes = in.num_nodes;
  m.num_edges = entries;
  m.index_dtype = csr_index_dtype(in.num_nodes);
  m.feature_dim = dim;
  if (stats) {
    stats->parse_s += sw.seconds();
    stats->input_edges = in.num_edges;
  }
  write_file_atomic(staged.file("dataset.json"), m.to_json().dump(2) + "\n");
  validate_staged_dataset(staged.tmp_path(), out_dir);
  staged.commit();
  return m;
}

}  // namespace dsp
