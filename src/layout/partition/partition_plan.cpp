#include "layout/partition/partition_plan.hpp"

#include <algorithm>

#include "core/dtype.hpp"
#include "core/memory.hpp"
#include "graph/hetero.hpp"

namespace dsp {
namespace {

constexpr uint64_t kSlackBytes = uint64_t{64} << 20;

// The assignment step: METIS on the symmetric graph (32-bit indices): the input arrays, then
// METIS's own; or the random method's keyed shuffle. METIS's own memory (its edge weights, the
// coarsened graphs and work arrays) was measured by peak anonymous memory on degree-corrected SBM
// graphs of 0.5M-1M nodes, 5M-10M entries, 2 and 8 parts: 54-59 bytes per entry of the symmetric
// graph, and per node 60-80 bytes plus about 10 per part; the estimate takes 56 per entry, 80 per
// node and 12 per node and part.
uint64_t assignment_bytes(const DatasetMeta& m, const PartitionOptions& o) {
  const uint64_t n = m.num_nodes, e = m.num_edges;
  if (o.parts <= 1) return 4 * n;
  if (o.method == PartitionMethod::kMetis) {
    const uint64_t sym = m.directed ? 2 * e : e;
    const uint64_t input = 4 * (n + 1) + 4 * sym + 12 * n;  // xadj, adjncy, 3 vertex weights
    // A directed graph is first symmetrized from (src, dst) pairs through a CSR build.
    const uint64_t symmetrize = m.directed ? 8 * e + 8 * (n + 1) + 4 * sym + 8 * n : 0;
    const uint64_t metis = 56 * sym + 80 * n + 12 * n * static_cast<uint64_t>(o.parts);
    return std::max(symmetrize, input + metis) + 4 * n;
  }
  if (o.method == PartitionMethod::kBfsBlocks) {
    // Block id, queue slot and result per node (the CSR is only read); the block graph is small
    // (about 256 blocks per part) next to them.
    return 12 * n + 4 * n;
  }
  if (o.method == PartitionMethod::kPagraph) {
    // Stamps and owners, one bit per node and part, the assignment; the halo rows written per part
    // are counted with the largest patch below.
    return 8 * n + n * static_cast<uint64_t>(o.parts) / 8 + 4 * n;
  }
  return 16 * n + 4 * n;  // (key, id) pairs + the assignment
}

// Renumbering and writing: old2new and new2old, the hotness scores (twice while they are
// renumbered), the in-degrees, and the rows being written: each part's patch streams through a
// buffer of write_chunk_bytes (the largest part's patch, about 1/P of the entries and a quarter
// more for imbalance, when that is smaller or chunking is off). PaGraph's halo rows are built in
// memory per part after its patch is written: as large as that patch at most.
uint64_t writing_bytes(const DatasetMeta& m, const PartitionOptions& o) {
  const uint64_t n = m.num_nodes, e = m.num_edges, p = std::max(o.parts, 1);
  const uint64_t id = dtype_size(m.index_dtype),
                 w = (m.has_weights ? 4 : 0) + (m.has_edge_time ? 8 : 0);
  const uint64_t patch = (e / p + e / (4 * p)) * (id + w) + 8 * (n / p + n / (4 * p) + 1);
  const uint64_t chunk =
      o.write_chunk_bytes > 0 ? std::min(patch, static_cast<uint64_t>(o.write_chunk_bytes)) : patch;
  const uint64_t halo = o.method == PartitionMethod::kPagraph ? patch : 0;
  return 16 * n + 16 * n + 8 * n + std::max(chunk, halo);
}

}  // namespace

DatasetMeta partition_source_meta(const std::string& dir) {
  if (!is_hetero_dataset(dir)) return load_dataset_meta(dir);
  const HeteroDataset h = load_hetero_dataset(dir, LoadOptions{true, false});
  DatasetMeta m;
  m.name = h.name;
  m.num_nodes = h.schema.num_nodes();
  for (const RelationInfo& r : h.schema.relations) m.num_edges += r.edges;
  m.index_dtype = m.num_nodes < (int64_t{1} << 31) ? DType::kInt32 : DType::kInt64;
  m.num_classes = h.schema.num_classes;
  m.num_train = h.train_idx.defined() ? h.train_idx.dim(0) : 0;
  return m;
}

uint64_t estimate_partition_memory(const DatasetMeta& meta, const PartitionOptions& opts) {
  return std::max(assignment_bytes(meta, opts), writing_bytes(meta, opts)) + kSlackBytes;
}

LighterMethods lighter_methods(const DatasetMeta& meta, const PartitionOptions& opts) {
  LighterMethods l;
  if (opts.method != PartitionMethod::kMetis || opts.parts <= 1) return l;
  PartitionOptions r = opts;
  r.method = PartitionMethod::kBfsBlocks;
  l.bfs_blocks = estimate_partition_memory(meta, r) + process_rss_bytes();
  r.method = PartitionMethod::kRandom;
  l.random = estimate_partition_memory(meta, r) + process_rss_bytes();
  return l;
}

std::string partition_memory_hint(const DatasetMeta& meta, const PartitionOptions& opts) {
  const LighterMethods l = lighter_methods(meta, opts);
  if (l.bfs_blocks == 0) return "raise --memory-budget";
  return "use --method bfs-blocks (about " + format_bytes(l.bfs_blocks) +
         ") or --method random (about " + format_bytes(l.random) + "), or raise --memory-budget";
}

}  // namespace dsp
