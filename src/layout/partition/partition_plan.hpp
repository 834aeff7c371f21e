#pragma once
// Memory planning for partition_dataset: its peak, known from dataset.json alone, so `dsp
// partition` refuses before loading instead of being killed, and `dsp partition --dry-run` and
// `dsp info` can print it.
#include <cstdint>
#include <string>

#include "graph/dataset.hpp"
#include "layout/partition/partition.hpp"

namespace dsp {

// Anonymous memory partition_dataset needs at its peak for a dataset with this metadata. The
// dataset's own arrays are mapped files (page cache, reclaimable) and are not counted.
// What a dataset directory partitions as, for the estimate: its dataset.json, or a heterogeneous
// dataset's union graph's counts (graph/hetero.hpp).
DatasetMeta partition_source_meta(const std::string& dir);

uint64_t estimate_partition_memory(const DatasetMeta& meta, const PartitionOptions& opts);

// What the methods that need less than METIS into several parts would need instead: bfs-blocks
// and random, each counting the process's resident memory as check_memory does; {0, 0} for any
// other method or a single part (nothing lighter to name).
struct LighterMethods {
  uint64_t bfs_blocks = 0, random = 0;
};
LighterMethods lighter_methods(const DatasetMeta& meta, const PartitionOptions& opts);

// What lowers the estimate, for the refusal line: "use --method bfs-blocks (about X) or --method
// random (about Y), or raise --memory-budget" (lighter_methods).
std::string partition_memory_hint(const DatasetMeta& meta, const PartitionOptions& opts);

}  // namespace dsp
