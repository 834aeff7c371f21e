// dsp.save_dataset and dsp.save_hetero_dataset: numpy arrays from Python written as a dataset
// directory by the importers' writer, with the GIL released and nothing left on any error.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ccc/job.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/hash.hpp"
#include "core/logging.hpp"
#include "core/memory.hpp"
#include "csp/presample.hpp"
#include "csp/sampler.hpp"
#include "graph/commands.hpp"
#include "graph/csr.hpp"
#include "graph/dataset.hpp"
#include "graph/hetero.hpp"
#include "graph/hetero_detail.hpp"
#include "graph/link.hpp"
#include "graph/validate.hpp"
#include "layout/partition/partition_command.hpp"
#include "layout/partition/partition_dir.hpp"
#include "pipeline/cores.hpp"
#include "pipeline/link_batch.hpp"
#include "pipeline/load_batch.hpp"
#include "python/bindings.hpp"
#include "python/loader.hpp"
#include "python/pg_communicator.hpp"

namespace dsp::py_bind {
namespace {

// ---------------------------------------------------------------- dsp.save_dataset

// A numpy array handed to the dataset writer, read with the GIL released: its buffer (kept alive
// by the call's arguments), dtype and shape. `data` is null for an array not given.
struct RawArray {
  const void* data = nullptr;
  DType dtype = DType::kUInt8;
  std::vector<int64_t> shape;

  bool given() const { return data != nullptr; }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  template <class T>
  const T* as() const {
    return static_cast<const T*>(data);
  }
};

// `a` (None: not given) as a RawArray. It must be C-ordered and of one of `allowed`:
// dsp.save_dataset (python/dsp/_data.py) converts every array first, so a fault here is a caller
// bypassing it.
RawArray raw_array(const std::optional<py::array>& a, std::initializer_list<DType> allowed,
                   const char* what) {
  RawArray r;
  if (!a) return r;
  const py::dtype dt = a->dtype();
  for (DType t : allowed) {
    const py::dtype want = numpy_dtype(t);
    if (dt.kind() == want.kind() && dt.itemsize() == want.itemsize()) r.dtype = t;
  }
  DSP_CHECK_ARG(r.dtype != DType::kUInt8 && (a->flags() & py::array::c_style),
                "{}: expected a C-ordered array of {}, got {}", what, dtype_name(*allowed.begin()),
                std::string(py::str(py::handle(dt))));
  r.shape.assign(a->shape(), a->shape() + a->ndim());
  static const char empty = 0;  // a zero-size array may have no buffer; given() must still hold
  r.data = a->size() > 0 ? a->data() : &empty;
  return r;
}

// An owned copy of `r` (the writer's validators release the pages of views, which are meant to
// be file mappings, so numpy's memory is never viewed); undefined when not given.
Array copy_array(const RawArray& r) {
  if (!r.given()) return Array();
  Array a(r.dtype, r.shape);
  if (a.nbytes() > 0) std::memcpy(a.raw_mutable(), r.data, a.nbytes());
  return a;
}

// The in-neighbour CSR of the edges src[i] -> dst[i] through the importers' builder: rows
// sorted, repeated edges merged (keeping the first weight), reverse edges added when
// `undirected`. An id outside [0, n) is a FormatError naming `what` (the caller's argument) and
// the edge.
Csr csr_of_edges(int64_t n, const int64_t* src, const int64_t* dst, int64_t m, const float* w,
                 bool undirected, const std::string& what, const int64_t* times = nullptr) {
  CsrBuildOptions o;
  o.symmetrize = undirected;
  try {
    return build_in_csr<int64_t>(n, src, dst, m, w, o, times);
  } catch (const FormatError& e) {
    DSP_THROW_T(FormatError, "{}: {}", what, e.what());
  }
}

// A CSR given in dsp's layout (int64 indptr [n + 1], int64 indices), kept as given: the writer's
// validation checks it. The indices are narrowed to int32 as the builder does (n < 2^31) when
// every one is a node id; an out-of-range one stays int64 for the validator to name.
Csr csr_as_given(int64_t n, const RawArray& indptr, const RawArray& indices, const RawArray& w,
                 const RawArray& times) {
  Csr g;
  g.num_nodes = n;
  g.indptr = copy_array(indptr);
  const int64_t e = indices.numel();
  const int64_t* p = indices.as<int64_t>();
  const bool fits =
      n < (int64_t{1} << 31) && std::all_of(p, p + e, [n](int64_t v) { return v >= 0 && v < n; });
  if (fits) {
    g.indices = Array(DType::kInt32, {e});
    int32_t* q = g.indices.mutable_data<int32_t>();
    for (int64_t i = 0; i < e; ++i) q[i] = static_cast<int32_t>(p[i]);
  } else {
    g.indices = copy_array(indices);
  }
  g.weights = copy_array(w);
  g.times = copy_array(times);
  return g;
}

// A CSR in dsp's layout read as edges (indices[k] -> its row) and rebuilt with reverse edges.
// indptr is checked first (monotone from 0 to the number of entries), faults naming `what`.
Csr symmetrized_csr(int64_t n, const RawArray& indptr, const RawArray& indices, const RawArray& w,
                    const RawArray& times, const std::string& what) {
  const int64_t e = indices.numel();
  check_indptr(copy_array(indptr), e, what + " indptr");
  const int64_t* ip = indptr.as<int64_t>();
  std::vector<int64_t> dst(static_cast<size_t>(e));
  for (int64_t v = 0; v < n; ++v) std::fill(dst.begin() + ip[v], dst.begin() + ip[v + 1], v);
  return csr_of_edges(n, indices.as<int64_t>(), dst.data(), e, w.given() ? w.as<float>() : nullptr,
                      true, what, times.given() ? times.as<int64_t>() : nullptr);
}

// What dsp.save_dataset hands to the writer: exactly one of edges (src, dst) and a CSR (indptr,
// indices), the node arrays, and the metadata that the arrays do not give.
struct SaveInputs {
  std::string out, name, graph_what;  // graph_what: the caller's graph argument, for messages
  int64_t num_nodes = 0;
  bool undirected = false, overwrite = false;
  RawArray src, dst, indptr, indices, weights, x, y, train, valid, test;
  RawArray edge_time, node_time;  // int64, one per edge (entry) / node, or not given
  // Link prediction's pairs, int64 [E, 2] (src, dst), or not given.
  RawArray link_train, link_valid, link_test, link_valid_neg, link_test_neg;
  bool link_held_out_in_graph = false;  // dataset.json's mark: held-out pairs may be graph edges
  int64_t link_negatives_per_positive = 0;  // > 0: the negatives are per held-out positive
  nlohmann::json extra;
};

// The dataset's CSR of `in`'s graph: edges through the builder, a CSR as given (or rebuilt with
// reverse edges when undirected). Counts that disagree are an InvalidArgument.
Csr graph_of(const SaveInputs& in) {
  const RawArray& w = in.weights;
  const RawArray& t = in.edge_time;
  if (in.src.given()) {
    const int64_t m = in.src.numel();
    DSP_CHECK_ARG(
        in.dst.numel() == m && (!w.given() || w.numel() == m) && (!t.given() || t.numel() == m),
        "{}: {} sources, {} targets, {} edge weights and {} edge times", in.graph_what, m,
        in.dst.numel(), w.given() ? w.numel() : m, t.given() ? t.numel() : m);
    return csr_of_edges(in.num_nodes, in.src.as<int64_t>(), in.dst.as<int64_t>(), m,
                        w.given() ? w.as<float>() : nullptr, in.undirected, in.graph_what,
                        t.given() ? t.as<int64_t>() : nullptr);
  }
  DSP_CHECK_ARG(in.indptr.given() && in.indices.given(), "{}: no graph given", in.graph_what);
  DSP_CHECK_ARG(in.indptr.numel() == in.num_nodes + 1,
                "{}: indptr has {} entries, expected num_nodes + 1 = {}", in.graph_what,
                in.indptr.numel(), in.num_nodes + 1);
  DSP_CHECK_ARG(!w.given() || w.numel() == in.indices.numel(), "{}: {} edge weights for {} entries",
                in.graph_what, w.numel(), in.indices.numel());
  DSP_CHECK_ARG(!t.given() || t.numel() == in.indices.numel(), "{}: {} edge times for {} entries",
                in.graph_what, t.numel(), in.indices.numel());
  return in.undirected ? symmetrized_csr(in.num_nodes, in.indptr, in.indices, w, t, in.graph_what)
                       : csr_as_given(in.num_nodes, in.indptr, in.indices, w, t);
}

// Builds the dataset and writes it with write_dataset (validated first, with the CLI's messages
// naming the file of each array; staged and renamed). A fault of the arrays (a FormatError of the
// builder or the validators) is an InvalidArgument: the arrays are the caller's. Nothing is left
// at `in.out` on any error. Returns the meta written.
DatasetMeta save_dataset(const SaveInputs& in) {
  std::error_code ec;
  DSP_CHECK_T(IoError, in.overwrite || !std::filesystem::exists(in.out, ec),
              "{}: already exists (pass overwrite=True to replace it)", in.out);
  try {
    Dataset ds;
    ds.graph = graph_of(in);
    ds.features = copy_array(in.x);
    ds.labels = copy_array(in.y);
    ds.node_time = copy_array(in.node_time);
    ds.train_idx = copy_array(in.train);
    ds.valid_idx = copy_array(in.valid);
    ds.test_idx = copy_array(in.test);
    ds.link_train = copy_array(in.link_train);
    ds.link_valid = copy_array(in.link_valid);
    ds.link_test = copy_array(in.link_test);
    ds.link_valid_neg = copy_array(in.link_valid_neg);
    ds.link_test_neg = copy_array(in.link_test_neg);
    // Held-out pairs without training pairs: every edge of the graph trains, as `dsp convert
    // --from ogb-link` does without train_edge (PyG's and DGL's training graph is their edges).
    if (!ds.link_train.defined() && (ds.link_valid.defined() || ds.link_test.defined())) {
      Array edges = graph_edge_pairs(ds.graph, in.undirected);
      if (edges.dim(0) > 0) ds.link_train = std::move(edges);
    }
    ds.meta.name = in.name;
    ds.meta.directed = !in.undirected;
    ds.meta.link_held_out_in_graph = in.link_held_out_in_graph;
    ds.meta.link_negatives_per_positive = in.link_negatives_per_positive;
    ds.meta.extra = in.extra;
    ds.sync_meta();
    write_dataset(ds, in.out, in.overwrite);
    return ds.meta;
  } catch (const FormatError& e) {
    throw InvalidArgument(e.what(), e.file(), e.line());
  }
}

}  // namespace

// dsp.save_dataset's writer (python/dsp/_data.py converts the arguments: dtypes, C order, masks
// to ids, the node count).
void bind_save_dataset(py::module_& m) {
  using Opt = std::optional<py::array>;
  m.def(
      "_save_dataset",
      [](const std::string& out, int64_t num_nodes, const std::string& graph_what, Opt src, Opt dst,
         Opt indptr, Opt indices, Opt edge_weight, bool undirected, Opt x, Opt y, Opt train,
         Opt valid, Opt test, const std::string& name, bool overwrite, const py::dict& extra,
         Opt edge_time, Opt node_time, Opt link_train, Opt link_valid, Opt link_test,
         Opt link_valid_neg, Opt link_test_neg, bool link_held_out_in_graph,
         int64_t link_negatives_per_positive) {
        SaveInputs in;
        in.out = out;
        in.num_nodes = num_nodes;
        in.graph_what = graph_what;
        in.src = raw_array(src, {DType::kInt64}, "src");
        in.dst = raw_array(dst, {DType::kInt64}, "dst");
        in.indptr = raw_array(indptr, {DType::kInt64}, "indptr");
        in.indices = raw_array(indices, {DType::kInt64}, "indices");
        in.weights = raw_array(edge_weight, {DType::kFloat32}, "edge_weight");
        in.undirected = undirected;
        in.x = raw_array(x, {DType::kFloat32, DType::kFloat16}, "x");
        in.y = raw_array(y, {DType::kInt64}, "y");
        in.train = raw_array(train, {DType::kInt64}, "train_idx");
        in.valid = raw_array(valid, {DType::kInt64}, "valid_idx");
        in.test = raw_array(test, {DType::kInt64}, "test_idx");
        in.name = name;
        in.overwrite = overwrite;
        in.extra = py_to_json(extra);
        in.edge_time = raw_array(edge_time, {DType::kInt64}, "edge_time");
        in.node_time = raw_array(node_time, {DType::kInt64}, "node_time");
        in.link_train = raw_array(link_train, {DType::kInt64}, "link_train");
        in.link_valid = raw_array(link_valid, {DType::kInt64}, "link_valid");
        in.link_test = raw_array(link_test, {DType::kInt64}, "link_test");
        in.link_valid_neg = raw_array(link_valid_neg, {DType::kInt64}, "link_valid_neg");
        in.link_test_neg = raw_array(link_test_neg, {DType::kInt64}, "link_test_neg");
        in.link_held_out_in_graph = link_held_out_in_graph;
        in.link_negatives_per_positive = link_negatives_per_positive;
        DatasetMeta meta;
        {
          py::gil_scoped_release nogil;
          meta = save_dataset(in);
        }
        return json_to_py(meta.to_json());
      },
      py::arg("out"), py::arg("num_nodes"), py::arg("graph_what"), py::arg("src"), py::arg("dst"),
      py::arg("indptr"), py::arg("indices"), py::arg("edge_weight"), py::arg("undirected"),
      py::arg("x"), py::arg("y"), py::arg("train_idx"), py::arg("valid_idx"), py::arg("test_idx"),
      py::arg("name"), py::arg("overwrite"), py::arg("extra"), py::arg("edge_time") = py::none(),
      py::arg("node_time") = py::none(), py::arg("link_train") = py::none(),
      py::arg("link_valid") = py::none(), py::arg("link_test") = py::none(),
      py::arg("link_valid_neg") = py::none(), py::arg("link_test_neg") = py::none(),
      py::arg("link_held_out_in_graph") = false, py::arg("link_negatives_per_positive") = 0);
}

namespace {

// ---------------------------------------------------------------- dsp.save_hetero_dataset

// What dsp.save_hetero_dataset hands to the writer (python/dsp/_hetero_data.py has checked and
// ordered them: node types by name, relations by key with the reverses given after them, as
// `dsp convert --from ogb-hetero [--add-reverse]` lists them).
struct HeteroSaveInputs {
  std::string out, name, target_type;
  bool overwrite = false, add_reverse = false;
  std::vector<NodeTypeInfo> types;         // name and count
  std::vector<RawArray> features;          // per type, or not given
  std::vector<RelationInfo> relations;     // src, name, dst
  std::vector<std::string> relation_what;  // the caller's argument per relation, for messages
  std::vector<RawArray> src, dst;          // per relation, int64 type-local ids
  RawArray y, train, valid, test;
  nlohmann::json extra;
};

// Builds each relation's CSR with the importers' builder (detail::build_relation_csr: rows
// ascending, repeats dropped), adds the reverses on request and writes with
// write_hetero_dataset (validated first, with the messages of `dsp convert --from ogb-hetero`
// naming the file of each array; staged and renamed). A FormatError is an InvalidArgument: the
// arrays are the caller's. Nothing is left at `in.out` on any error.
nlohmann::json save_hetero_dataset(const HeteroSaveInputs& in) {
  std::error_code ec;
  DSP_CHECK_T(IoError, in.overwrite || !std::filesystem::exists(in.out, ec),
              "{}: already exists (pass overwrite=True to replace it)", in.out);
  try {
    HeteroDataset ds;
    ds.name = in.name;
    ds.schema.node_types = in.types;
    ds.schema.relations = in.relations;
    ds.schema.target_type = in.target_type;
    ds.schema.resolve("dsp.save_hetero_dataset");
    for (const RawArray& f : in.features) ds.features.push_back(copy_array(f));
    for (size_t r = 0; r < in.relations.size(); ++r) {
      const RelationInfo& rel = ds.schema.relations[r];
      const int64_t m = in.src[r].numel();
      DSP_CHECK_ARG(in.dst[r].numel() == m, "{}: {} sources and {} targets", in.relation_what[r], m,
                    in.dst[r].numel());
      ds.relations.push_back(detail::build_relation_csr(
          ds.schema.node_types[rel.src_type].count, ds.schema.node_types[rel.dst_type].count,
          in.src[r].as<int64_t>(), in.dst[r].as<int64_t>(), m, in.relation_what[r]));
    }
    ds.labels = copy_array(in.y);
    ds.train_idx = copy_array(in.train);
    ds.valid_idx = copy_array(in.valid);
    ds.test_idx = copy_array(in.test);
    ds.extra = in.extra;
    if (in.add_reverse) add_reverse_relations(ds);
    ds.sync_schema();
    write_hetero_dataset(ds, in.out, in.overwrite);
    return hetero_json(ds);
  } catch (const FormatError& e) {
    throw InvalidArgument(e.what(), e.file(), e.line());
  }
}

}  // namespace

void bind_save_hetero_dataset(py::module_& m) {
  using Opt = std::optional<py::array>;
  m.def(
      "_save_hetero_dataset",
      [](const std::string& out, const std::vector<std::string>& type_names,
         const std::vector<int64_t>& counts, const std::vector<Opt>& features,
         const std::vector<std::vector<std::string>>& relations,
         const std::vector<std::string>& relation_what, const std::vector<py::array>& src,
         const std::vector<py::array>& dst, const std::string& target_type, Opt y, Opt train,
         Opt valid, Opt test, bool add_reverse, const std::string& name, bool overwrite,
         const py::dict& extra) {
        DSP_CHECK_ARG(type_names.size() == counts.size() && features.size() == counts.size() &&
                          relations.size() == relation_what.size() &&
                          src.size() == relations.size() && dst.size() == relations.size(),
                      "_save_hetero_dataset: the per-type and per-relation lists differ in length");
        HeteroSaveInputs in;
        in.out = out;
        for (size_t t = 0; t < type_names.size(); ++t) {
          NodeTypeInfo info;
          info.name = type_names[t];
          info.count = counts[t];
          in.types.push_back(info);
          in.features.push_back(raw_array(features[t], {DType::kFloat32, DType::kFloat16}, "x"));
        }
        for (size_t r = 0; r < relations.size(); ++r) {
          DSP_CHECK_ARG(relations[r].size() == 3,
                        "_save_hetero_dataset: a relation is (src, name, dst)");
          in.relations.push_back(RelationInfo{relations[r][0], relations[r][1], relations[r][2]});
          in.src.push_back(raw_array(src[r], {DType::kInt64}, "src"));
          in.dst.push_back(raw_array(dst[r], {DType::kInt64}, "dst"));
        }
        in.relation_what = relation_what;
        in.target_type = target_type;
        in.y = raw_array(y, {DType::kInt64}, "y");
        in.train = raw_array(train, {DType::kInt64}, "train_idx");
        in.valid = raw_array(valid, {DType::kInt64}, "valid_idx");
        in.test = raw_array(test, {DType::kInt64}, "test_idx");
        in.add_reverse = add_reverse;
        in.name = name;
        in.overwrite = overwrite;
        in.extra = py_to_json(extra);
        nlohmann::json meta;
        {
          py::gil_scoped_release nogil;
          meta = save_hetero_dataset(in);
        }
        return json_to_py(meta);
      },
      py::arg("out"), py::arg("type_names"), py::arg("counts"), py::arg("features"),
      py::arg("relations"), py::arg("relation_what"), py::arg("src"), py::arg("dst"),
      py::arg("target_type"), py::arg("y"), py::arg("train_idx"), py::arg("valid_idx"),
      py::arg("test_idx"), py::arg("add_reverse"), py::arg("name"), py::arg("overwrite"),
      py::arg("extra"));

  // dsp.load_hetero_dataset: dataset.json plus read-only numpy views over the mapped files.
  m.def(
      "_load_hetero_dataset",
      [](const std::string& dir, bool validate) {
        LoadOptions o;
        o.validate = validate;
        HeteroDataset ds;
        {
          py::gil_scoped_release nogil;
          ds = load_hetero_dataset(dir, o);
        }
        py::dict d, features, relations;
        d["meta"] = json_to_py(hetero_json(ds));
        d["dir"] = ds.dir;
        for (int t = 0; t < ds.schema.num_types(); ++t) {
          if (t < static_cast<int>(ds.features.size()) && ds.features[t].defined()) {
            features[py::str(ds.schema.node_types[t].name)] = array_to_numpy(ds.features[t]);
          }
        }
        for (int r = 0; r < ds.schema.num_relations(); ++r) {
          const RelationInfo& rel = ds.schema.relations[r];
          relations[py::make_tuple(rel.src, rel.name, rel.dst)] = py::make_tuple(
              array_to_numpy(ds.relations[r].indptr), array_to_numpy(ds.relations[r].indices));
        }
        d["features"] = features;
        d["relations"] = relations;
        d["labels"] = array_to_numpy(ds.labels);
        d["train_idx"] = array_to_numpy(ds.train_idx);
        d["valid_idx"] = array_to_numpy(ds.valid_idx);
        d["test_idx"] = array_to_numpy(ds.test_idx);
        return d;
      },
      py::arg("dir"), py::kw_only(), py::arg("validate") = true);
}

}  // namespace dsp::py_bind
