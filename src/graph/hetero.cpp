#include "graph/hetero.hpp"

#include <algorithm>
#include <filesystem>
#include <set>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "graph/hetero_detail.hpp"
#include "graph/npy.hpp"
#include "graph/validate.hpp"

namespace dsp {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace detail {

Csr build_relation_csr(int64_t num_src, int64_t num_dst, const int64_t* src, const int64_t* dst,
                       int64_t m, const std::string& what, bool remove_self_loops) {
  for (int64_t i = 0; i < m; ++i) {
    if (src[i] < 0 || src[i] >= num_src || dst[i] < 0 || dst[i] >= num_dst) {
      DSP_THROW_T(FormatError, "{}: edge {} ({} -> {}) is outside [0, {}) x [0, {})", what, i,
                  src[i], dst[i], num_src, num_dst);
    }
  }
  CsrBuildOptions o;
  o.remove_self_loops = remove_self_loops;
  o.force_int64 = std::max(num_src, num_dst) >= (int64_t{1} << 31);
  Csr g = build_in_csr<int64_t>(std::max(num_src, num_dst), src, dst, m, nullptr, o);
  g.indptr.shrink_first_dim(num_dst + 1);  // the rows past num_dst are empty
  g.num_nodes = num_dst;
  return g;
}

std::string relation_dir(const std::string& dir, const RelationInfo& r) {
  return (fs::path(dir) / "relations" / r.key()).string();
}

std::string node_type_dir(const std::string& dir, const std::string& type) {
  return (fs::path(dir) / "nodes" / type).string();
}

bool valid_hetero_name(const std::string& name) {
  return !name.empty() && name.find("___") == std::string::npos &&
         name.find('/') == std::string::npos;
}

}  // namespace detail

namespace {

std::string join(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / name).string();
}

// JSON fields of dataset.json's "hetero" object: FormatError prefixed `what` naming the key.
const json& field(const json& j, const char* key, const std::string& what) {
  DSP_CHECK_FORMAT(j.is_object(), "{}: expected a JSON object, got {}", what, j.type_name());
  auto it = j.find(key);
  DSP_CHECK_FORMAT(it != j.end(), "{}: missing key '{}'", what, key);
  return *it;
}

int64_t int_field(const json& j, const char* key, const std::string& what, int64_t def = -1) {
  if (def >= 0 && j.is_object() && !j.contains(key)) return def;
  const json& v = field(j, key, what);
  DSP_CHECK_FORMAT(v.is_number_integer() && (v.is_number_unsigned() || v.get<int64_t>() >= 0) &&
                       (!v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t{INT64_MAX}),
                   "{}: '{}' must be a non-negative integer, got {}", what, key, v.dump());
  return v.get<int64_t>();
}

std::string string_field(const json& j, const char* key, const std::string& what) {
  const json& v = field(j, key, what);
  DSP_CHECK_FORMAT(v.is_string(), "{}: '{}' must be a string, got {}", what, key, v.type_name());
  return v.get<std::string>();
}

DType feature_dtype_of(const std::string& s, const std::string& what) {
  for (DType t : {DType::kFloat32, DType::kFloat16}) {
    if (s == dtype_name(t)) return t;
  }
  DSP_THROW_T(FormatError, "{}: feature_dtype '{}' is not one of: float32, float16", what, s);
}

std::string describe(const Array& a) { return a.defined() ? a.describe() : "nothing"; }

}  // namespace

// ---------------------------------------------------------------- HeteroSchema

std::vector<int64_t> HeteroSchema::type_offsets() const {
  std::vector<int64_t> off(node_types.size() + 1, 0);
  for (size_t t = 0; t < node_types.size(); ++t) off[t + 1] = off[t] + node_types[t].count;
  return off;
}

int64_t HeteroSchema::num_nodes() const { return type_offsets().back(); }

int HeteroSchema::type_index(const std::string& name) const {
  for (int t = 0; t < num_types(); ++t) {
    if (node_types[t].name == name) return t;
  }
  return -1;
}

int HeteroSchema::relation_index(const std::string& key_or_name) const {
  for (int r = 0; r < num_relations(); ++r) {
    if (relations[r].key() == key_or_name) return r;
  }
  int found = -1;
  for (int r = 0; r < num_relations(); ++r) {
    if (relations[r].name != key_or_name) continue;
    if (found >= 0) return -1;  // the name is not unique: only the key says which
    found = r;
  }
  return found;
}

int HeteroSchema::reverse_of(int r) const {
  const RelationInfo& rel = relations.at(static_cast<size_t>(r));
  RelationInfo rev{rel.dst, "rev_" + rel.name, rel.src};
  for (int pass = 0; pass < 2; ++pass) {
    for (int q = 0; q < num_relations(); ++q) {
      if (relations[q].key() == rev.key()) return q;
    }
    if (rel.name.rfind("rev_", 0) != 0) return -1;
    rev.name = rel.name.substr(4);
  }
  return -1;
}

void HeteroSchema::resolve(const std::string& what) {
  std::set<std::string> names;
  for (const NodeTypeInfo& t : node_types) {
    DSP_CHECK_FORMAT(detail::valid_hetero_name(t.name),
                     "{}: node type name '{}' must be non-empty, without '___' or '/'", what,
                     t.name);
    DSP_CHECK_FORMAT(names.insert(t.name).second, "{}: node type '{}' is listed twice", what,
                     t.name);
    DSP_CHECK_FORMAT(t.count >= 0, "{}: node type {} has a negative count {}", what, t.name,
                     t.count);
    DSP_CHECK_FORMAT(t.feature_dim >= 0, "{}: node type {} has a negative feature_dim {}", what,
                     t.name, t.feature_dim);
    DSP_CHECK_FORMAT(t.feature_dtype == DType::kFloat32 || t.feature_dtype == DType::kFloat16,
                     "{}: node type {}: features must be float32 or float16, got {}", what, t.name,
                     dtype_name(t.feature_dtype));
  }
  std::set<std::string> keys;
  for (RelationInfo& r : relations) {
    for (const std::string* s : {&r.src, &r.name, &r.dst}) {
      DSP_CHECK_FORMAT(detail::valid_hetero_name(*s),
                       "{}: relation {}: '{}' must be non-empty, without '___' or '/'", what,
                       r.key(), *s);
    }
    r.src_type = type_index(r.src);
    r.dst_type = type_index(r.dst);
    for (const std::string* s : {&r.src, &r.dst}) {
      DSP_CHECK_FORMAT(type_index(*s) >= 0, "{}: relation {} names an unknown node type '{}'", what,
                       r.key(), *s);
    }
    DSP_CHECK_FORMAT(r.edges >= 0, "{}: relation {} has a negative edge count {}", what, r.key(),
                     r.edges);
    DSP_CHECK_FORMAT(keys.insert(r.key()).second, "{}: duplicate relation key {}", what, r.key());
  }
  target = target_type.empty() ? -1 : type_index(target_type);
  DSP_CHECK_FORMAT(target_type.empty() || target >= 0,
                   "{}: target_type '{}' is not one of the node types", what, target_type);
  DSP_CHECK_FORMAT(num_classes >= 0, "{}: negative num_classes {}", what, num_classes);
  DSP_CHECK_FORMAT(target >= 0 || num_classes == 0,
                   "{}: num_classes is {} but there is no target_type to label", what, num_classes);
  link = -1;
  for (int r = 0; r < num_relations() && !link_relation.empty(); ++r) {
    if (relations[r].key() == link_relation) link = r;
  }
  DSP_CHECK_FORMAT(link_relation.empty() || link >= 0,
                   "{}: link_relation '{}' is not the key of one of its relations", what,
                   link_relation);
}

json HeteroSchema::to_json() const {
  json types = json::array(), rels = json::array();
  for (const NodeTypeInfo& t : node_types) {
    types.push_back({{"name", t.name},
                     {"count", t.count},
                     {"feature_dim", t.feature_dim},
                     {"feature_dtype", dtype_name(t.feature_dtype)}});
  }
  for (const RelationInfo& r : relations) {
    rels.push_back({{"src", r.src}, {"name", r.name}, {"dst", r.dst}, {"edges", r.edges}});
  }
  json j = {{"node_types", types},
            {"relations", rels},
            {"target_type", target_type},
            {"num_classes", num_classes}};
  if (!link_relation.empty()) j["link_relation"] = link_relation;
  return j;
}

HeteroSchema HeteroSchema::from_json(const json& j, const std::string& what) {
  HeteroSchema s;
  const json& types = field(j, "node_types", what);
  const json& rels = field(j, "relations", what);
  DSP_CHECK_FORMAT(types.is_array() && rels.is_array(),
                   "{}: 'node_types' and 'relations' must be arrays", what);
  for (const json& t : types) {
    NodeTypeInfo info;
    info.name = string_field(t, "name", what);
    const std::string w = fmt::format("{}: node type {}", what, info.name);
    info.count = int_field(t, "count", w);
    info.feature_dim = int_field(t, "feature_dim", w, 0);
    if (t.contains("feature_dtype")) {
      info.feature_dtype = feature_dtype_of(string_field(t, "feature_dtype", w), w);
    }
    s.node_types.push_back(std::move(info));
  }
  for (const json& r : rels) {
    RelationInfo info;
    info.src = string_field(r, "src", what);
    info.name = string_field(r, "name", what);
    info.dst = string_field(r, "dst", what);
    info.edges = int_field(r, "edges", fmt::format("{}: relation {}", what, info.key()));
    s.relations.push_back(std::move(info));
  }
  if (j.contains("target_type")) s.target_type = string_field(j, "target_type", what);
  s.num_classes = int_field(j, "num_classes", what, 0);
  if (j.contains("link_relation")) s.link_relation = string_field(j, "link_relation", what);
  s.resolve(what);
  return s;
}

void HeteroDataset::sync_schema() {
  features.resize(schema.node_types.size());
  for (int t = 0; t < schema.num_types(); ++t) {
    NodeTypeInfo& info = schema.node_types[t];
    const Array& f = features[t];
    info.feature_dim = f.defined() && f.ndim() == 2 ? f.dim(1) : 0;
    if (f.defined()) info.feature_dtype = f.dtype();
  }
  for (int r = 0; r < schema.num_relations() && r < static_cast<int>(relations.size()); ++r) {
    schema.relations[r].edges = relations[r].num_edges();
  }
  if (labels.defined() && labels.dtype() == DType::kInt64) {
    const int64_t* l = labels.data<int64_t>();
    int64_t mx = -1;
    for (int64_t i = 0; i < labels.numel(); ++i) mx = std::max(mx, l[i]);
    schema.num_classes = std::max(schema.num_classes, mx + 1);
  }
  schema.resolve(name.empty() ? "heterogeneous dataset" : name);
}

// ---------------------------------------------------------------- validation

namespace {

std::string features_file(const std::string& dir, const std::string& type) {
  return join(detail::node_type_dir(dir, type), "features.npy");
}
std::string indptr_file(const std::string& dir, const RelationInfo& r) {
  return join(detail::relation_dir(dir, r), "indptr.npy");
}
std::string indices_file(const std::string& dir, const RelationInfo& r) {
  return join(detail::relation_dir(dir, r), "indices.npy");
}

// The three splits: the array, its file and its count's key in dataset.json.
struct SplitFile {
  Array HeteroDataset::*array;
  const char* file;
  const char* key;
};
constexpr SplitFile kSplitFiles[] = {{&HeteroDataset::train_idx, "train_idx.npy", "num_train"},
                                 {&HeteroDataset::valid_idx, "valid_idx.npy", "num_valid"},
                                 {&HeteroDataset::test_idx, "test_idx.npy", "num_test"}};

// The link-prediction files (on schema.link_relation): the array, its file, its count's key.
struct HeteroLinkFile {
  Array HeteroDataset::*array;
  const char* file;
  const char* key;
  bool held_out;  // link_valid / link_test: pairs that must not be edges of the relation
};
constexpr HeteroLinkFile kHeteroLinkFiles[] = {
    {&HeteroDataset::link_train, "link_train.npy", "num_link_train", false},
    {&HeteroDataset::link_valid, "link_valid.npy", "num_link_valid", true},
    {&HeteroDataset::link_test, "link_test.npy", "num_link_test", true},
    {&HeteroDataset::link_valid_neg, "link_valid_neg.npy", "num_link_valid_neg", false},
    {&HeteroDataset::link_test_neg, "link_test_neg.npy", "num_link_test_neg", false}};

// The schema of `ds`, resolved, with its errors naming DIR/dataset.json.
HeteroSchema resolved_schema(const HeteroDataset& ds, const std::string& what) {
  HeteroSchema s = ds.schema;
  s.resolve(join(what, "dataset.json"));
  return s;
}

void check_feature_shapes(const HeteroDataset& ds, const HeteroSchema& s, const std::string& what) {
  DSP_CHECK_FORMAT(ds.features.size() <= s.node_types.size(),
                   "{}: {} feature arrays for the {} node types of dataset.json", what,
                   ds.features.size(), s.node_types.size());
  for (int t = 0; t < s.num_types(); ++t) {
    const NodeTypeInfo& info = s.node_types[t];
    const bool present = t < static_cast<int>(ds.features.size()) && ds.features[t].defined();
    const std::string f = features_file(what, info.name);
    if (info.feature_dim == 0) {
      DSP_CHECK_FORMAT(!present,
                       "{}: present but dataset.json gives {} no features (feature_dim 0)", f,
                       info.name);
      continue;
    }
    DSP_CHECK_FORMAT(present, "{}: missing (dataset.json says {} has feature_dim {})", f, info.name,
                     info.feature_dim);
    const Array& a = ds.features[t];
    DSP_CHECK_FORMAT(a.dtype() == info.feature_dtype, "{}: wrong dtype: expected {}, got {}", f,
                     dtype_name(info.feature_dtype), dtype_name(a.dtype()));
    DSP_CHECK_FORMAT(a.ndim() == 2 && a.dim(0) == info.count && a.dim(1) == info.feature_dim,
                     "{}: wrong shape: expected [{}, {}] ({} ids x feature_dim), got {}", f,
                     info.count, info.feature_dim, info.name, a.describe());
  }
}

void check_relation_shapes(const HeteroDataset& ds, const HeteroSchema& s,
                           const std::string& what) {
  DSP_CHECK_FORMAT(ds.relations.size() == s.relations.size(),
                   "{}: {} relation CSRs for the {} relations of dataset.json", what,
                   ds.relations.size(), s.relations.size());
  for (int r = 0; r < s.num_relations(); ++r) {
    const RelationInfo& rel = s.relations[r];
    const Csr& g = ds.relations[r];
    const int64_t n_dst = s.node_types[rel.dst_type].count;
    const int64_t n_src = s.node_types[rel.src_type].count;
    const std::string ip = indptr_file(what, rel), idx = indices_file(what, rel);
    DSP_CHECK_FORMAT(g.indptr.defined() && g.indptr.dtype() == DType::kInt64 &&
                         g.indptr.ndim() == 1 && g.indptr.dim(0) == n_dst + 1,
                     "{}: expected int64[{}] (one row per {} id: {} ids + 1), got {}", ip,
                     n_dst + 1, rel.dst, n_dst, describe(g.indptr));
    DSP_CHECK_FORMAT(g.num_nodes == n_dst, "{}: the CSR has {} rows but {} has {} ids", ip,
                     g.num_nodes, rel.dst, n_dst);
    const Array& x = g.indices;
    DSP_CHECK_FORMAT(x.defined() && x.ndim() == 1 &&
                         (x.dtype() == DType::kInt32 || x.dtype() == DType::kInt64) &&
                         x.dim(0) == rel.edges,
                     "{}: expected int32 or int64 [{}] (dataset.json's edge count), got {}", idx,
                     rel.edges, describe(x));
    DSP_CHECK_FORMAT(x.dtype() == DType::kInt64 || n_src <= INT32_MAX,
                     "{}: int32 indices cannot hold {}'s {} ids", idx, rel.src, n_src);
    DSP_CHECK_FORMAT(!g.has_weights() && !g.has_times(),
                     "{}: relations carry no edge weights or times",
                     detail::relation_dir(what, rel));
  }
}

void check_label_shapes(const HeteroDataset& ds, const HeteroSchema& s, const std::string& what) {
  const std::string f = join(what, "labels.npy");
  if (s.num_classes > 0) {
    DSP_CHECK_FORMAT(ds.labels.defined(), "{}: missing (dataset.json says {} has {} classes)", f,
                     s.target_type, s.num_classes);
  }
  if (ds.labels.defined()) {
    DSP_CHECK_FORMAT(s.target >= 0, "{}: labels but dataset.json names no target_type", f);
    const int64_t n = s.node_types[s.target].count;
    DSP_CHECK_FORMAT(
        ds.labels.dtype() == DType::kInt64 && ds.labels.ndim() == 1 && ds.labels.dim(0) == n,
        "{}: expected int64[{}] (one per {} id), got {}", f, n, s.target_type,
        ds.labels.describe());
  }
  for (const SplitFile& sf : kSplitFiles) {
    const Array& a = ds.*sf.array;
    if (!a.defined()) continue;
    const std::string file = join(what, sf.file);
    DSP_CHECK_FORMAT(s.target >= 0, "{}: split ids but dataset.json names no target_type", file);
    DSP_CHECK_FORMAT(a.dtype() == DType::kInt64 && a.ndim() == 1,
                     "{}: wrong dtype/shape: expected int64 ids of {}, got {}", file, s.target_type,
                     a.describe());
  }
}

// The link files: present only with a link_relation, int64 [E, 2]; negatives per positive K
// give K rows per held-out edge.
void check_link_shapes(const HeteroDataset& ds, const HeteroSchema& s, const std::string& what) {
  for (const HeteroLinkFile& lf : kHeteroLinkFiles) {
    const Array& a = ds.*lf.array;
    if (!a.defined()) continue;
    const std::string file = join(what, lf.file);
    DSP_CHECK_FORMAT(s.link >= 0,
                     "{}: link pairs but dataset.json's \"hetero\" names no "
                     "link_relation",
                     file);
    DSP_CHECK_FORMAT(a.dtype() == DType::kInt64 && a.ndim() == 2 && a.dim(1) == 2,
                     "{}: wrong dtype/shape: expected int64 [E, 2] pairs of {}, got {}", file,
                     s.relations[s.link].key(), a.describe());
  }
  const int64_t per = ds.link_negatives_per_positive;
  DSP_CHECK_FORMAT(per >= 0, "{}: negative link_negatives_per_positive {}",
                   join(what, "dataset.json"), per);
  if (per == 0) return;
  const std::pair<const Array*, const char*> held[] = {{&ds.link_valid, "link_valid_neg.npy"},
                                                       {&ds.link_test, "link_test_neg.npy"}};
  const Array* neg[] = {&ds.link_valid_neg, &ds.link_test_neg};
  for (int i = 0; i < 2; ++i) {
    const int64_t pos = held[i].first->defined() ? held[i].first->dim(0) : 0;
    const int64_t rows = neg[i]->defined() ? neg[i]->dim(0) : 0;
    DSP_CHECK_FORMAT(rows == pos * per,
                     "{}: {} pairs, but link_negatives_per_positive {} needs {} ({} per held-out "
                     "edge)",
                     join(what, held[i].second), rows, per, pos * per, per);
  }
}

// Every shape and dtype against the schema (what a loader checks even without validation).
void check_hetero_shapes(const HeteroDataset& ds, const HeteroSchema& s, const std::string& what) {
  check_feature_shapes(ds, s, what);
  check_relation_shapes(ds, s, what);
  check_label_shapes(ds, s, what);
  check_link_shapes(ds, s, what);
}

// The link pairs' ids against the relation's types; training pairs are edges of the relation,
// held-out ones are not.
void check_link_pairs(const HeteroDataset& ds, const HeteroSchema& s, const std::string& what) {
  if (s.link < 0) return;
  const RelationInfo& rel = s.relations[s.link];
  const int64_t n_src = s.node_types[rel.src_type].count, n_dst = s.node_types[rel.dst_type].count;
  const Csr& g = ds.relations[s.link];
  for (const HeteroLinkFile& lf : kHeteroLinkFiles) {
    const Array& a = ds.*lf.array;
    if (!a.defined()) continue;
    const std::string file = join(what, lf.file);
    const int64_t* p = a.data<int64_t>();
    for (int64_t i = 0; i < a.dim(0); ++i) {
      const int64_t u = p[2 * i], v = p[2 * i + 1];
      DSP_CHECK_FORMAT(u >= 0 && u < n_src && v >= 0 && v < n_dst,
                       "{}: pair {} ({}, {}) is outside {}'s {} ids or {}'s {} ids", file, i, u, v,
                       rel.src, n_src, rel.dst, n_dst);
      if (lf.array == &HeteroDataset::link_train) {
        DSP_CHECK_FORMAT(csr_has_entry(g, u, v),
                         "{}: pair {} ({}, {}) is no edge of {}: training edges are edges of the "
                         "stored relation",
                         file, i, u, v, rel.key());
      } else if (lf.held_out) {
        DSP_CHECK_FORMAT(!csr_has_entry(g, u, v),
                         "{}: pair {} ({}, {}) is an edge of {}: held-out edges must not be in "
                         "the stored relation",
                         file, i, u, v, rel.key());
      }
    }
  }
}

// After check_csr_rows found a fault: the first entry outside the source type's ids, named by
// type (the generic message only says "out of range"); returns when there is none.
void throw_if_outside_source(const Csr& g, const RelationInfo& rel, int64_t n_src,
                             const std::string& file) {
  dispatch_index(g.indices.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* idx = g.indices.data<T>();
    const int64_t* p = g.rowptr();
    for (int64_t e = 0; e < g.num_edges(); ++e) {
      const auto v = static_cast<int64_t>(idx[e]);
      if (v >= 0 && v < n_src) continue;
      const int64_t row = std::upper_bound(p, p + g.num_nodes + 1, e) - p - 1;
      DSP_THROW_T(FormatError, "{}: entry {} is {}, outside {}'s {} ids (row {}, a {} id)", file, e,
                  v, rel.src, n_src, row, rel.dst);
    }
  });
}

// Split ids: each an id of the target type, at most once.
void check_split_ids(const Array& a, int64_t n, const std::string& type, const std::string& file) {
  const int64_t* p = a.data<int64_t>();
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (int64_t i = 0; i < a.dim(0); ++i) {
    const int64_t v = p[i];
    DSP_CHECK_FORMAT(v >= 0 && v < n, "{}: element {} is {}, outside {}'s {} ids", file, i, v, type,
                     n);
    DSP_CHECK_FORMAT(!seen[v], "{}: {} {} appears more than once (element {})", file, type, v, i);
    seen[v] = true;
  }
}

}  // namespace

void validate_hetero_dataset(const HeteroDataset& ds, const std::string& what) {
  const HeteroSchema s = resolved_schema(ds, what);
  check_hetero_shapes(ds, s, what);
  for (int t = 0; t < static_cast<int>(ds.features.size()); ++t) {
    if (ds.features[t].defined()) {
      check_finite_features(ds.features[t], 0, s.node_types[t].count,
                            features_file(what, s.node_types[t].name));
    }
  }
  for (int r = 0; r < s.num_relations(); ++r) {
    const RelationInfo& rel = s.relations[r];
    const Csr& g = ds.relations[r];
    check_indptr(g.indptr, rel.edges, indptr_file(what, rel));
    const int64_t n_src = s.node_types[rel.src_type].count;
    const std::string idx = indices_file(what, rel);
    try {
      check_csr_rows(g.indptr, g.indices, n_src, 0, idx);
    } catch (const FormatError&) {
      throw_if_outside_source(g, rel, n_src, idx);
      throw;
    }
  }
  if (ds.labels.defined()) check_labels(ds.labels, s.num_classes, join(what, "labels.npy"));
  for (const SplitFile& sf : kSplitFiles) {
    const Array& a = ds.*sf.array;
    if (a.defined()) {
      check_split_ids(a, s.node_types[s.target].count, s.target_type, join(what, sf.file));
    }
  }
  check_link_pairs(ds, s, what);
}

// ---------------------------------------------------------------- reading and writing

namespace {

// dataset.json of `dir` parsed (IoError: no directory or file; FormatError: not JSON).
json read_dataset_json(const std::string& dir) {
  std::error_code ec;
  DSP_CHECK_T(IoError, fs::is_directory(dir, ec), "{}: no such dataset directory", dir);
  const std::string path = join(dir, "dataset.json");
  check_file_readable(path);
  json j = json::parse(read_file(path), nullptr, false);
  DSP_CHECK_FORMAT(!j.is_discarded(), "{}: not valid JSON", path);
  return j;
}


// The arrays of a loaded dataset, as dataset.json lists them (shapes are checked afterwards).
void load_hetero_arrays(HeteroDataset& ds, const json& j, const std::string& dir, bool mmap) {
  const HeteroSchema& s = ds.schema;
  auto required = [](const std::string& f) {
    check_file_readable(f);
    return f;
  };
  ds.features.assign(s.node_types.size(), Array());
  for (int t = 0; t < s.num_types(); ++t) {
    if (s.node_types[t].feature_dim > 0) {
      ds.features[t] = load_npy(required(features_file(dir, s.node_types[t].name)), mmap);
    }
  }
  for (const RelationInfo& rel : s.relations) {
    const std::string rdir = detail::relation_dir(dir, rel);
    std::error_code ec;
    DSP_CHECK_FORMAT(fs::is_directory(rdir, ec),
                     "{}: missing relation directory (dataset.json lists relation {})", rdir,
                     rel.key());
    Csr g;
    g.num_nodes = s.node_types[rel.dst_type].count;
    g.indptr = load_npy(required(indptr_file(dir, rel)), mmap);
    g.indices = load_npy(required(indices_file(dir, rel)), mmap);
    ds.relations.push_back(std::move(g));
  }
  if (s.num_classes > 0) ds.labels = load_npy(required(join(dir, "labels.npy")), mmap);
  const std::string json_path = join(dir, "dataset.json");
  // An int64 file of `ndim` dimensions whose rows dataset.json counts under `key` (none: 0).
  auto counted = [&](const char* key, const char* file, int ndim, const char* rows) {
    const int64_t count = int_field(j, key, json_path, 0);
    if (count == 0) return Array();
    const std::string f = required(join(dir, file));
    Array a = load_npy(f, DType::kInt64, ndim, mmap);
    DSP_CHECK_FORMAT(a.dim(0) == count, "{}: has {} {} but dataset.json says {}", f, a.dim(0),
                     rows, count);
    return a;
  };
  for (const SplitFile& sf : kSplitFiles) ds.*sf.array = counted(sf.key, sf.file, 1, "ids");
  if (s.link < 0) return;
  for (const HeteroLinkFile& lf : kHeteroLinkFiles) {
    ds.*lf.array = counted(lf.key, lf.file, 2, "pairs");
  }
  ds.link_negatives_per_positive = int_field(j, "link_negatives_per_positive", json_path, 0);
}

}  // namespace

json hetero_json(const HeteroDataset& ds) {
  json j = {{"format_version", kDatasetFormatVersion},
            {"name", ds.name},
            {"hetero", ds.schema.to_json()}};
  for (const SplitFile& sf : kSplitFiles) {
    const Array& a = ds.*sf.array;
    j[sf.key] = a.defined() ? a.dim(0) : 0;
  }
  for (const HeteroLinkFile& lf : kHeteroLinkFiles) {
    if ((ds.*lf.array).defined()) j[lf.key] = (ds.*lf.array).dim(0);
  }
  if (ds.link_negatives_per_positive > 0) {
    j["link_negatives_per_positive"] = ds.link_negatives_per_positive;
  }
  j["extra"] = ds.extra;
  return j;
}

bool is_hetero_dataset(const std::string& dir) {
  const std::string path = join(dir, "dataset.json");
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  try {
    json j = json::parse(read_file(path), nullptr, false);
    return j.is_object() && j.contains("hetero");
  } catch (const Error&) {
    return false;  // unreadable: the loader names the fault
  }
}

HeteroDataset load_hetero_dataset(const std::string& dir, const LoadOptions& opts) {
  const json j = read_dataset_json(dir);
  const std::string json_path = join(dir, "dataset.json");
  DSP_CHECK_FORMAT(j.is_object() && j.contains("hetero"),
                   "{}: not a heterogeneous dataset (no \"hetero\" object); load it with "
                   "load_dataset",
                   json_path);
  const int64_t version = int_field(j, "format_version", json_path);
  DSP_CHECK_FORMAT(version >= 1 && version <= kDatasetFormatVersion,
                   "{}: format_version {} is not supported by this build (1 to {})", json_path,
                   version, kDatasetFormatVersion);
  HeteroDataset ds;
  ds.dir = dir;
  if (j.contains("name")) ds.name = string_field(j, "name", json_path);
  ds.schema = HeteroSchema::from_json(j["hetero"], json_path);
  if (j.contains("extra")) {
    DSP_CHECK_FORMAT(j["extra"].is_object(), "{}: 'extra' must be an object", json_path);
    ds.extra = j["extra"];
  }
  load_hetero_arrays(ds, j, dir, opts.mmap);
  if (opts.validate) {
    validate_hetero_dataset(ds, dir);
  } else {
    check_hetero_shapes(ds, ds.schema, dir);
  }
  return ds;
}

void write_hetero_dataset(const HeteroDataset& ds, const std::string& dir, bool overwrite) {
  // Validated first, so that no invalid dataset is ever written.
  validate_hetero_dataset(ds, dir);
  StagedDir staged(dir, overwrite);
  auto make_dir = [](const std::string& d) {
    std::error_code ec;
    fs::create_directories(d, ec);
    DSP_CHECK_T(IoError, !ec, "{}: cannot create directory: {}", d, ec.message());
  };
  const std::string tmp = staged.tmp_path();
  for (size_t t = 0; t < ds.features.size(); ++t) {
    if (!ds.features[t].defined()) continue;
    make_dir(detail::node_type_dir(tmp, ds.schema.node_types[t].name));
    save_npy(features_file(tmp, ds.schema.node_types[t].name), ds.features[t]);
  }
  for (size_t r = 0; r < ds.relations.size(); ++r) {
    const RelationInfo& rel = ds.schema.relations[r];
    make_dir(detail::relation_dir(tmp, rel));
    save_npy(indptr_file(tmp, rel), ds.relations[r].indptr);
    save_npy(indices_file(tmp, rel), ds.relations[r].indices);
  }
  if (ds.labels.defined()) save_npy(staged.file("labels.npy"), ds.labels);
  for (const SplitFile& sf : kSplitFiles) {
    if ((ds.*sf.array).defined()) save_npy(staged.file(sf.file), ds.*sf.array);
  }
  for (const HeteroLinkFile& lf : kHeteroLinkFiles) {
    if ((ds.*lf.array).defined()) save_npy(staged.file(lf.file), ds.*lf.array);
  }
  // dataset.json last: a directory without it is never mistaken for a dataset.
  write_file_atomic(staged.file("dataset.json"), hetero_json(ds).dump(2) + "\n");
  staged.commit();
}

// ---------------------------------------------------------------- reverse relations

namespace {

// The CSR of the reversed edges of g (rows: the ids of g's source type).
Csr reverse_csr(const Csr& g, int64_t n_src, int64_t n_dst, const std::string& what) {
  const int64_t m = g.num_edges();
  std::vector<int64_t> src(static_cast<size_t>(m)), dst(static_cast<size_t>(m));
  const int64_t* p = g.rowptr();
  for (int64_t v = 0; v < g.num_nodes; ++v) {
    for (int64_t e = p[v]; e < p[v + 1]; ++e) {
      src[e] = v;                    // the reversed edge leaves the old row ...
      dst[e] = g.indices.int_at(e);  // ... and enters the old entry
    }
  }
  return detail::build_relation_csr(n_dst, n_src, src.data(), dst.data(), m, what);
}

}  // namespace

void add_reverse_relations(HeteroDataset& ds) {
  HeteroSchema& s = ds.schema;
  s.resolve(ds.name.empty() ? "heterogeneous dataset" : ds.name);
  DSP_CHECK_ARG(ds.relations.size() == s.relations.size(),
                "add_reverse_relations: {} CSRs for {} relations", ds.relations.size(),
                s.relations.size());
  const int relations = s.num_relations();
  for (int r = 0; r < relations; ++r) {
    const RelationInfo rel = s.relations[r];  // a copy: the vector grows below
    if (s.reverse_of(r) >= 0) continue;
    RelationInfo rev{rel.dst, "rev_" + rel.name, rel.src};
    Csr g = reverse_csr(ds.relations[r], s.node_types[rel.src_type].count,
                        s.node_types[rel.dst_type].count, rev.key());
    rev.edges = g.num_edges();
    s.relations.push_back(std::move(rev));
    ds.relations.push_back(std::move(g));
  }
  s.resolve(ds.name.empty() ? "heterogeneous dataset" : ds.name);
}

}  // namespace dsp
