// `dsp convert --from edgelist` out of core: the edge list streams through an external sort into
// the dataset directory (graph/external_sort.hpp), so its size is bounded by disk, not memory.
#include <algorithm>
#include <filesystem>
#include <type_traits>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/logging.hpp"
#include "core/memory.hpp"
#include "core/timer.hpp"
#include "graph/external_sort.hpp"
#include "graph/import.hpp"

namespace dsp {
namespace {

constexpr uint64_t kMinSortBytes = uint64_t{1} << 16;
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

template <class Rec>
DatasetMeta import_sorted(const std::string& path, const EdgeListOptions& opts,
                          const std::string& name, StagedDir& staged,
                          const OutOfCoreImportOptions& w, const EdgeListSample& sample,
                          ImportStats* stats) {
  constexpr bool kWeighted = std::is_same_v<Rec, WeightedKey>;
  // stable_sort of weighted records takes a buffer of the same size.
  const uint64_t per_record = sizeof(Rec) * (kWeighted ? 2 : 1);
  const uint64_t left = memory_left(w.memory_budget);
  uint64_t bytes = left > kParseBytes + kSlackBytes ? left - kParseBytes - kSlackBytes : 0;
  if (w.sort_buffer_bytes > 0) bytes = std::min(bytes, w.sort_buffer_bytes);
  // No more than the estimated entries need (a quarter over; a short estimate only spills).
  const uint64_t expected = static_cast<uint64_t>(sample.edges) * (opts.undirected ? 2 : 1);
  bytes = std::min(bytes, (expected + expected / 4 + 1024) * per_record);
  bytes = std::max(bytes, kMinSortBytes);
  Stopwatch sw;
  ExternalSorter<Rec> sorter(staged.file("sort-runs"), static_cast<size_t>(bytes / per_record));
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
  const DType index_dtype = n < (int64_t{1} << 31) ? DType::kInt32 : DType::kInt64;
  CsrFileWriter writer(staged.tmp_path(), n, max_entries, index_dtype, kWeighted);
  sorter.merge([&](const Rec* recs, size_t count) { writer.add(recs, count); });
  writer.finish();
  DSP_DEBUG("convert", "{} sorted runs, {} spilled", sorter.runs(),
            format_bytes(sorter.spilled_bytes()));

  // The metadata import_edge_list + sync_meta produce.
  DatasetMeta m;
  m.name = name.empty() ? std::filesystem::path(path).stem().string() : name;
  m.directed = !opts.undirected;
  m.extra = {{"importer", "edgelist"},
             {"source", std::filesystem::absolute(path).string()},
             {"input_edges", input_edges}};
  m.num_nodes = n;
  m.num_edges = writer.entries();
  m.index_dtype = index_dtype;
  m.has_weights = kWeighted;
  write_file_atomic(staged.file("dataset.json"), m.to_json().dump(2) + "\n");
  if (stats) {
    stats->parse_s = parse_s;
    stats->build_s = sw.seconds();
    stats->input_edges = input_edges;
  }
  return m;
}

}  // namespace

uint64_t edge_list_out_of_core_bytes() { return kMinSortBytes + kParseBytes + kSlackBytes; }

DatasetMeta import_edge_list_to_dir(const std::string& path, const EdgeListOptions& opts,
                                    const std::string& name, const std::string& dir,
                                    const OutOfCoreImportOptions& w, ImportStats* stats) {
  DSP_CHECK_ARG(opts.num_nodes >= -1, "--num-nodes must be non-negative, got {}", opts.num_nodes);
  const EdgeListSample sample = sample_edge_list(path);
  StagedDir staged(dir, w.overwrite);
  DatasetMeta m = sample.weighted && opts.weighted_auto
                      ? import_sorted<WeightedKey>(path, opts, name, staged, w, sample, stats)
                      : import_sorted<uint64_t>(path, opts, name, staged, w, sample, stats);
  validate_staged_dataset(staged.tmp_path(), dir);
  staged.commit();
  return m;
}

}  // namespace dsp
