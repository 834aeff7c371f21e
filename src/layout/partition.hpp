#pragma once
// Co-partitioning (DSP section 2.2): nodes are split into P parts (METIS k-way balancing nodes and
// training seeds, or random), renumbered so part p owns the contiguous global id range
// [offsets[p], offsets[p+1]) (owner lookup is a range check), and written as a partition
// directory:
//
//   partition.json            parts, offsets, method, cache policy and capacity, per-part stats,
//                             checksum of the source dataset, partition id
//   features.npy, labels.npy  renumbered (row v is the node with new id v), shared by all ranks
//   train_idx.npy, valid_idx.npy, test_idx.npy   new ids, ascending
//   old2new.npy, new2old.npy  int64 id maps, inverse of each other
//   in_degree.npy             int64 in-degree of every node (new ids; replicated, small)
//   part<p>/indptr.npy, indices.npy[, edge_weight.npy]   the in-neighbour rows of part p's
//                             nodes; entries are new global ids, each row ascending
//   part<p>/seeds.npy         the training seeds part p owns (new ids, ascending)
//   part<p>/cached.npy        part p's cached nodes, hottest first (new ids)
//   part<p>/part.json         part index, node range, partition id (detects mixed directories)
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "graph/array.hpp"
#include "graph/csr.hpp"
#include "graph/dataset.hpp"
#include "layout/hotness.hpp"

namespace dsp {

constexpr int kPartitionFormatVersion = 1;

struct PartitionOptions {
  int parts = 1;
  std::string method = "metis";           // metis | random
  std::string cache_policy = "in-degree";  // in-degree | out-degree | presample | random | none
  double cache_ratio = 0.1;               // share of each part's nodes cached (if cache_bytes < 0)
  int64_t cache_bytes = -1;               // per-rank cache budget in bytes of feature rows
  double seed_imbalance = 0.05;           // allowed relative excess of seeds per part
  uint64_t seed = 0;
  bool overwrite = false;
  bool verbose = true;                    // progress lines per phase (time, peak memory)
  // Visit counts for cache_policy "presample" (the sampler module's make_presample_fn); layout
  // cannot depend on the sampler, so the caller injects it.
  PresampleFn presample;
};

struct PartStats {
  int64_t begin = 0, end = 0;  // owned global id range
  int64_t edges = 0, seeds = 0, cached = 0;
};

struct PartitionMeta {
  int format_version = kPartitionFormatVersion;
  int parts = 0;
  std::vector<int64_t> offsets;  // [parts + 1]
  std::string method, cache_policy;
  double cache_ratio = 0;
  int64_t cache_bytes = -1;
  int64_t cache_rows = 0;  // per part capacity in rows (the part's own count may be smaller)
  std::vector<PartStats> part;
  int64_t edge_cut = 0;          // entries whose endpoints are owned by different parts
  int64_t num_nodes = 0, num_edges = 0, feature_dim = 0, num_classes = 0;
  DType feature_dtype = DType::kFloat32;
  DType index_dtype = DType::kInt32;
  bool has_weights = false;
  std::string dataset_name;
  uint64_t source_checksum = 0;  // dataset_checksum() of the source
  uint64_t partition_id = 0;     // ties part<p>/ directories to this partition.json
  nlohmann::json extra = nlohmann::json::object();

  // Owner of a new global id: binary search over offsets.
  int owner(int64_t v) const;
  nlohmann::json to_json() const;
  static PartitionMeta from_json(const nlohmann::json& j, const std::string& what);
};

// Digest of a dataset's meta and arrays (graph, features, labels, splits).
uint64_t dataset_checksum(const Dataset& ds);

// Part assignment of every node (values in [0, parts)).
std::vector<int32_t> assign_random(int64_t num_nodes, int parts, uint64_t seed);
// METIS k-way on the symmetrized graph without self loops, with two balance constraints
// (nodes, training seeds). Throws InvalidArgument naming METIS's 32-bit limit when the graph
// has more than 2^31-1 adjacency entries.
// `max_entries` is METIS's limit (2^31-1 with Debian's 32-bit idx_t); tests lower it.
constexpr int64_t kMetisMaxEntries = 2147483647;
std::vector<int32_t> assign_metis(const Dataset& ds, int parts, uint64_t seed, bool verbose,
                                  int64_t max_entries = kMetisMaxEntries);
// Moves seeds between parts until every part has at most (1 + tol) * mean seeds, preferring seeds
// with the most neighbours in the receiving part. Returns the number of nodes moved.
int64_t rebalance_seeds(const Csr& g, const Array& train_idx, int parts, double tol,
                        std::vector<int32_t>& assign);

// Runs the whole pipeline and writes `out` atomically. Returns the meta it wrote.
PartitionMeta partition_dataset(const Dataset& ds, const PartitionOptions& opts,
                                const std::string& out);

// What one rank loads: the meta, its own patch and seeds and cache list, and the shared arrays
// (mapped, not copied).
struct PartitionData {
  PartitionMeta meta;
  std::string dir;
  int part = 0;
  Csr patch;           // num_nodes = rows of the part; entries are global ids
  Array seeds;         // int64
  Array cached;        // int64, hottest first
  Array features;      // [N, F] mapped, renumbered
  Array labels;        // int64 [N]
  Array train_idx, valid_idx, test_idx;
  Array in_degree;     // int64 [N]
};

PartitionMeta load_partition_meta(const std::string& dir);
// Loads part `part` of the partition in `dir`; `expected_parts` (if > 0) must equal the number of
// parts (the world size of the job). Errors name the file and the fault.
PartitionData load_partition(const std::string& dir, int part, int expected_parts = -1);
// Throws FormatError if `ds` is not the dataset `meta` was made from.
void check_partition_source(const PartitionMeta& meta, const Dataset& ds);

}  // namespace dsp
