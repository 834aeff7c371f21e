#include "graph/dataset.hpp"

#include <fmt/ranges.h>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "graph/npy.hpp"
#include "graph/validate.hpp"

namespace dsp {
namespace {

// Reads an integer field: it must be an integer in [lo, INT64_MAX]. Absent: `def`, or an error
// when `required`.
int64_t get_int(const nlohmann::json& j, const char* key, bool required, int64_t def, int64_t lo,
                const std::string& what) {
  auto it = j.find(key);
  if (it == j.end()) {
    DSP_CHECK_FORMAT(!required, "{}: missing key '{}'", what, key);
    return def;
  }
  DSP_CHECK_FORMAT(it->is_number_integer(), "{}: '{}' must be an integer, got {}", what, key,
                   it->type_name());
  int64_t v;
  if (it->is_number_unsigned()) {
    auto u = it->get<uint64_t>();
    DSP_CHECK_FORMAT(u <= static_cast<uint64_t>(INT64_MAX), "{}: '{}' = {} is too large", what, key,
                     u);
    v = static_cast<int64_t>(u);
  } else {
    v = it->get<int64_t>();
  }
  DSP_CHECK_FORMAT(v >= lo, "{}: '{}' = {} must be >= {}", what, key, v, lo);
  return v;
}

bool get_bool(const nlohmann::json& j, const char* key, bool def, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end()) return def;
  DSP_CHECK_FORMAT(it->is_boolean(), "{}: '{}' must be true or false, got {}", what, key,
                   it->type_name());
  return it->get<bool>();
}

DType get_dtype(const nlohmann::json& j, const char* key, DType def,
                std::initializer_list<DType> allowed, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end()) return def;
  DSP_CHECK_FORMAT(it->is_string(), "{}: '{}' must be a string, got {}", what, key,
                   it->type_name());
  const auto& s = it->get_ref<const std::string&>();
  for (DType t : allowed) {
    if (s == dtype_name(t)) return t;
  }
  std::string names;
  for (DType t : allowed) names += fmt::format("{}{}", names.empty() ? "" : ", ", dtype_name(t));
  DSP_THROW_T(FormatError, "{}: '{}' = '{}' is not one of: {}", what, key, s, names);
}

// The link-prediction files: the array, its count in dataset.json, the file and the count's key.
struct LinkFile {
  Array Dataset::*array;
  int64_t DatasetMeta::*count;
  const char* file;
  const char* key;
};
constexpr LinkFile kLinkFiles[] = {
    {&Dataset::link_train, &DatasetMeta::num_link_train, "link_train.npy", "num_link_train"},
    {&Dataset::link_valid, &DatasetMeta::num_link_valid, "link_valid.npy", "num_link_valid"},
    {&Dataset::link_test, &DatasetMeta::num_link_test, "link_test.npy", "num_link_test"},
    {&Dataset::link_valid_neg, &DatasetMeta::num_link_valid_neg, "link_valid_neg.npy",
     "num_link_valid_neg"},
    {&Dataset::link_test_neg, &DatasetMeta::num_link_test_neg, "link_test_neg.npy",
     "num_link_test_neg"},
};

std::string join_path(const std::string& dir, const char* name) {
  return (std::filesystem::path(dir) / name).string();
}

// Row-index arrays of a split: int64, 1-d, ids in [0, n), each at most once.
void check_split(const Array& a, int64_t expect, int64_t n, const std::string& file) {
  DSP_CHECK_FORMAT(a.dtype() == DType::kInt64 && a.ndim() == 1,
                   "{}: wrong dtype/shape: expected int64[{}], got {}", file, expect, a.describe());
  DSP_CHECK_FORMAT(a.dim(0) == expect, "{}: has {} ids but dataset.json says {}", file, a.dim(0),
                   expect);
  const int64_t* p = a.data<int64_t>();
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (int64_t i = 0; i < a.dim(0); ++i) {
    int64_t v = p[i];
    if (v < 0 || v >= n) {
      DSP_THROW_T(FormatError, "{}: split id out of range: element {} is {}, not in [0, {})", file,
                  i, v, n);
    }
    DSP_CHECK_FORMAT(!seen[v], "{}: node {} appears more than once (element {})", file, v, i);
    seen[v] = true;
  }
}

}  // namespace

nlohmann::json DatasetMeta::to_json() const {
  nlohmann::json j;
  j["format_version"] = format_version;
  j["name"] = name;
  j["num_nodes"] = num_nodes;
  j["num_edges"] = num_edges;
  j["directed"] = directed;
  j["index_dtype"] = dtype_name(index_dtype);
  j["feature_dim"] = feature_dim;
  j["feature_dtype"] = dtype_name(feature_dtype);
  j["num_classes"] = num_classes;
  if (multilabel) j["multilabel"] = true;  // absent: single-label (older readers)
  j["has_weights"] = has_weights;
  if (has_edge_time) j["has_edge_time"] = true;  // absent: no times (older readers)
  if (has_node_time) j["has_node_time"] = true;
  j["num_train"] = num_train;
  j["num_valid"] = num_valid;
  j["num_test"] = num_test;
  for (const LinkFile& f : kLinkFiles) {
    if (this->*f.count > 0) j[f.key] = this->*f.count;  // absent: no such file (older readers)
  }
  if (link_held_out_in_graph) j["link_held_out_in_graph"] = true;  // absent: refused
  if (link_negatives_per_positive > 0) {  // absent: shared negatives
    j["link_negatives_per_positive"] = link_negatives_per_positive;
  }
  j["extra"] = extra;
  return j;
}

DatasetMeta DatasetMeta::from_json(const nlohmann::json& j, const std::string& what) {
  DSP_CHECK_FORMAT(j.is_object(), "{}: expected a JSON object, got {}", what, j.type_name());
  DatasetMeta m;
  int64_t version = get_int(j, "format_version", true, 0, 1, what);
  DSP_CHECK_FORMAT(version <= kDatasetFormatVersion,
                   "{}: format_version {} is newer than this build supports ({})", what, version,
                   kDatasetFormatVersion);
  m.format_version = static_cast<int>(version);
  if (auto it = j.find("name"); it != j.end()) {
    DSP_CHECK_FORMAT(it->is_string(), "{}: 'name' must be a string, got {}", what, it->type_name());
    m.name = it->get<std::string>();
  }
  m.num_nodes = get_int(j, "num_nodes", true, 0, 0, what);
  m.num_edges = get_int(j, "num_edges", true, 0, 0, what);
  m.directed = get_bool(j, "directed", true, what);
  m.index_dtype = get_dtype(j, "index_dtype", DType::kInt64, {DType::kInt32, DType::kInt64}, what);
  m.feature_dim = get_int(j, "feature_dim", false, 0, 0, what);
  m.feature_dtype =
      get_dtype(j, "feature_dtype", DType::kFloat32, {DType::kFloat32, DType::kFloat16}, what);
  m.num_classes = get_int(j, "num_classes", false, 0, 0, what);
  m.multilabel = get_bool(j, "multilabel", false, what);
  DSP_CHECK_FORMAT(!m.multilabel || m.num_classes > 0,
                   "{}: 'multilabel' is true but num_classes is 0 (it counts the label columns)",
                   what);
  m.has_weights = get_bool(j, "has_weights", false, what);
  m.has_edge_time = get_bool(j, "has_edge_time", false, what);
  m.has_node_time = get_bool(j, "has_node_time", false, what);
  m.num_train = get_int(j, "num_train", false, 0, 0, what);
  m.num_valid = get_int(j, "num_valid", false, 0, 0, what);
  m.num_test = get_int(j, "num_test", false, 0, 0, what);
  for (const LinkFile& f : kLinkFiles) m.*f.count = get_int(j, f.key, false, 0, 0, what);
  m.link_held_out_in_graph = get_bool(j, "link_held_out_in_graph", false, what);
  m.link_negatives_per_positive = get_int(j, "link_negatives_per_positive", false, 0, 0, what);
  for (auto [key, v] : {std::pair{"num_train", m.num_train}, std::pair{"num_valid", m.num_valid},
                        std::pair{"num_test", m.num_test}}) {
    DSP_CHECK_FORMAT(v <= m.num_nodes, "{}: '{}' = {} exceeds num_nodes = {}", what, key, v,
                     m.num_nodes);
  }
  DSP_CHECK_FORMAT(m.index_dtype == DType::kInt64 || m.num_nodes <= INT32_MAX,
                   "{}: index_dtype int32 cannot hold {} node ids", what, m.num_nodes);
  if (auto it = j.find("extra"); it != j.end()) {
    DSP_CHECK_FORMAT(it->is_object(), "{}: 'extra' must be an object, got {}", what,
                     it->type_name());
    m.extra = *it;
  }
  return m;
}

void Dataset::sync_meta() {
  meta.num_nodes = graph.num_nodes;
  meta.num_edges = graph.num_edges();
  if (graph.indices.defined()) meta.index_dtype = graph.index_dtype();
  meta.has_weights = graph.has_weights();
  meta.has_edge_time = graph.has_times();
  meta.has_node_time = node_time.defined();
  meta.feature_dim = features.defined() && features.ndim() == 2 ? features.dim(1) : 0;
  if (features.defined()) meta.feature_dtype = features.dtype();
  meta.multilabel = labels.defined() && labels.dtype() == DType::kInt8 && labels.ndim() == 2;
  if (meta.multilabel) meta.num_classes = labels.dim(1);
  if (labels.defined() && labels.dtype() == DType::kInt64) {
    const int64_t* l = labels.data<int64_t>();
    int64_t mx = -1;
    for (int64_t i = 0; i < labels.numel(); ++i) mx = std::max(mx, l[i]);
    meta.num_classes = std::max(meta.num_classes, mx + 1);
  }
  meta.num_train = train_idx.defined() ? train_idx.numel() : 0;
  meta.num_valid = valid_idx.defined() ? valid_idx.numel() : 0;
  meta.num_test = test_idx.defined() ? test_idx.numel() : 0;
  for (const LinkFile& f : kLinkFiles) {
    const Array& a = this->*f.array;
    meta.*f.count = a.defined() && a.ndim() >= 1 ? a.dim(0) : 0;
  }
}

namespace {

// Edge and node times against dataset.json: each present when it says so, int64 of the graph's
// entry / node count; node times only beside edge times (a seed's time selects among its edges'
// times: without them it would select nothing).
void validate_times(const Dataset& ds, const std::string& what) {
  const DatasetMeta& m = ds.meta;
  const std::string edge_file = join_path(what, "edge_time.npy");
  const std::string node_file = join_path(what, "node_time.npy");
  DSP_CHECK_FORMAT(ds.graph.has_times() == m.has_edge_time,
                   "{}: dataset.json says has_edge_time = {} but edge_time.npy is {}", what,
                   m.has_edge_time, ds.graph.has_times() ? "present" : "absent");
  DSP_CHECK_FORMAT(ds.node_time.defined() == m.has_node_time,
                   "{}: dataset.json says has_node_time = {} but node_time.npy is {}", what,
                   m.has_node_time, ds.node_time.defined() ? "present" : "absent");
  DSP_CHECK_FORMAT(!m.has_node_time || m.has_edge_time,
                   "{}: node times without edge times (edge_time.npy): a node's time selects the "
                   "edges before it, so node times need edge times",
                   node_file);
  if (m.has_edge_time) check_edge_times(ds.graph.times, m.num_edges, edge_file);
  if (m.has_node_time) check_node_times(ds.node_time, m.num_nodes, node_file);
}

// The graph against dataset.json: node count, indptr, indices, and edge weights when it says so.
void validate_graph(const Dataset& ds, const std::string& what) {
  const DatasetMeta& m = ds.meta;
  const int64_t n = m.num_nodes;
  DSP_CHECK_FORMAT(n > 0, "{}: empty graph: num_nodes is 0", what);
  DSP_CHECK_FORMAT(ds.graph.num_nodes == n, "{}: graph has {} nodes but dataset.json says {}", what,
                   ds.graph.num_nodes, n);
  const std::string indptr_file = join_path(what, "indptr.npy");
  const std::string indices_file = join_path(what, "indices.npy");
  const Array& ip = ds.graph.indptr;
  DSP_CHECK_FORMAT(
      ip.defined() && ip.dtype() == DType::kInt64 && ip.ndim() == 1 && ip.dim(0) == n + 1,
      "{}: expected int64[{}], got {}", indptr_file, n + 1,
      ip.defined() ? ip.describe() : "nothing");
  check_indptr(ip, m.num_edges, indptr_file);
  DSP_CHECK_FORMAT(
      ds.graph.indices.defined() && ds.graph.indices.ndim() == 1 &&
          ds.graph.indices.dtype() == m.index_dtype && ds.graph.num_edges() == m.num_edges,
      "{}: expected {}[{}], got {}", indices_file, dtype_name(m.index_dtype), m.num_edges,
      ds.graph.indices.defined() ? ds.graph.indices.describe() : "nothing");
  DSP_CHECK_FORMAT(ds.graph.has_weights() == m.has_weights,
                   "{}: dataset.json says has_weights = {} but edge_weight.npy is {}", what,
                   m.has_weights, ds.graph.has_weights() ? "present" : "absent");
  check_csr_rows(ip, ds.graph.indices, n, 0, indices_file);
  if (m.has_weights) {
    const std::string f = join_path(what, "edge_weight.npy");
    const Array& w = ds.graph.weights;
    DSP_CHECK_FORMAT(w.dtype() == DType::kFloat32 && w.ndim() == 1 && w.dim(0) == m.num_edges,
                     "{}: expected float32[{}], got {}", f, m.num_edges, w.describe());
    check_edge_weights(w, ip, 0, f);
  }
  validate_times(ds, what);
}

// The features, when dataset.json gives a dimension or the dataset has them.
void validate_features(const Dataset& ds, const std::string& what) {
  const DatasetMeta& m = ds.meta;
  const int64_t n = m.num_nodes;
  if (m.feature_dim > 0 || ds.features.defined()) {
    const std::string f = join_path(what, "features.npy");
    DSP_CHECK_FORMAT(ds.features.defined(), "{}: missing (dataset.json says feature_dim = {})", f,
                     m.feature_dim);
    DSP_CHECK_FORMAT(ds.features.dtype() == m.feature_dtype, "{}: wrong dtype: expected {}, got {}",
                     f, dtype_name(m.feature_dtype), dtype_name(ds.features.dtype()));
    DSP_CHECK_FORMAT(
        ds.features.ndim() == 2 && ds.features.dim(0) == n && ds.features.dim(1) == m.feature_dim,
        "{}: wrong shape: expected [{}, {}], got {}", f, n, m.feature_dim, ds.features.describe());
    check_finite_features(ds.features, 0, n, f);
  }
}

// The labels, when dataset.json gives classes or the dataset has them.
void validate_labels(const Dataset& ds, const std::string& what) {
  const DatasetMeta& m = ds.meta;
  const int64_t n = m.num_nodes;
  if (m.num_classes > 0 || ds.labels.defined()) {
    const std::string f = join_path(what, "labels.npy");
    DSP_CHECK_FORMAT(ds.labels.defined(), "{}: missing (dataset.json says num_classes = {})", f,
                     m.num_classes);
    check_label_layout(ds.labels, n, m.multilabel ? m.num_classes : 0, f);
    if (m.multilabel) {
      check_label_rows(ds.labels, f);
    } else {
      check_labels(ds.labels, m.num_classes, f);
    }
  }
}

// The train, valid and test ids: each present with dataset.json's count, or absent with count 0.
void validate_splits(const Dataset& ds, const std::string& what) {
  const DatasetMeta& m = ds.meta;
  const struct {
    const Array* a;
    int64_t count;
    const char* file;
  } splits[] = {{&ds.train_idx, m.num_train, "train_idx.npy"},
                {&ds.valid_idx, m.num_valid, "valid_idx.npy"},
                {&ds.test_idx, m.num_test, "test_idx.npy"}};
  for (const auto& s : splits) {
    const std::string f = join_path(what, s.file);
    if (!s.a->defined()) {
      DSP_CHECK_FORMAT(s.count == 0, "{}: missing (dataset.json says {} ids)", f, s.count);
      continue;
    }
    check_split(*s.a, s.count, m.num_nodes, f);
  }
}

// The link-prediction pairs: each present with dataset.json's count as int64 [count, 2], or
// absent with count 0; ids in range; training edges in the stored graph, held-out ones not (in
// neither direction when undirected); a held-out split with its negatives and the reverse.
void validate_links(const Dataset& ds, const std::string& what) {
  const DatasetMeta& m = ds.meta;
  for (const LinkFile& lf : kLinkFiles) {
    const Array& a = ds.*lf.array;
    const int64_t count = m.*lf.count;
    const std::string f = join_path(what, lf.file);
    if (!a.defined()) {
      DSP_CHECK_FORMAT(count == 0, "{}: missing, but dataset.json counts {} pair{}", f, count,
                       count == 1 ? "" : "s");
      continue;
    }
    DSP_CHECK_FORMAT(a.dtype() == DType::kInt64 && a.ndim() == 2 && a.dim(1) == 2,
                     "{}: wrong dtype/shape: expected int64[{}, 2], got {}", f, count,
                     a.describe());
    DSP_CHECK_FORMAT(a.dim(0) == count, "{}: has {} pairs but dataset.json says {}", f, a.dim(0),
                     count);
    const bool train = lf.array == &Dataset::link_train;
    const bool negatives =
        lf.array == &Dataset::link_valid_neg || lf.array == &Dataset::link_test_neg;
    const LinkRule held_out = m.link_held_out_in_graph ? LinkRule::kAny : LinkRule::kNotInGraph;
    check_link_pairs(a, m.num_nodes, &ds.graph,
                     train       ? LinkRule::kInGraph
                     : negatives ? LinkRule::kAny
                                 : held_out,
                     !m.directed, f);
  }
  const std::pair<const Array*, const Array*> held_out[] = {{&ds.link_valid, &ds.link_valid_neg},
                                                            {&ds.link_test, &ds.link_test_neg}};
  const std::pair<const char*, const char*> names[] = {{"link_valid.npy", "link_valid_neg.npy"},
                                                       {"link_test.npy", "link_test_neg.npy"}};
  for (int i = 0; i < 2; ++i) {
    const auto [pos, neg] = held_out[i];
    DSP_CHECK_FORMAT(!pos->defined() || neg->defined(),
                     "{}: missing: {} holds positive edges but no negatives to rank them against",
                     join_path(what, names[i].second), names[i].first);
    DSP_CHECK_FORMAT(pos->defined() || !neg->defined(),
                     "{}: negatives without positives: {} is missing",
                     join_path(what, names[i].second), names[i].first);
    const int64_t per = m.link_negatives_per_positive;
    DSP_CHECK_FORMAT(per == 0 || !pos->defined() || neg->dim(0) == pos->dim(0) * per,
                     "{}: has {} pairs, but dataset.json's link_negatives_per_positive {} needs {} "
                     "for the {} positives of {} (rows [i K, (i + 1) K) are positive i's)",
                     join_path(what, names[i].second), neg->defined() ? neg->dim(0) : 0, per,
                     pos->defined() ? pos->dim(0) * per : 0, pos->defined() ? pos->dim(0) : 0,
                     names[i].first);
  }
}

// The link files of `dir` that dataset.json does not count: each must be absent (or hold no
// pair), else the reader would ignore it silently (a hand-written split) and the trainer would
// then speak of a file that is there. FormatError naming the file, its pairs and what counts it.
void check_uncounted_links(const DatasetMeta& m, const std::string& dir) {
  for (const LinkFile& lf : kLinkFiles) {
    if (m.*lf.count > 0) continue;
    const std::string f = join_path(dir, lf.file);
    std::error_code ec;
    if (!std::filesystem::exists(f, ec)) continue;
    const Array a = load_npy(f);  // the header (mapped): a malformed file is named as such
    const int64_t rows = a.ndim() >= 1 ? a.dim(0) : 0;
    if (rows == 0) continue;  // an empty split, as the writer leaves one: nothing to count
    DSP_THROW_T(FormatError,
                "{} exists but dataset.json has no {}: count its pairs there (\"{}\": {}), or "
                "re-save the dataset with dsp.save_dataset({}=...) or dsp convert",
                f, lf.key, lf.key, rows, std::string(lf.file, std::strlen(lf.file) - 4));
  }
}

}  // namespace

void validate_dataset(const Dataset& ds, const std::string& what) {
  validate_graph(ds, what);
  validate_features(ds, what);
  validate_labels(ds, what);
  validate_splits(ds, what);
  validate_links(ds, what);
}

DatasetMeta load_dataset_meta(const std::string& dir) {
  std::error_code ec;
  DSP_CHECK_T(IoError, std::filesystem::is_directory(dir, ec), "{}: no such dataset directory",
              dir);
  const std::string json_path = join_path(dir, "dataset.json");
  check_file_readable(json_path);
  nlohmann::json j = nlohmann::json::parse(read_file(json_path), nullptr, false);
  DSP_CHECK_FORMAT(!j.is_discarded(), "{}: not valid JSON", json_path);
  DSP_CHECK_FORMAT(!(j.is_object() && j.contains("hetero")),
                   "{} is a heterogeneous dataset (dataset.json has \"hetero\"): its node types "
                   "and relations load with load_hetero_dataset (graph/hetero.hpp), not as one "
                   "homogeneous graph",
                   dir);
  return DatasetMeta::from_json(j, json_path);
}

Dataset load_dataset(const std::string& dir, const LoadOptions& opts) {
  Dataset ds;
  ds.dir = dir;
  ds.meta = load_dataset_meta(dir);
  const std::string json_path = join_path(dir, "dataset.json");
  const DatasetMeta& m = ds.meta;
  DSP_CHECK_FORMAT(m.num_nodes > 0, "{}: empty graph: num_nodes is 0", json_path);

  auto required = [&](const char* name) {
    std::string f = join_path(dir, name);
    check_file_readable(f);
    return f;
  };
  auto load_shaped = [&](const std::string& f, DType t, std::vector<int64_t> shape) {
    Array a = load_npy(f, t, static_cast<int>(shape.size()), opts.mmap);
    DSP_CHECK_FORMAT(a.shape() == shape, "{}: wrong shape: expected {}[{}], got {}", f,
                     dtype_name(t), fmt::join(shape, ", "), a.describe());
    return a;
  };
  ds.graph.num_nodes = m.num_nodes;
  ds.graph.indptr = load_shaped(required("indptr.npy"), DType::kInt64, {m.num_nodes + 1});
  ds.graph.indices = load_shaped(required("indices.npy"), m.index_dtype, {m.num_edges});
  if (m.has_weights) {
    ds.graph.weights = load_shaped(required("edge_weight.npy"), DType::kFloat32, {m.num_edges});
  }
  // Times: any dtype and shape load; the check names what they should be.
  if (m.has_edge_time) {
    const std::string f = required("edge_time.npy");
    ds.graph.times = load_npy(f, opts.mmap);
    check_edge_times(ds.graph.times, m.num_edges, f);
  }
  if (m.has_node_time) {
    const std::string f = required("node_time.npy");
    ds.node_time = load_npy(f, opts.mmap);
    check_node_times(ds.node_time, m.num_nodes, f);
  }
  if (m.feature_dim > 0) {
    ds.features =
        load_shaped(required("features.npy"), m.feature_dtype, {m.num_nodes, m.feature_dim});
  }
  if (m.num_classes > 0) {  // int64 [N] or, multi-label, int8 [N, L]: the check names which
    const std::string f = required("labels.npy");
    ds.labels = load_npy(f, opts.mmap);
    check_label_layout(ds.labels, m.num_nodes, m.multilabel ? m.num_classes : 0, f);
  }
  const struct {
    Array* a;
    int64_t count;
    const char* file;
  } splits[] = {{&ds.train_idx, m.num_train, "train_idx.npy"},
                {&ds.valid_idx, m.num_valid, "valid_idx.npy"},
                {&ds.test_idx, m.num_test, "test_idx.npy"}};
  for (const auto& s : splits) {
    if (s.count > 0) *s.a = load_shaped(required(s.file), DType::kInt64, {s.count});
  }
  check_uncounted_links(m, dir);
  for (const LinkFile& f : kLinkFiles) {
    if (m.*f.count > 0) {
      const std::string path = join_path(dir, f.file);
      check_file_readable(path, fmt::format("missing, but dataset.json counts {} pair{}",
                                            m.*f.count, m.*f.count == 1 ? "" : "s")
                                    .c_str());
      ds.*f.array = load_shaped(path, DType::kInt64, {m.*f.count, 2});
    }
  }
  if (opts.validate) validate_dataset(ds, dir);
  return ds;
}

void write_dataset(const Dataset& ds, const std::string& dir, bool overwrite) {
  // Validate first so that no invalid dataset is ever written; O(E), cheap next to the write.
  validate_dataset(ds, dir);
  StagedDir staged(dir, overwrite);
  save_npy(staged.file("indptr.npy"), ds.graph.indptr);
  save_npy(staged.file("indices.npy"), ds.graph.indices);
  if (ds.graph.has_weights()) save_npy(staged.file("edge_weight.npy"), ds.graph.weights);
  if (ds.graph.has_times()) save_npy(staged.file("edge_time.npy"), ds.graph.times);
  if (ds.node_time.defined()) save_npy(staged.file("node_time.npy"), ds.node_time);
  if (ds.features.defined()) save_npy(staged.file("features.npy"), ds.features);
  if (ds.labels.defined()) save_npy(staged.file("labels.npy"), ds.labels);
  if (ds.train_idx.defined()) save_npy(staged.file("train_idx.npy"), ds.train_idx);
  if (ds.valid_idx.defined()) save_npy(staged.file("valid_idx.npy"), ds.valid_idx);
  if (ds.test_idx.defined()) save_npy(staged.file("test_idx.npy"), ds.test_idx);
  for (const LinkFile& f : kLinkFiles) {
    if ((ds.*f.array).defined()) save_npy(staged.file(f.file), ds.*f.array);
  }
  // dataset.json last: a directory without it is never mistaken for a dataset.
  write_file_atomic(staged.file("dataset.json"), ds.meta.to_json().dump(2) + "\n");
  staged.commit();
}

void validate_staged_dataset(const std::string& staged_dir, const std::string& final_dir) {
  LoadOptions lo;
  lo.validate = false;
  validate_dataset(load_dataset(staged_dir, lo), final_dir);
}

}  // namespace dsp
