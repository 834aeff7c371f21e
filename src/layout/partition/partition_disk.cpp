#include "layout/partition/partition_disk.hpp"

#include <fmt/format.h>

#include "core/disk.hpp"
#include "core/memory.hpp"

namespace dsp {

PartitionDisk estimate_partition_disk(const DatasetMeta& m, const PartitionOptions& o) {
  const uint64_t n = static_cast<uint64_t>(m.num_nodes), e = static_cast<uint64_t>(m.num_edges);
  const uint64_t f = static_cast<uint64_t>(m.feature_dim), parts = static_cast<uint64_t>(o.parts);
  PartitionDisk d;
  const DType stored = partition_feature_dtype(o, m.feature_dtype);
  const uint64_t row = f * dtype_size(stored);
  if (o.feature_storage != FeatureStorage::kReference) d.features = n * row;
  if (stored == DType::kInt8) d.features += 4 * (o.feature_scale == FeatureScale::kRow ? n : f);
  d.features += o.preaggregate.size() * n * 2 * row;
  d.graph = 8 * (n + parts) + e * dtype_size(m.index_dtype);
  if (m.has_weights) d.graph += 4 * e;
  if (m.has_edge_time) d.graph += 8 * e;
  const uint64_t label_row = m.multilabel ? static_cast<uint64_t>(m.num_classes) : 8;
  d.nodes = 3 * 8 * n;  // old2new, new2old, in_degree
  if (m.num_classes > 0) d.nodes += n * label_row;
  if (m.has_node_time) d.nodes += 8 * n;
  const uint64_t splits = static_cast<uint64_t>(m.num_train + m.num_valid + m.num_test);
  d.nodes += 8 * (splits + static_cast<uint64_t>(m.num_train));  // splits, then seeds
  const uint64_t cached =
      o.cache_bytes >= 0 ? n : static_cast<uint64_t>(o.cache_ratio * static_cast<double>(n));
  d.nodes += 8 * cached;
  d.nodes += 16 * static_cast<uint64_t>(m.num_link_train + m.num_link_valid + m.num_link_test +
                                        m.num_link_valid_neg + m.num_link_test_neg);
  return d;
}

void check_partition_disk(const std::string& what, const DatasetMeta& meta,
                          const PartitionOptions& opts, const std::string& out) {
  const PartitionDisk d = estimate_partition_disk(meta, opts);
  std::string lower = "free some, or choose another OUT";
  if (opts.feature_storage != FeatureStorage::kReference && d.features > 0 &&
      opts.feature_dtype == FeatureDtype::kKeep) {
    lower += fmt::format(", or --feature-storage reference (about {} without the features' copy)",
                         format_bytes(d.total() - d.features));
  }
  check_disk(what, out, d.total(), lower);
}

}  // namespace dsp
