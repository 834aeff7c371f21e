#pragma once
// Co-partitioning (DSP section 2.2): nodes are split into P parts (METIS k-way balancing nodes,
// training seeds and adjacency entries; BGL's BFS blocks; PaGraph's self-reliant L-hop parts; or
// random), renumbered so part p owns the contiguous global id range [offsets[p], offsets[p+1])
// (owner lookup is a range check), and written as a partition directory:
//
//   partition.json            parts, offsets, method, cache policy and capacity, per-part stats,
//                             checksum of the source dataset, partition id, hops of replication
//   features.npy, labels.npy  renumbered (row v is the node with new id v), shared by all ranks;
//                             with --feature-storage reference no features.npy: partition.json
//                             "feature_source" names the dataset's features.npy, whose row
//                             new2old[v] is new id v's (read through the id map, no copy)
//                             multi-label labels.npy (partition.json "multilabel") int8 [N, L]
//   train_idx.npy, valid_idx.npy, test_idx.npy   new ids, ascending
//   old2new.npy, new2old.npy  int64 id maps, inverse of each other
//   in_degree.npy             int64 in-degree of every node (new ids; replicated, small)
//   node_time.npy             when the dataset has node times: renumbered like labels.npy
//   part<p>/indptr.npy, indices.npy[, edge_weight.npy][, edge_time.npy]   the in-neighbour rows
//                             of part p's nodes; entries are new global ids, each row ascending,
//                             weights and times aligned with the entries (pagraph refuses times)
//   part<p>/seeds.npy         the training seeds part p owns (new ids, ascending)
//   part<p>/cached.npy        part p's cached nodes, hottest first (new ids)
//   part<p>/part.json         part index, node range, partition id (detects mixed directories)
//   part<p>/halo_ids.npy, halo_indptr.npy, halo_indices.npy[, halo_edge_weight.npy]
//                             method pagraph only (hops L > 0): the rows part p replicates from
//                             other parts, so that its sampler reaches every node within L-1 hops
//                             of its seeds without asking another rank (halo_ids ascending, new
//                             ids; rows as in indices.npy, cut to halo_cap entries if capped)
//   link_valid.npy, link_test.npy, link_valid_neg.npy, link_test_neg.npy   when the dataset has
//                             them: its link pairs renumbered (int64 [E, 2], rows in its order)
//   part<p>/link_train.npy    when the dataset has link_train: the training edges whose source
//                             (column 0) part p owns, new ids, sorted by (src, dst)
//   preaggregated_<kind>.npy  with --preaggregate (PaGraph's PP, kind mean or gcn): [N, 2 F] in
//                             the features' dtype, row v = [x_v | a_v], a_v the first layer's
//                             aggregation over v's whole in-neighbourhood (preaggregation.hpp);
//                             renumbered and shared like features.npy
//   part<p>/relation_indptr.npy   heterogeneous partitions (graph/hetero.hpp): int64
//                             [rows * R + 1], relation r's segment of the part's row i is entries
//                             [relation_indptr[i R + r], relation_indptr[i R + r + 1]) of its
//                             indices.npy (each row: its relations in order, each ascending)
//   features_<type>.npy       heterogeneous partitions: type <type>'s features, row j = the type's
//                             j-th node in new id order (HeteroLayout::type_index), its own width
//                             and dtype (converted as --feature-dtype says); no features.npy
//   feature_scale.npy         with --feature-dtype int8: float32 scales, [1, F] (one per column)
//                             or [N, 1] (one per node, renumbered), so that in numpy
//                             features * feature_scale is the dequantized [N, F] (see
//                             core/quant.hpp and partition_quant.cpp)
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/choice.hpp"
#include "core/quant.hpp"
#include "graph/array.hpp"
#include "graph/csr.hpp"
#include "graph/dataset.hpp"
#include "graph/hetero.hpp"
#include "layout/partition/hotness.hpp"
#include "layout/partition/preaggregation.hpp"

namespace dsp {

constexpr int kPartitionFormatVersion = 1;

// BGL's partitioner (NSDI'23 section 3.3), for graphs beyond METIS (more than 2^31-1 entries, or
// more memory than the machine has): multi-source BFS grows blocks of at most block_size nodes,
// small blocks merge into adjacent large ones (then at random), and blocks are assigned greedily
// to the part maximising (block neighbours within `hops` hops already there) x (1 - seeds/seed
// capacity) x (1 - nodes/node capacity) [x (1 - entries/entry capacity)]. Works on int32 or int64
// entries, streaming over the
// (mapped) CSR: O(N) small arrays plus the block graph, no copy of the entries.
struct BfsBlockOptions {
  // Nodes at which a BFS block stops growing; 0: N / (256 parts), at least min(256, N / (4 parts)).
  int64_t block_size = 0;
  int hops = 2;         // j: hops of block neighbours the assignment counts
  double slack = 0.05;  // node, seed (and entry) capacity of a part: (1 + slack) * mean
  // Adjacency entries as a third balance term (not in BGL): without it, a power-law graph's
  // connected core may land in one part and the isolated nodes in the other.
  bool balance_entries = true;
};

// PaGraph's self-reliant partitioner (GNNSys'21 section 3.2): training seeds are assigned one by
// one to the part maximising (1 + its seeds among the seed's L-hop in-neighbours) x (seed quota
// left) / (1 + nodes the part replicates), and every part replicates the L-hop in-neighbourhood
// of its seeds (as halo rows), so a rank samples an L-layer batch without communication.
// halo_cap > 0 keeps at most that many in-neighbours (a seeded choice) of every replicated row
// and of every row the greedy scan walks: power-law graphs otherwise replicate nearly everything.
struct PagraphOptions {
  int hops = 2;          // L: layers of the model to be trained (fanouts)
  int64_t halo_cap = 0;  // 0: replicate whole rows
};

enum class PartitionMethod { kMetis, kRandom, kBfsBlocks, kPagraph };
const Names<PartitionMethod>& names_of(PartitionMethod);  // metis, random, bfs-blocks, pagraph
// copy: features.npy holds the renumbered rows; reference: no copy, the ranks read the dataset's
// features.npy through new2old.npy (keep dtype, homogeneous graphs only).
enum class FeatureStorage { kCopy, kReference };
const Names<FeatureStorage>& names_of(FeatureStorage);
// --feature-dtype: keep (the dataset's dtype, bytes as they are), or the dtype features.npy is
// converted to. --feature-scale: int8's scales, auto (column), column or row.
enum class FeatureDtype { kKeep, kFloat32, kFloat16, kBFloat16, kInt8 };
const Names<FeatureDtype>& names_of(FeatureDtype);
enum class FeatureScale { kAuto, kColumn, kRow };
const Names<FeatureScale>& names_of(FeatureScale);

struct PartitionOptions {
  int parts = 1;
  PartitionMethod method = PartitionMethod::kMetis;
  bool balance_entries = true;  // METIS: adjacency entries as a balance constraint
  BfsBlockOptions bfs_blocks;
  PagraphOptions pagraph;
  std::string cache_policy = "in-degree";  // in-degree | out-degree | presample | random | none
  double cache_ratio = 0.1;                // share of each part's nodes cached (if cache_bytes < 0)
  int64_t cache_bytes = -1;                // per-rank cache budget in bytes of feature rows
  double seed_imbalance = 0.05;            // allowed relative excess of seeds per part
  uint64_t seed = 0;
  bool overwrite = false;
  bool verbose = true;  // progress lines per phase (time, peak memory)
  // PaGraph's first-layer pre-aggregation: kinds of preaggregated_<kind>.npy to write.
  std::vector<Preaggregation> preaggregate;
  // Storage of features.npy: keep (the dataset's dtype, bytes as they are), float32, float16,
  // bfloat16 or int8 (symmetric, a float32 scale per column or per row: feature_scale).
  FeatureDtype feature_dtype = FeatureDtype::kKeep;
  FeatureScale feature_scale = FeatureScale::kAuto;  // int8 only: auto is column
  FeatureStorage feature_storage = FeatureStorage::kCopy;
  // Bytes of a part's rows (row pointers and entries) built at a time, renumbered and sorted,
  // before they are appended to its files; a row longer than that is built alone. <= 0: the
  // whole part at once (its patch in memory).
  int64_t write_chunk_bytes = int64_t{64} << 20;
  // Visit counts for cache_policy "presample" (the sampler module's make_presample_fn); layout
  // cannot depend on the sampler, so the caller injects it.
  PresampleFn presample;
};

struct PartStats {
  int64_t begin = 0, end = 0;  // owned global id range
  int64_t edges = 0, seeds = 0, cached = 0;
  int64_t halo_nodes = 0, halo_edges = 0;  // replicated rows (pagraph)
  int64_t reach = 0;       // pagraph: nodes within L hops of the part's seeds (features it reads)
  int64_t link_train = 0;  // training edges whose source the part owns (link prediction)
};

// How features.npy was converted from the dataset's features (--feature-dtype other than keep),
// and what that cost: errors over all N x F entries against the source values in float32.
// partition.json's feature_conversion.scale: int8's scales, per column or per row
// (feature_scale.npy [1, F] or [N, 1]); none for the other dtypes.
enum class StoredScale { kNone, kColumn, kRow };
const Names<StoredScale>& names_of(StoredScale);

struct FeatureConversion {
  bool converted = false;  // false: features.npy holds the dataset's values as they are
  DType source_dtype = DType::kFloat32;
  StoredScale scale = StoredScale::kNone;  // int8: column or row
  double max_abs_error = 0;
  double rel_rms_error = 0;  // sqrt(sum (x' - x)^2 / sum x^2); 0 when every x is 0
};

// A heterogeneous partition's types: renumbering by (part, union id) keeps each type contiguous in
// each part, so part p's nodes of type t are the new ids [bounds[p T + t], bounds[p T + t + 1])
// (bounds[p T] = offsets[p]); the type of an id is a binary search, as its owner is.
struct HeteroLayout {
  HeteroSchema schema;
  int parts = 0;
  std::vector<int64_t> bounds;  // [parts * T + 1]
  std::vector<int64_t> before;  // [parts * T]: nodes of the same type in the parts before p

  int num_types() const { return schema.num_types(); }
  int num_relations() const { return schema.num_relations(); }
  // The (part, type) slot of new id v: bounds[s] <= v < bounds[s + 1], s = p T + t.
  int64_t slot(int64_t v) const;
  int type_of(int64_t v) const { return static_cast<int>(slot(v) % num_types()); }
  // v's row in its type's features_<type>.npy (the type's new ids in ascending order).
  int64_t type_index(int64_t v) const;
  // The new ids of type t's j-th node (inverse of type_index).
  int64_t type_node(int t, int64_t j) const;
  nlohmann::json to_json() const;
  // `offsets` are the partition's; FormatError prefixed `what` on a fault.
  static HeteroLayout from_json(const nlohmann::json& j, const std::vector<int64_t>& offsets,
                                const std::string& what);
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
  int64_t edge_cut = 0;  // entries whose endpoints are owned by different parts
  int hops = 0;          // > 0: parts replicate the halo rows of their L-hop samplers
  int64_t halo_cap = 0;  // entries kept per replicated row (0: all)
  std::vector<Preaggregation> preaggregated;  // kinds of preaggregated_<kind>.npy (PaGraph's PP)
  int64_t num_nodes = 0, num_edges = 0, feature_dim = 0, num_classes = 0;
  // The dataset's multi-label labels: labels.npy int8 [N, num_classes] (DatasetMeta::multilabel).
  bool multilabel = false;
  // The dataset's link_negatives_per_positive: link_valid_neg/link_test_neg hold this many
  // negatives per held-out positive (0: shared by the split's positives).
  int64_t link_negatives_per_positive = 0;
  DType feature_dtype = DType::kFloat32;  // of features.npy
  FeatureConversion feature_conversion;
  // --feature-storage reference: the dataset's features.npy (absolute path) read through
  // new2old.npy, and feature_fingerprint() of it when partitioned; empty: features.npy here.
  std::string feature_source;
  uint64_t feature_source_fingerprint = 0;
  DType index_dtype = DType::kInt32;
  bool has_weights = false;
  // The dataset's edge_time.npy / node_time.npy, carried as part<p>/edge_time.npy (aligned with
  // the part's indices.npy as edge_weight.npy is) and node_time.npy (renumbered like labels).
  bool has_edge_time = false, has_node_time = false;
  std::string dataset_name;
  uint64_t source_checksum = 0;  // dataset_checksum() of the source
  uint64_t partition_id = 0;     // ties part<p>/ directories to this partition.json
  nlohmann::json extra = nlohmann::json::object();
  // Heterogeneous partitions only (partition.json "hetero"); null otherwise.
  std::shared_ptr<const HeteroLayout> hetero;

  // Owner of a new global id: binary search over offsets.
  int owner(int64_t v) const;
  nlohmann::json to_json() const;
  static PartitionMeta from_json(const nlohmann::json& j, const std::string& what);
};

// Digest of a dataset's meta and arrays (graph, features, labels, splits).
uint64_t dataset_checksum(const Dataset& ds);
// Digest of a features array's shape, dtype and 4097 of its rows (evenly spread, first and last
// included): what a partition that reads the dataset's features by reference checks at load, so
// that a dataset regenerated or replaced under it is refused without reading every row.
uint64_t feature_fingerprint(const Array& features);

// Part assignment of every node (values in [0, parts)).
std::vector<int32_t> assign_random(int64_t num_nodes, int parts, uint64_t seed);
// METIS k-way on the symmetrized graph without self loops, with up to three balance
// constraints: nodes, training seeds (when there are any; with link_train, each node weighs its
// training edges as source instead), and adjacency entries of the parts' patches (in-degrees;
// `balance_entries`). Throws InvalidArgument naming METIS's 32-bit limit
// when the graph has more than 2^31-1 adjacency entries.
// `max_entries` is METIS's limit (2^31-1 with Debian's 32-bit idx_t); tests lower it.
constexpr int64_t kMetisMaxEntries = 2147483647;
std::vector<int32_t> assign_metis(const Dataset& ds, int parts, uint64_t seed, bool verbose,
                                  int64_t max_entries = kMetisMaxEntries,
                                  bool balance_entries = true);
// BGL's BFS blocks (see BfsBlockOptions). `report` (if given) receives block counts and the
// time and memory of each phase.
std::vector<int32_t> assign_bfs_blocks(const Csr& g, const Array& train_idx, int parts,
                                       const BfsBlockOptions& opts, uint64_t seed, bool verbose,
                                       nlohmann::json* report = nullptr);
// PaGraph's greedy assignment of training seeds (see PagraphOptions); every other node goes to
// the least loaded part among those whose seeds reach it within L hops (any part if none does).
std::vector<int32_t> assign_pagraph(const Csr& g, const Array& train_idx, int parts,
                                    const PagraphOptions& opts, uint64_t seed, bool verbose,
                                    nlohmann::json* report = nullptr);
// The in-neighbours of v that a replicated row keeps under halo_cap (all of them if cap <= 0 or
// the row is short enough): the `cap` entries with the smallest seeded hash, in row order.
std::vector<int64_t> capped_row(const Csr& g, int64_t v, int64_t cap, uint64_t seed);

// Moves seeds between parts until every part has at most (1 + tol) * mean seeds, preferring seeds
// with the most neighbours in the receiving part. Returns the number of nodes moved.
int64_t rebalance_seeds(const Csr& g, const Array& train_idx, int parts, double tol,
                        std::vector<int32_t>& assign);

// Runs the whole pipeline and writes `out` atomically. Returns the meta it wrote. Refuses an
// `out` that is the dataset's directory or contains it (check_partition_out).
PartitionMeta partition_dataset(const Dataset& ds, const PartitionOptions& opts,
                                const std::string& out);
// The method and its own options (pagraph's hops): partition_dataset checks them; the CLI also
// calls it before loading the dataset.
void check_partition_method(const PartitionOptions& opts);
// InvalidArgument when writing a partition to `out` would destroy the dataset in `dataset_dir`
// (the same directory, or one containing it; --overwrite would replace it). partition_dataset
// checks it; the CLI also calls it before loading the dataset.
void check_partition_out(const std::string& dataset_dir, const std::string& out);

// What one rank loads: the meta, its own patch and seeds and cache list, and the shared arrays
// (mapped, not copied).
struct PartitionData {
  PartitionMeta meta;
  std::string dir;
  int part = 0;
  Csr patch;       // num_nodes = rows of the part; entries are global ids
  Array seeds;     // int64
  Array cached;    // int64, hottest first
  Array features;  // [N, F] mapped, renumbered, in meta.feature_dtype
  // meta.feature_source set: `features` is the dataset's (old ids) and feature_rows (new2old.npy,
  // int64 [N], mapped) gives the row of new id v; undefined otherwise (row v is new id v's).
  Array feature_rows;
  // int8 features: float32 [1, F] (per column) or [N, 1] (per node); undefined otherwise.
  Array feature_scale;
  Array labels;  // int64 [N], or int8 [N, L] when meta.multilabel (a row of -1: unlabeled)
  Array
      node_time;  // int64 [N] (has_node_time), else undefined; the patch's edge times: patch.times
  Array train_idx, valid_idx, test_idx;
  Array in_degree;  // int64 [N]
  Array halo_ids;   // int64, ascending: replicated rows (pagraph partitions; else undefined)
  Csr halo;         // their rows (num_nodes = halo_ids.dim(0)); entries are global ids
  // Link prediction (undefined when the dataset has none), int64 [E, 2] in new ids: this part's
  // training edges (sources owned, sorted by (src, dst)) and the shared held-out pairs.
  Array link_train;
  Array link_valid, link_test, link_valid_neg, link_test_neg;
  // Heterogeneous partitions (meta.hetero): the part's relation segments (int64 [rows * R + 1])
  // and each type's features ([type's nodes, its width], mapped; undefined for a type without).
  Array relation_indptr;
  std::vector<Array> type_features;
};

// Makes `to` share `from`'s node-indexed arrays (features, labels, splits, in-degrees, the
// held-out link pairs): every
// part of a partition maps the same node files, so a view built from one part (the replicated
// view, the roles' whole-graph view) takes them as they are, without copies.
void share_node_arrays(const PartitionData& from, PartitionData& to);

// A heterogeneous part's view of type t as a homogeneous partition over the type's own ids
// (HeteroLayout::type_index): meta.offsets the type's per-part counts summed, features
// type_features[t], cached = the part's cached nodes of type t (type ids, hottest first), no
// graph. A FeatureStore over it, given hetero_type_cache_lists as its all_cached (the parts'
// cached.npy hold union ids), serves type t's rows; the view shares `part`'s arrays.
PartitionData hetero_type_view(const PartitionData& part, int t);
// Every part's cached nodes of type t in type ids (hottest first): the FeatureStore's all_cached
// for hetero_type_view(part, t), from `all_cached` (a train-time policy's lists, union ids) or,
// when empty, each part's cached.npy.
std::vector<Array> hetero_type_cache_lists(const PartitionData& part,
                                           const std::vector<Array>& all_cached, int t);

PartitionMeta load_partition_meta(const std::string& dir);
// Loads part `part` of the partition in `dir`; `expected_parts` (if > 0) must equal the number of
// parts (the world size of the job). Errors name the file and the fault.
PartitionData load_partition(const std::string& dir, int part, int expected_parts = -1);
// The training edges' destinations counted over every part's link_train.npy (new ids, [N]): the
// link relation's in-degrees of a typed graph (--negatives unigram). FormatError naming a part's
// file when it does not match partition.json.
std::vector<int64_t> link_destination_counts(const std::string& dir, const PartitionMeta& meta);
// The sampling view of a self-reliant part (meta.hops > 0): one part over all N global ids whose
// rows are part `part.part`'s own rows and its halo rows, every other row empty. A sampler over it
// with the self communicator draws exactly the blocks the collective sampler draws over the whole
// graph, for seeds of this part and up to meta.hops layers (halo_cap = 0), with no communication.
// Costs 8 (N + 1) bytes of row pointers plus a copy of the part's rows. InvalidArgument if the
// partition replicates nothing.
PartitionData replicated_view(const PartitionData& part);

// PaGraph's first-layer pre-aggregation (PP). The first layer of GraphSAGE-mean and of GCN is a
// linear map of [x_v | a_v]; with a_v computed once over v's whole in-neighbourhood N(v) (the
// in-neighbour rows of the graph, edge weights ignored as the models ignore them) a job samples one
// hop fewer and loads the rows of the last sampled frontier only:
//   mean: a_v = mean_{u in N(v)} x_u (0 when N(v) is empty): SAGEConv's neighbour mean;
//   gcn:  a_v = sum_{u in N(v) + v} x_u / sqrt((d_out(u) + 1)(|N(v)| + 1)), d_out(u) the entries
//         naming u in the whole graph: the GCN layer's norm='both' aggregation (aggregate.hpp) on
//         the block whose destinations are all nodes, i.e. Kipf & Welling's normalisation.
// Sums run in double in row order and round once to the features' dtype.
// Writes preaggregated_<kind>.npy for the dataset's graph and features, rows in the order
// new2old (row i is the node new2old[i]), streamed in chunks of rows.
void write_preaggregated(const Csr& g, const Array& features, const std::vector<int64_t>& new2old,
                         Preaggregation kind, const std::string& path);
// Maps `dir`/preaggregated_<kind>.npy of a loaded part, checks its shape and dtype and the part's
// rows are finite. FormatError naming the file; InvalidArgument when the partition was written
// without that kind (naming the dsp partition option that writes it).
Array load_preaggregated(const PartitionData& part, Preaggregation kind);

// --feature-dtype / --feature-scale (partition_quant.cpp). The dtype features.npy gets from a
// dataset whose features are `source`; InvalidArgument for an unknown name or a bad combination.
DType partition_feature_dtype(const PartitionOptions& opts, DType source);
// Writes features.npy (rows in the order new2old, converted as opts says) and, for int8,
// feature_scale.npy; refuses (InvalidArgument naming the node and column) a value that is not
// finite or whose conversion is not. Returns what the conversion cost.
// `what` names the source in messages.
FeatureConversion write_converted_features(const Array& features,
                                           const std::vector<int64_t>& new2old,
                                           const PartitionOptions& opts, const std::string& what,
                                           const std::string& features_path,
                                           const std::string& scale_path);
// How a partition's stored features decode (core/quant.hpp): column scales in the codec, per-node
// scales in *row_scale ([N], null when there are none).
FeatureCodec stored_feature_codec(const Array& features, const Array& feature_scale,
                                  const float** row_scale);
// Element (i, j) of a partition's stored features as float32 (decoded as the gather decodes).
float stored_feature(const Array& features, const Array& feature_scale, int64_t i, int64_t j);
// The line `dsp partition` prints about the features' storage and its error.
std::string describe_feature_storage(const PartitionMeta& m);

// Throws FormatError if `ds` is not the dataset `meta` was made from.
void check_partition_source(const PartitionMeta& meta, const Dataset& ds);

}  // namespace dsp
