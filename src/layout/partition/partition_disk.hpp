#pragma once
// The disk a partition directory takes (partition.hpp lists its files), estimated from
// dataset.json before any work, and the refusal when OUT's file system has less free.
#include <cstdint>
#include <string>

#include "graph/dataset.hpp"
#include "layout/partition/partition.hpp"

namespace dsp {

struct PartitionDisk {
  uint64_t features = 0;  // features.npy (+ feature_scale.npy, pre-aggregated rows): 0 by reference
  uint64_t graph = 0;     // every part's indptr, indices, weights, times (+ halo rows: not counted)
  uint64_t nodes = 0;     // id maps, in-degrees, labels, node times, splits, seeds, cached, links
  uint64_t total() const { return features + graph + nodes; }
};

// The bytes partition_dataset writes for a dataset with this metadata, exact but for the .npy
// headers (128 bytes a file) and the cached lists (counted at cache_ratio, or every node under a
// byte budget); PaGraph's replicated halo rows are not counted (they depend on the graph).
PartitionDisk estimate_partition_disk(const DatasetMeta& meta, const PartitionOptions& opts);

// Refuses (core/disk.hpp, one line) a partition into `out` that does not fit its file system;
// the line names --feature-storage reference when that would make it fit. `what` begins the line.
void check_partition_disk(const std::string& what, const DatasetMeta& meta,
                          const PartitionOptions& opts, const std::string& out);

}  // namespace dsp
