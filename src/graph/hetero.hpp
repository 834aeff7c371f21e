#pragma once
// Heterogeneous graphs: typed nodes and typed relations (OGB-MAG's papers, authors, institutions
// and fields; users, items and categories).
//
// Dataset directory (dsp convert --from ogb-hetero, dsp generate hetero); numpy reads it as is:
//   dataset.json   {"format_version", "name", "hetero": HeteroSchema::to_json(), "num_train",
//                   "num_valid", "num_test", "extra"}: node types in id order (name, count,
//                   feature_dim, feature_dtype), relations (src, name, dst, edges), the target
//                   type and its classes
//   nodes/<type>/features.npy          float32|float16 [count, feature_dim], for the types whose
//                                      feature_dim > 0 (each type its own width and dtype)
//   labels.npy                         int64 [count of the target type], -1: unlabeled
//   train_idx.npy, valid_idx.npy, test_idx.npy   int64, ids of the target type, no repeats
//   link_train.npy, link_valid.npy, link_test.npy, link_valid_neg.npy, link_test_neg.npy
//                                      when "hetero" names a link_relation: its link-prediction
//                                      pairs (HeteroDataset::link_*), counts num_link_* in
//                                      dataset.json as for a homogeneous dataset
//   relations/<src>___<name>___<dst>/indptr.npy   int64 [count(dst) + 1]
//   relations/<src>___<name>___<dst>/indices.npy  int32|int64 [edges]: in-neighbour CSR of the
//                                      relation: row v (an id of dst) lists the src ids u with an
//                                      edge u -> v; each row ascending, no repeats
// Every id is local to its type: [0, count). A relation's key src___name___dst is unique; names
// may repeat across keys (OGB's "cites" vs "rev_cites" are distinct names anyway).
//
// The union graph (hetero_union): one id space, type t's nodes at [type_offsets[t],
// type_offsets[t + 1]) in type order, and one in-neighbour CSR whose row v is the concatenation,
// in relation order, of v's rows in the relations whose dst is v's type, each segment ascending
// (global ids). relation_indptr[v * R + r] .. relation_indptr[v * R + r + 1] is relation r's
// segment of row v (empty when r's dst is not v's type). Partitioning, the collective sampler and
// the feature store work on it; renumbering by (part, union id) keeps each type contiguous per
// part (partition.hpp: HeteroLayout).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "graph/array.hpp"
#include "graph/csr.hpp"
#include "graph/dataset.hpp"

namespace dsp {

struct NodeTypeInfo {
  std::string name;
  int64_t count = 0;
  int64_t feature_dim = 0;  // 0: no features (the trainer gives it learnable embeddings)
  DType feature_dtype = DType::kFloat32;
};

struct RelationInfo {
  std::string src, name, dst;
  int64_t edges = 0;
  int src_type = -1, dst_type = -1;  // indices into HeteroSchema::node_types (filled by from_json)
  std::string key() const { return src + "___" + name + "___" + dst; }
};

struct HeteroSchema {
  std::vector<NodeTypeInfo> node_types;  // id order of the union graph
  std::vector<RelationInfo> relations;   // relation order of the union rows
  std::string target_type;               // the type labels and splits are on
  int target = -1;                       // its index
  int64_t num_classes = 0;
  // The relation the link-prediction files (link_*.npy) are on, by key; empty: none.
  std::string link_relation;
  int link = -1;  // its index (filled by resolve)

  int num_types() const { return static_cast<int>(node_types.size()); }
  int num_relations() const { return static_cast<int>(relations.size()); }
  // [T + 1] union id offsets of the types.
  std::vector<int64_t> type_offsets() const;
  int64_t num_nodes() const;
  // Index of a type / a relation (by key src___name___dst, or by name when unique); -1 if none.
  int type_index(const std::string& name) const;
  int relation_index(const std::string& key_or_name) const;
  // The reverse of relation r: (dst, rev_<name>, src), or (dst, <name>, src) when r is named
  // rev_<name> (add_reverse_relations' convention); -1 when the schema has none.
  int reverse_of(int r) const;
  // Fills src_type/dst_type/target and checks names (unique, non-empty, no "___" or '/'), every
  // relation naming known types, counts >= 0, feature dims >= 0: FormatError prefixed `what`,
  // e.g. "relation author___writes___paper names an unknown node type 'autor'".
  void resolve(const std::string& what);
  nlohmann::json to_json() const;
  static HeteroSchema from_json(const nlohmann::json& j, const std::string& what);
};

struct HeteroDataset {
  std::string name;
  HeteroSchema schema;
  std::vector<Array> features;  // per type: [count, feature_dim] or undefined
  std::vector<Csr> relations;   // per relation: rows = dst ids, entries = src ids (type-local)
  Array labels;                 // int64 [count of target] or undefined
  Array train_idx, valid_idx, test_idx;  // int64 target-local ids, or undefined
  // Link prediction on schema.link_relation (split_hetero_links): int64 [E, 2] pairs (an id of the
  // relation's source type, one of its destination type), as the homogeneous link files
  // (dataset.hpp): training edges (each an edge of the relation), held-out ones (none an edge of
  // it) and their fixed negatives (K per held-out edge when link_negatives_per_positive is K).
  Array link_train, link_valid, link_test, link_valid_neg, link_test_neg;
  int64_t link_negatives_per_positive = 0;
  nlohmann::json extra = nlohmann::json::object();  // provenance (generator, source)
  std::string dir;                                  // where it was loaded from, for messages

  // Fills the schema's counts (edges, feature dims and dtypes) from the arrays.
  void sync_schema();
};

// dataset.json of `dir` names a heterogeneous dataset (has a "hetero" object).
bool is_hetero_dataset(const std::string& dir);
HeteroDataset load_hetero_dataset(const std::string& dir, const LoadOptions& opts = {});
// dataset.json of `ds` as write_hetero_dataset writes it.
nlohmann::json hetero_json(const HeteroDataset& ds);
// Writes `ds` to `dir` through a staging directory renamed at the end (validated first).
void write_hetero_dataset(const HeteroDataset& ds, const std::string& dir, bool overwrite = false);
// Every invariant: schema vs arrays (counts, widths, dtypes), each relation's CSR (rows = dst
// count, ids < src count, rows ascending without repeats), labels in [-1, classes), splits in
// range without repeats. FormatError naming the file and the fault, e.g.
// "DIR/relations/author___writes___paper/indices.npy: entry 12 is 700, outside author's 600 ids".
void validate_hetero_dataset(const HeteroDataset& ds, const std::string& what);
// Adds, for every relation (src, name, dst) without one, its reverse (dst, "rev_" + name, src),
// after the existing relations, in their order.
void add_reverse_relations(HeteroDataset& ds);

// The union graph (see the header comment). `relation_indptr` gets [N * R + 1] int64. The
// Dataset's graph is the union CSR (int64 indices when N >= 2^31, else int32), labels [N] (-1
// outside the target type), splits in union ids, no features (they stay per type), and
// `hetero` set.
struct HeteroUnion {
  HeteroSchema schema;
  std::vector<int64_t> type_offsets;  // [T + 1]
  Array relation_indptr;              // int64 [N * R + 1]
  std::vector<Array> features;        // per type, as in the dataset (shared, not copied)
};
Dataset hetero_union(const HeteroDataset& ds);

}  // namespace dsp
