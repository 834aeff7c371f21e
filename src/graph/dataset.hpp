#pragma once
// The dataset directory (DESIGN.md "Data formats"): dataset.json plus .npy arrays.
//   indptr.npy       int64 [N+1]        in-neighbour CSR
//   indices.npy      int32|int64 [E]
//   edge_weight.npy  float32 [E]        optional
//   edge_time.npy    int64 [E]          optional; time of entry e's edge indices[e] -> row (aligned
//                                       with indices.npy as edge_weight.npy is); the edge exists
//                                       from that time on: a seed of time T samples it iff t < T
//   node_time.npy    int64 [N]          optional, only beside edge_time.npy; a node's own time
//                                       (the seed time of node classification)
//   features.npy     float32|float16 [N, F]   optional (F = 0 means none)
//   labels.npy       int64 [N]          optional; -1 marks an unlabeled node
//                    or int8 [N, L]     multi-label (dataset.json "multilabel": true,
//                                       num_classes = L): 0/1 per label; a row of -1 is unlabeled
//   train_idx.npy, valid_idx.npy, test_idx.npy   int64, optional, ids in [0, N), no repeats
// Link prediction (optional; each counted in dataset.json, a key written only when non-zero):
//   link_train.npy      int64 [E_tr, 2]   training positive edges (src, dst), each an entry of
//                                         the stored graph (row dst of indices.npy lists src)
//   link_valid.npy, link_test.npy   int64 [E, 2]   held-out positive edges: none an entry of the
//                                         stored graph (undirected: in neither direction), unless
//                                         dataset.json's link_held_out_in_graph is true (OGB's
//                                         ogbl-collab: a held-out pair may repeat a training one)
//   link_valid_neg.npy, link_test_neg.npy   int64 [M, 2]   fixed negative pairs of the split (OGB's
//                                         collab/ppa/ddi convention: shared by all its positives,
//                                         Hits@K and MRR rank each positive against them);
//                                         required when the split's positives exist. With
//                                         dataset.json's link_negatives_per_positive K (OGB's
//                                         ogbl-citation2: 1,000 per positive) they are per
//                                         positive instead: [E K, 2], rows [i K, (i + 1) K) are
//                                         positive i's own negatives (MRR leads)
// Every id in [0, N).
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "graph/array.hpp"
#include "graph/csr.hpp"

namespace dsp {

constexpr int kDatasetFormatVersion = 1;

struct DatasetMeta {
  int format_version = kDatasetFormatVersion;
  std::string name;
  int64_t num_nodes = 0;
  int64_t num_edges = 0;  // entries of indices.npy (an undirected edge counts twice)
  bool directed = true;   // false: the stored graph is symmetric
  DType index_dtype = DType::kInt32;
  int64_t feature_dim = 0;
  DType feature_dtype = DType::kFloat32;
  int64_t num_classes = 0;  // multi-label: the label columns L
  // labels.npy is int8 [N, L] (L = num_classes) of 0/1, a row of -1 unlabeled; written to
  // dataset.json only when true (absent: single-label int64 [N]).
  bool multilabel = false;
  bool has_weights = false;
  // edge_time.npy / node_time.npy present (written to dataset.json only when true).
  bool has_edge_time = false, has_node_time = false;
  int64_t num_train = 0, num_valid = 0, num_test = 0;
  // Rows of link_train.npy ... link_test_neg.npy (0: the file is absent).
  int64_t num_link_train = 0, num_link_valid = 0, num_link_test = 0, num_link_valid_neg = 0,
          num_link_test_neg = 0;
  // Held-out positive pairs may also be edges of the stored graph (written only when true): OGB's
  // ogbl-collab, whose later collaborations repeat earlier ones; `dsp convert --from ogb-link`
  // sets it when a split has such pairs. False: such a pair is refused as a leak.
  bool link_held_out_in_graph = false;
  // > 0: link_valid_neg/link_test_neg hold this many negatives for each held-out positive, in the
  // positives' order (written only when > 0); 0: the split's negatives are shared by its positives.
  int64_t link_negatives_per_positive = 0;
  nlohmann::json extra = nlohmann::json::object();  // provenance: generator parameters, source

  nlohmann::json to_json() const;
  // Parses and checks types and ranges; FormatError prefixed with `what` on any fault.
  static DatasetMeta from_json(const nlohmann::json& j, const std::string& what);
};

struct HeteroUnion;  // graph/hetero.hpp

struct Dataset {
  DatasetMeta meta;
  Csr graph;
  Array features;                        // [N, F] or undefined
  Array labels;                          // int64 [N], int8 [N, L] (multi-label) or undefined
  Array node_time;                       // int64 [N] or undefined (edge times are graph.times)
  Array train_idx, valid_idx, test_idx;  // int64 or undefined
  // Link prediction pairs, int64 [rows, 2] (src, dst) or undefined (see the header comment).
  Array link_train, link_valid, link_test, link_valid_neg, link_test_neg;
  std::string dir;  // where it was loaded from, for messages
  // The union graph of a heterogeneous dataset (hetero_union): its schema, type offsets, relation
  // segments and per-type features; null for a homogeneous dataset.
  std::shared_ptr<const HeteroUnion> hetero;

  // Fills meta's counts from the arrays (call before writing a dataset built in memory).
  void sync_meta();
};

struct LoadOptions {
  bool mmap = true;      // map the .npy files instead of reading them
  bool validate = true;  // full validation (O(E)); metadata/shape checks always run
};

// Loads and validates a dataset directory. Errors name the file and the fault; a link file that
// dataset.json counts but is absent, or one that holds pairs dataset.json does not count (a split
// written by hand), is named alone, with the count or the key that dataset.json lacks.
Dataset load_dataset(const std::string& dir, const LoadOptions& opts = {});
// dataset.json of a dataset directory, checked as load_dataset checks it (the same errors: a
// missing directory, an unreadable or invalid file), without touching the arrays.
DatasetMeta load_dataset_meta(const std::string& dir);
// Writes `ds` to `dir` via a staging directory renamed at the end.
void write_dataset(const Dataset& ds, const std::string& dir, bool overwrite = false);
// For writers that stream a dataset into a staging directory: loads it (mapped) and validates it
// as write_dataset does, errors naming `final_dir`, before the directory is committed.
void validate_staged_dataset(const std::string& staged_dir, const std::string& final_dir);
// Checks every invariant (shapes vs meta, CSR structure, edge and node times, label and split
// ranges, no repeated ids
// in a split, link pairs in range, training links in the graph and held-out ones not, negatives
// beside held-out positives). FormatError prefixed with `what`.
void validate_dataset(const Dataset& ds, const std::string& what);

}  // namespace dsp
