// pybind11 module `dsp._dsp`: the public C++ API as Python functions over numpy arrays. No torch
// header and no LibTorch link on purpose (python/dsp/__init__.py makes tensors with
// torch.from_numpy, and dsp.train runs the CLI), so the extension works next to any torch. Arrays
// handed out own their C++ buffers through a capsule (no copy); arrays over a memory-mapped file
// are read-only. Every call that does real work releases the GIL.
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
#include "python/loader.hpp"
#include "python/pg_communicator.hpp"

namespace py = pybind11;

namespace dsp::py_bind {
namespace {

py::object json_to_py(const nlohmann::json& j) {
  return py::module_::import("json").attr("loads")(j.dump());
}

nlohmann::json py_to_json(const py::handle& o) {
  return nlohmann::json::parse(
      py::str(py::module_::import("json").attr("dumps")(o)).cast<std::string>());
}

// A command's option table (core/options.hpp) as Python sees it: keyword, flag, default, help.
template <class C>
py::list options_to_py(const OptionTable<C>& table) {
  const C defaults{};
  py::list l;
  for (const Option<C>& o : table) {
    if (o.key.empty()) continue;
    py::dict d;
    d["key"] = o.key;
    d["flag"] = o.flag;
    d["default"] = json_to_py(o.write(defaults));
    d["help"] = o.help;
    l.append(d);
  }
  return l;
}

template <class C>
std::string describe_options(const OptionTable<C>& table) {
  const C defaults{};
  std::string s;
  for (const Option<C>& o : table) {
    if (o.key.empty()) continue;
    s += fmt::format("  {} = {} ({}): {}\n", o.key, o.write(defaults).dump(), o.flag, o.help);
  }
  return s;
}

// A numpy array owning `v` (moved to the heap; freed when the array dies).
template <class T>
py::array_t<T> vec_to_numpy(std::vector<T>&& v, std::vector<py::ssize_t> shape = {}) {
  auto* heap = new std::vector<T>(std::move(v));
  py::capsule owner(heap, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  if (shape.empty()) shape = {static_cast<py::ssize_t>(heap->size())};
  return py::array_t<T>(shape, heap->data(), owner);
}

py::dtype numpy_dtype(DType t) {
  switch (t) {
    case DType::kInt32:
      return py::dtype::of<int32_t>();
    case DType::kInt64:
      return py::dtype::of<int64_t>();
    case DType::kFloat16:
      return py::dtype("float16");
    case DType::kFloat32:
      return py::dtype::of<float>();
    case DType::kFloat64:
      return py::dtype::of<double>();
    case DType::kUInt8:
      return py::dtype::of<uint8_t>();
    case DType::kInt8:
      return py::dtype::of<int8_t>();
    case DType::kBFloat16:  // numpy has no bfloat16: its bits
      return py::dtype::of<uint16_t>();
  }
  return py::dtype::of<uint8_t>();
}

// A numpy view of `a` that keeps its buffer (often a file mapping) alive; None if undefined.
// The strides are computed here: pybind11 before 2.12 derives them from the dtype's item size,
// which it reads at numpy 1.x's struct offset (wrong under numpy 2).
py::object array_to_numpy(const Array& a) {
  if (!a.defined()) return py::none();
  auto* heap = new Array(a);
  py::capsule owner(heap, [](void* p) { delete static_cast<Array*>(p); });
  std::vector<py::ssize_t> shape(a.shape().begin(), a.shape().end());
  std::vector<py::ssize_t> strides(shape.size());
  py::ssize_t stride = static_cast<py::ssize_t>(dtype_size(a.dtype()));
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  py::array arr(numpy_dtype(a.dtype()), shape, strides, heap->raw(), owner);
  if (a.is_mapped()) arr.attr("setflags")(py::arg("write") = false);
  return std::move(arr);
}

// The DLPack ABI (dlpack.h, v0.8; stable): a device array handed to torch.from_dlpack without a
// copy and without linking torch.
struct DLDevice {
  int32_t device_type;  // kDLCUDA = 2
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // kDLFloat = 2
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
struct DlpackOwner {
  std::shared_ptr<void> rows;
  int64_t shape[2];
  DLManagedTensor managed;
};

// A "dltensor" capsule over device rows [rows x cols] (float32 or float16) that keeps them alive
// until the consumer (or, unconsumed, the capsule) lets go.
py::object device_rows_to_dlpack(std::shared_ptr<void> rows, int64_t n, int64_t cols, DType dt,
                                 int device) {
  DSP_CHECK_ARG(dt == DType::kFloat32 || dt == DType::kFloat16,
                "device features of dtype {} cannot cross to Python", dtype_name(dt));
  auto* owner = new DlpackOwner{std::move(rows), {n, cols}, {}};
  DLTensor& t = owner->managed.dl_tensor;
  t.data = owner->rows.get();
  t.device = {2, device};
  t.ndim = 2;
  t.dtype = {2, static_cast<uint8_t>(dt == DType::kFloat32 ? 32 : 16), 1};
  t.shape = owner->shape;
  t.strides = nullptr;  // compact row-major
  t.byte_offset = 0;
  owner->managed.manager_ctx = owner;
  owner->managed.deleter = [](DLManagedTensor* m) {
    delete static_cast<DlpackOwner*>(m->manager_ctx);
  };
  PyObject* cap = PyCapsule_New(&owner->managed, "dltensor", [](PyObject* c) {
    // Still named "dltensor": never consumed, so this capsule owns the tensor.
    if (PyCapsule_IsValid(c, "dltensor")) {
      auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
      m->deleter(m);
    }
  });
  if (!cap) {
    delete owner;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(cap);
}

// A numpy array owning `v`, or None when it is empty.
template <class T>
py::object vec_or_none(std::vector<T>&& v) {
  return v.empty() ? py::object(py::none()) : py::object(vec_to_numpy(std::move(v)));
}

// A heterogeneous batch's input features per node type (LoadedBatch::typed_features): a list
// over the schema's types of float32 [rows of the type, its width], None for a type without
// features; None for a batch that has none (a homogeneous graph).
py::object typed_features_to_py(LoadedBatch& lb) {
  if (lb.typed_rows.empty()) return py::none();
  py::list out;
  for (size_t t = 0; t < lb.typed_rows.size(); ++t) {
    const int64_t dim = t < lb.typed_dims.size() ? lb.typed_dims[t] : 0;
    if (dim == 0 || t >= lb.typed_features.size()) {
      out.append(py::none());
      continue;
    }
    const auto rows = static_cast<py::ssize_t>(lb.typed_rows[t].size());
    DSP_CHECK(static_cast<int64_t>(lb.typed_features[t].size()) == rows * dim,
              "typed features of type {}: {} values for {} rows of width {}", t,
              lb.typed_features[t].size(), rows, dim);
    out.append(vec_to_numpy(std::move(lb.typed_features[t]), {rows, dim}));
  }
  return out;
}

// (blocks, x, y, seeds, epoch, batch, pairs, typed); y: int64 [num_seeds] classes, int8
// [num_seeds, L] 0/1 rows of a multi-label dataset, or None; pairs: None, or (src, dst, label) of a
// link batch (int64 seed indices, float32 labels). blocks[l] = dict of indptr, indices, num_src,
// num_dst, src_ids, weights, src_times (temporal sampling: every source's time, else None),
// edge_types and src_types (int32, heterogeneous graphs, else None). x: a numpy array (host
// features), or a DLPack capsule of the device rows (device features). typed: see
// typed_features_to_py.
py::tuple batch_to_py(LoadedBatch&& lb) {
  py::list blocks;
  for (Block& b : lb.sample.blocks) {
    b.edges_to_host();
    py::dict d;
    d["num_src"] = b.num_src;
    d["num_dst"] = b.num_dst;
    d["indptr"] = vec_to_numpy(std::move(b.indptr));
    d["indices"] = vec_to_numpy(std::move(b.indices));
    d["src_ids"] = vec_to_numpy(std::move(b.src_ids));
    d["weights"] = vec_or_none(std::move(b.weights));
    d["src_times"] = vec_or_none(std::move(b.src_times));
    d["edge_types"] = b.src_types.empty() ? py::object(py::none())
                                          : py::object(vec_to_numpy(std::move(b.edge_types)));
    d["src_types"] = vec_or_none(std::move(b.src_types));
    blocks.append(d);
  }
  auto rows = static_cast<py::ssize_t>(lb.feature_dim ? lb.features.size() / lb.feature_dim : 0);
  if ((lb.feature_dim == 0 || lb.features_on_device()) && !lb.sample.blocks.empty()) {
    rows = lb.sample.blocks.front().num_src;
  }
  py::object x = lb.features_on_device()
                     ? device_rows_to_dlpack(std::move(lb.device_features), rows, lb.feature_dim,
                                             lb.device_dtype, lb.device.index)
                     : vec_to_numpy(std::move(lb.features), {rows, lb.feature_dim});
  // Multi-label: int8 [num_seeds x L] 0/1 rows; else int64 [num_seeds] classes (None: no labels).
  const auto seeds_n = static_cast<py::ssize_t>(lb.sample.seeds.size());
  py::object y =
      lb.multilabel()
          ? py::object(vec_to_numpy(std::move(lb.label_matrix), {seeds_n, lb.label_columns}))
      : lb.labels.empty() && seeds_n > 0 ? py::object(py::none())
                                         : py::object(vec_to_numpy(std::move(lb.labels)));
  py::object seeds = vec_to_numpy(std::move(lb.sample.seeds));
  LinkPairs& lp = lb.sample.pairs;
  py::object pairs = lp.src.empty() ? py::object(py::none())
                                    : py::object(py::make_tuple(vec_to_numpy(std::move(lp.src)),
                                                                vec_to_numpy(std::move(lp.dst)),
                                                                vec_to_numpy(std::move(lp.label))));
  py::object typed = typed_features_to_py(lb);
  return py::make_tuple(blocks, x, y, seeds, lb.sample.epoch, lb.sample.batch, pairs, typed);
}

// Python exception classes mirroring dsp::Error's hierarchy; the C++ message is kept verbatim.
struct Exceptions {
  py::object error, invalid_argument, io_error, format_error, comm_error, not_supported;
};
Exceptions* g_exc = nullptr;

py::object new_exception(py::module_& m, const char* name, py::tuple bases, const char* doc) {
  std::string qual = std::string("dsp.") + name;
  PyObject* e = PyErr_NewExceptionWithDoc(qual.c_str(), doc, bases.ptr(), nullptr);
  if (!e) throw py::error_already_set();
  py::object obj = py::reinterpret_steal<py::object>(e);
  m.add_object(name, obj);
  return obj;
}

void register_exceptions(py::module_& m) {
  g_exc = new Exceptions();  // lives as long as the process: translators may run at exit
  g_exc->error = new_exception(m, "Error", py::make_tuple(py::handle(PyExc_RuntimeError)),
                               "Base of every error raised by dsp's C++ code.");
  g_exc->invalid_argument = new_exception(
      m, "InvalidArgument", py::make_tuple(g_exc->error, py::handle(PyExc_ValueError)),
      "A caller passed something invalid (the CLI's exit code 2).");
  g_exc->io_error =
      new_exception(m, "IoError", py::make_tuple(g_exc->error, py::handle(PyExc_OSError)),
                    "A file could not be opened, read or written.");
  g_exc->format_error = new_exception(m, "FormatError", py::make_tuple(g_exc->error),
                                      "A file exists but its content is wrong.");
  g_exc->comm_error = new_exception(m, "CommError", py::make_tuple(g_exc->error),
                                    "A collective failed or timed out.");
  g_exc->not_supported = new_exception(
      m, "NotSupported", py::make_tuple(g_exc->error, py::handle(PyExc_NotImplementedError)),
      "The operation is not supported by this backend.");
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const InvalidArgument& e) {
      PyErr_SetString(g_exc->invalid_argument.ptr(), e.what());
    } catch (const IoError& e) {
      PyErr_SetString(g_exc->io_error.ptr(), e.what());
    } catch (const FormatError& e) {
      PyErr_SetString(g_exc->format_error.ptr(), e.what());
    } catch (const CommError& e) {
      PyErr_SetString(g_exc->comm_error.ptr(), e.what());
    } catch (const NotSupported& e) {
      PyErr_SetString(g_exc->not_supported.ptr(), e.what());
    } catch (const Error& e) {
      PyErr_SetString(g_exc->error.ptr(), e.what());
    }
  });
}

// The budget rules of `dsp generate` (graph/generate.hpp): empty strings take the defaults.
py::dict dataset_to_py(Dataset&& ds) {
  py::dict d;
  d["meta"] = json_to_py(ds.meta.to_json());
  d["dir"] = ds.dir;
  d["indptr"] = array_to_numpy(ds.graph.indptr);
  d["indices"] = array_to_numpy(ds.graph.indices);
  d["edge_weight"] = array_to_numpy(ds.graph.weights);
  d["edge_time"] = array_to_numpy(ds.graph.times);
  d["node_time"] = array_to_numpy(ds.node_time);
  d["features"] = array_to_numpy(ds.features);
  d["labels"] = array_to_numpy(ds.labels);
  d["train_idx"] = array_to_numpy(ds.train_idx);
  d["valid_idx"] = array_to_numpy(ds.valid_idx);
  d["test_idx"] = array_to_numpy(ds.test_idx);
  // Link prediction's pairs, int64 [E, 2] (src, dst) each, None where the dataset has none.
  d["link_train"] = array_to_numpy(ds.link_train);
  d["link_valid"] = array_to_numpy(ds.link_valid);
  d["link_test"] = array_to_numpy(ds.link_test);
  d["link_valid_neg"] = array_to_numpy(ds.link_valid_neg);
  d["link_test_neg"] = array_to_numpy(ds.link_test_neg);
  // > 0: link_*_neg hold this many negatives per held-out positive, positive by positive.
  d["link_negatives_per_positive"] = ds.meta.link_negatives_per_positive;
  return d;
}

// The module's basics: version, log level, the job hooks of dsp/__init__.py.
void bind_basics(py::module_& m) {
  register_exceptions(m);
  m.attr("__version__") = DSP_VERSION;
#ifdef DSP_HAVE_TRAIN
  m.attr("has_trainer") = true;  // the CLI next to the module has `dsp train`
#else
  m.attr("has_trainer") = false;
#endif
#ifdef DSP_HAVE_CUDA
  m.attr("has_cuda") = true;  // the CUDA sampler, feature and NCCL backends are compiled in
  m.attr("cuda_archs") = DSP_CUDA_ARCHS;
#else
  m.attr("has_cuda") = false;
  m.attr("cuda_archs") = "";
#endif

  m.def(
      "set_log_level", [](const std::string& s) { set_log_level(parse_log_level(s)); },
      py::arg("level"), "trace|debug|info|warn|error|off");

  // For dsp/__init__.py's uncaught-exception hook: a rank of a multi-rank job that fails ends
  // every rank (ccc/job.hpp), as the CLI does.
  m.def("_job_has_peers", &job_has_peers);
  m.def("_job_rank", &job_rank);
  m.def(
      "_abort_job", [](const std::string& message) { abort_job(message, 1); }, py::arg("message"));
  // dsp.Loader(process_group=...): the "torch" backend (pg_communicator.hpp) and the group its
  // next communicators are made over; an MPI-launched process keeps MPI unless asked.
  pyext::register_torch_backend();
  m.def("launched_by_mpi", &launched_by_mpi);
  m.def("_set_torch_group", &pyext::set_torch_group, py::arg("group"));
}

// The commands Python shares with the CLI: generate and convert.
// dsp generate hetero: its table and run (graph/commands.hpp); returns the dataset's summary.
void bind_generate_hetero(py::module_& m) {
  m.def(
      "generate_hetero",
      [](const std::string& out, const py::kwargs& kw) {
        HeteroCommand cmd;
        read_options(hetero_options(), py_to_json(kw), cmd, "dsp.generate_hetero");
        cmd.run.out = out;
        HeteroGenerateResult r;
        {
          py::gil_scoped_release nogil;
          r = run_generate(cmd);
        }
        return json_to_py({{"name", r.name},
                           {"hetero", r.schema.to_json()},
                           {"num_train", r.num_train},
                           {"num_valid", r.num_valid},
                           {"num_test", r.num_test},
                           {"extra", r.extra}});
      },
      py::arg("out"),
      ("Writes an OGB-MAG-shaped heterogeneous dataset (dsp generate hetero); returns its name, "
       "schema (\"hetero\"), split sizes and provenance (\"extra\": the accuracy bound). "
       "Keywords, as the CLI's flags:\n" +
       describe_options(hetero_options()))
          .c_str());
}

void bind_commands(py::module_& m) {
  // dsp generate rmat | community: the command's table and run (graph/commands.hpp).
  auto generate = [](auto make_cmd, const auto& table, const char* what) {
    return [make_cmd, &table, what](const std::string& out, const py::kwargs& kw) {
      auto cmd = make_cmd();
      read_options(table, py_to_json(kw), cmd, what);
      cmd.run.out = out;
      py::gil_scoped_release nogil;
      const GenerateResult r = run_generate(cmd);
      py::gil_scoped_acquire gil;
      return json_to_py(r.meta.to_json());
    };
  };
  m.def("generate_community",
        generate([] { return CommunityCommand(); }, community_options(), "dsp.generate_community"),
        py::arg("out"),
        ("Writes a degree-corrected SBM dataset (dsp generate community); returns its meta. Out "
         "of core (an external sort on disk) when the in-memory estimate exceeds memory_budget or "
         "with out_of_core=True; the files are identical either way. Keywords, as the CLI's "
         "flags:\n" +
         describe_options(community_options()))
            .c_str());
  m.def("generate_rmat",
        generate([] { return RmatCommand(); }, rmat_options(), "dsp.generate_rmat"), py::arg("out"),
        ("Writes an R-MAT dataset (dsp generate rmat); returns its meta. Keywords, as the CLI's "
         "flags:\n" +
         describe_options(rmat_options()))
            .c_str());

  // dsp convert --from ogb | edgelist: the same table and run (graph/commands.hpp), the format
  // given by the function.
  auto convert = [](const char* from, const char* what) {
    return [from, what](const std::string& input, const std::string& out, const py::kwargs& kw) {
      ConvertCommand cmd;
      read_options(convert_options(), py_to_json(kw), cmd, what);
      DSP_CHECK_ARG(cmd.from.empty(), "{}: the format is the function's ({})", what, from);
      cmd.from = from;
      cmd.input = input;
      cmd.output = out;
      py::gil_scoped_release nogil;
      const DatasetMeta m = run_convert(cmd);
      py::gil_scoped_acquire gil;
      return json_to_py(m.to_json());
    };
  };
  m.def("convert_ogb", convert("ogb", "dsp.convert_ogb"), py::arg("raw_dir"), py::arg("out"),
        ("Converts an OGB node dataset in its raw CSV layout (dsp convert --from ogb). Keywords, "
         "as the CLI's flags:\n" +
         describe_options(convert_options()))
            .c_str());
  m.def("convert_edge_list", convert("edgelist", "dsp.convert_edge_list"), py::arg("path"),
        py::arg("out"),
        ("Converts a text edge list 'src dst [weight]' (dsp convert --from edgelist). Keywords, as "
         "the CLI's flags:\n" +
         describe_options(convert_options()))
            .c_str());
}

// The readers of datasets and partitions, the option tables, and partitioning.
void bind_partition(py::module_& m) {
  m.def(
      "load_dataset",
      [](const std::string& dir, bool validate) {
        LoadOptions o;
        o.validate = validate;
        Dataset ds;
        {
          py::gil_scoped_release nogil;
          ds = load_dataset(dir, o);
        }
        return dataset_to_py(std::move(ds));
      },
      py::arg("dir"), py::kw_only(), py::arg("validate") = true,
      "Loads a dataset directory: meta plus read-only numpy views over the mapped .npy files.");

  // The option tables of the commands Python shares with the CLI (tests/python compare them).
  m.def(
      "_options",
      [](const std::string& command) -> py::list {
        if (command == "partition") return options_to_py(partition_options());
        if (command == "convert") return options_to_py(convert_options());
        if (command == "generate rmat") return options_to_py(rmat_options());
        if (command == "generate community") return options_to_py(community_options());
        if (command == "link") return options_to_py(link_options_table());  // dsp.LinkLoader
        DSP_THROW_T(InvalidArgument, "no option table for '{}'", command);
      },
      py::arg("command"));

  m.def(
      "partition",
      [](const std::string& dataset_dir, const std::string& out, const py::kwargs& kw) {
        PartitionCommand cmd;  // dsp partition's table, checks and run (partition_command.hpp)
        cmd.dataset = dataset_dir;
        cmd.out = out;
        read_options(partition_options(), py_to_json(kw), cmd, "dsp.partition");
        PartitionMeta meta;
        PartitionPlan plan;
        {
          py::gil_scoped_release nogil;
          meta = run_partition(cmd, presample_hook, &plan);
        }
        return json_to_py(cmd.dry_run ? plan.to_json() : meta.to_json());
      },
      py::arg("dataset_dir"), py::arg("out"),
      ("Co-partitions a dataset directory (dsp partition): returns the partition meta, or with "
       "dry_run=True the memory estimate. Keywords, as dsp partition's flags:\n" +
       describe_options(partition_options()))
          .c_str());

  m.def(
      "load_partition_meta",
      [](const std::string& dir) { return json_to_py(load_partition_meta(dir).to_json()); },
      py::arg("dir"));
  m.def("_is_partition_dir", &is_partition_dir, py::arg("dir"),
        "Whether `dir` is a partition directory (layout/partition/partition_dir.hpp).");
}

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

// Node ids as the bindings take them: int64, C order (dsp/__init__.py checks the dtype first).
using IdArray = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

// dsp.to_dsp_ids / dsp.to_original_ids (python/dsp/__init__.py): a flat int64 array mapped
// through a partition directory's renumbering (pyext::to_dsp_ids); `label` names it in errors.
void bind_id_maps(py::module_& m) {
  auto map = [](auto fn) {
    return [fn](const std::string& dir, const IdArray& ids, const std::string& label) {
      std::vector<int64_t> out;
      {
        py::gil_scoped_release nogil;
        out = fn(dir, ids.data(), static_cast<int64_t>(ids.size()), label.empty() ? dir : label);
      }
      return vec_to_numpy(std::move(out));
    };
  };
  m.def("_to_dsp_ids", map(&pyext::to_dsp_ids), py::arg("dir"), py::arg("ids"),
        py::arg("label") = "");
  m.def("_to_original_ids", map(&pyext::to_original_ids), py::arg("dir"), py::arg("ids"),
        py::arg("label") = "");
}

// _checksum(buffer): the checksum a dsp checkpoint records for these bytes (core/hash.hpp's
// digest as 16 hex digits), so dsp.load_model verifies what it reads as the C++ trainer does.
void bind_checksum(py::module_& m) {
  m.def("_checksum", [](const py::buffer& b) {
    const py::buffer_info info = b.request();
    DSP_CHECK_ARG(info.ndim <= 1 || info.strides.back() == info.itemsize,
                  "_checksum needs a contiguous buffer");
    Hasher h;
    h.update(info.ptr, static_cast<size_t>(info.size * info.itemsize));
    return fmt::format("{:016x}", h.digest());
  });
}

// Destroys a Loader with the GIL released: its destructor finishes the epoch and closes its
// communicators, which may wait on peers and, on the torch backend, take the GIL themselves.
struct ReleaseGilDelete {
  void operator()(pyext::Loader* l) const {
    if (PyGILState_Check()) {
      py::gil_scoped_release nogil;
      delete l;
    } else {
      delete l;
    }
  }
};
using LoaderHolder = std::unique_ptr<pyext::Loader, ReleaseGilDelete>;

// dsp.Loader's engine from the Python arguments (dsp.Loader.__init__ passes them all).
LoaderHolder new_loader(const std::string& path, const py::object& fanouts, int64_t batch_size,
                        bool shuffle, const std::string& split, uint64_t seed, int prefetch,
                        const std::string& backend, const std::string& partition_method,
                        const std::string& device, int64_t fifo_rows, int64_t fifo_shared_rows,
                        const std::string& transport, const std::string& topology_memory,
                        const std::string& order, int bfs_sequences, std::optional<IdArray> nodes,
                        std::optional<py::dict> link, std::optional<py::dict> sampler,
                        const std::string& memory_budget) {
  pyext::LoaderOptions o;
  // The rank's options through the rank room's table: dsp train's parsers and
  // messages (pipeline/rank/options.hpp).
  nlohmann::json rank = {{"path", path},
                         {"backend", backend},
                         {"partition_method", partition_method},
                         {"device", device},
                         {"transport", transport},
                         {"fifo_rows", fifo_rows},
                         {"fifo_shared_rows", fifo_shared_rows}};
  if (!topology_memory.empty()) rank["topology_memory"] = topology_memory;
  if (!memory_budget.empty()) rank["memory_budget"] = memory_budget;
  read_options(rank_options_table(), rank, o.rank, "dsp.Loader");
  read_options(seed_order_options_table(), {{"order", order}, {"bfs_sequences", bfs_sequences}},
               o.seed_order, "dsp.Loader");
  // dsp.LinkLoader's keywords through dsp train's link table (pipeline/link_batch.hpp), task
  // "link" among them.
  if (link) read_options(link_options_table(), py_to_json(*link), o.link, "dsp.LinkLoader");
  // dsp.Loader's sampler keywords through dsp train's sampler table (csp/sampler.hpp).
  nlohmann::json so = sampler ? py_to_json(*sampler) : nlohmann::json::object();
  DSP_CHECK_ARG(!so.contains("fanouts"), "dsp.Loader: fanouts is an argument of its own");
  // A list (every relation), the per-relation text or a {relation: [count per layer]} map: the
  // table's fanouts key reads each.
  so["fanouts"] = py_to_json(fanouts);
  read_options(sampler_options_table(), so, o.sampler, "dsp.Loader");
  o.batch_size = batch_size;
  o.shuffle = shuffle;
  o.split = parse_choice<Split>(split);
  o.seed = seed;
  o.prefetch = prefetch;
  if (nodes) {
    o.has_nodes = true;
    o.nodes.assign(nodes->data(), nodes->data() + nodes->size());
  }
  o.validate();  // before the GIL is released: cheap, and the common failure
  py::gil_scoped_release nogil;
  return LoaderHolder(new pyext::Loader(std::move(o)));
}

// dsp.Loader's engine.
void bind_loader(py::module_& m) {
  py::class_<pyext::Loader, LoaderHolder>(m, "_Loader")
      .def(py::init(&new_loader), py::arg("path"), py::arg("fanouts"), py::arg("batch_size"),
           py::arg("shuffle"), py::arg("split"), py::arg("seed"), py::arg("prefetch"),
           py::arg("backend"), py::arg("partition_method"), py::arg("device") = "cpu",
           py::arg("fifo_rows") = 0, py::arg("fifo_shared_rows") = 0, py::arg("transport") = "auto",
           py::arg("topology_memory") = "", py::arg("order") = "random",
           py::arg("bfs_sequences") = 4, py::arg("nodes") = py::none(),
           py::arg("link") = py::none(), py::arg("sampler") = py::none(),
           py::arg("memory_budget") = "")
      .def_property_readonly("rank", &pyext::Loader::rank)
      .def_property_readonly("device",
                             [](const pyext::Loader& l) { return l.runtime().device().str(); })
      .def_property_readonly("size", &pyext::Loader::size)
      .def_property_readonly("steps", &pyext::Loader::steps)
      .def_property_readonly("num_local_seeds", &pyext::Loader::num_local_seeds)
      .def_property_readonly("local_seeds",
                             [](const pyext::Loader& l) {
                               std::vector<int64_t> v = l.local_seeds();
                               return vec_to_numpy(std::move(v));
                             })
      .def_property_readonly("partition_dir", [](const pyext::Loader& l) { return l.part().dir; })
      .def_property_readonly(
          "link_train", [](const pyext::Loader& l) { return array_to_numpy(l.part().link_train); })
      .def_property_readonly(
          "meta", [](const pyext::Loader& l) { return json_to_py(l.part().meta.to_json()); })
      .def_property_readonly("features",
                             [](const pyext::Loader& l) {
                               const PartitionData& p = l.part();
                               DSP_CHECK_ARG(!p.feature_rows.defined(),
                                             "{} reads its features from {} by reference "
                                             "(--feature-storage reference, or a partition on "
                                             "the fly): node v's row is row new2old[v] of that "
                                             "file ({}/new2old.npy)",
                                             p.dir, p.meta.feature_source, p.dir);
                               return array_to_numpy(p.features);
                             })
      .def_property_readonly("labels",
                             [](const pyext::Loader& l) { return array_to_numpy(l.part().labels); })
      .def("start_epoch",
           [](pyext::Loader& l, int64_t epoch) {
             py::gil_scoped_release nogil;
             l.start_epoch(epoch);
           })
      .def("next",
           [](pyext::Loader& l) -> py::object {
             LoadedBatch lb;
             bool ok;
             {
               py::gil_scoped_release nogil;
               ok = l.next(lb);
             }
             if (!ok) return py::none();
             return batch_to_py(std::move(lb));
           })
      .def("finish_epoch", [](pyext::Loader& l) {
        py::gil_scoped_release nogil;
        l.finish_epoch();
      });
}

// dsp.Loader(pin_memory=True)'s placement of torch's page-locked copies: the NUMA nodes nearest
// a device, and a context manager binding the calling thread's new memory to nodes
// (pipeline/cores.hpp: ThreadMemoryBinding) while a batch is pinned.
void bind_thread_memory(py::module_& m) {
  using Holder = std::unique_ptr<ThreadMemoryBinding>;
  struct Scope {
    std::vector<int> nodes;
    Holder binding;
  };
  m.def(
      "_near_memory_nodes",
      [](const std::string& device) { return near_memory(Device::parse(device)).nodes; },
      py::arg("device"));
  m.def("_thread_memory_nodes", &thread_memory_nodes);
  py::class_<Scope>(m, "_ThreadMemoryBinding")
      .def(py::init([](std::vector<int> nodes) {
             return Scope{std::move(nodes), nullptr};
           }),
           py::arg("nodes"))
      .def(
          "__enter__",
          [](Scope& s) -> Scope& {
            s.binding = std::make_unique<ThreadMemoryBinding>(s.nodes);
            return s;
          },
          py::return_value_policy::reference)
      .def("__exit__", [](Scope& s, const py::args&) { s.binding.reset(); });
}

// Test hook: one of every collective on a fresh communicator of `backend`, with inputs that
// depend on the rank (uneven and zero-length all_to_all_v segments, every reduce op, a root that
// is not 0), and the counters after them. Every backend must give the same results, so
// tests/python/test_torchrun.py compares the torch backend's with MPI's and with closed forms.
py::dict collectives_probe(const std::string& backend) {
  std::vector<int64_t> recv_counts, a2a, sum_i32, bcast(2, 0);
  std::vector<double> max_f64(2);
  std::vector<float> min_f32(1), gathered;
  CommCounters counters;
  int rank = 0, size = 1;
  {
    py::gil_scoped_release nogil;
    auto c = make_communicator(backend);
    rank = c->rank();
    size = c->size();
    std::vector<int64_t> send_counts(size), send;
    for (int p = 0; p < size; ++p) {
      send_counts[p] = (p + rank) % 3;  // some segments empty
      for (int64_t k = 0; k < send_counts[p]; ++k) send.push_back(100 * rank + 10 * p + k);
    }
    a2a = c->all_to_all_v(send, send_counts, &recv_counts);
    std::vector<int32_t> i32 = {rank + 1, -rank};
    c->all_reduce(i32.data(), 2, DType::kInt32, ReduceOp::kSum);
    sum_i32.assign(i32.begin(), i32.end());
    max_f64 = {0.5 * rank, -1.0 * rank};
    c->all_reduce(max_f64.data(), 2, DType::kFloat64, ReduceOp::kMax);
    min_f32 = {static_cast<float>(rank) + 0.25f};
    c->all_reduce(min_f32.data(), 1, DType::kFloat32, ReduceOp::kMin);
    if (rank == size - 1) bcast = {42, static_cast<int64_t>(rank)};
    c->broadcast(bcast.data(), 2, DType::kInt64, size - 1);
    const std::vector<float> mine = {static_cast<float>(rank), rank + 0.5f};
    gathered.resize(2 * static_cast<size_t>(size));
    c->all_gather(mine.data(), gathered.data(), 2, DType::kFloat32);
    c->barrier();
    counters = c->counters();
  }
  py::dict d;
  d["rank"] = rank;
  d["size"] = size;
  d["recv_counts"] = recv_counts;
  d["all_to_all_v"] = a2a;
  d["sum_i32"] = sum_i32;
  d["max_f64"] = max_f64;
  d["min_f32"] = min_f32;
  d["broadcast"] = bcast;
  d["all_gather"] = gathered;
  d["bytes_sent"] = counters.bytes_sent;
  d["bytes_recv"] = counters.bytes_recv;
  d["ops"] = counters.ops;
  return d;
}

void bind_epoch_hook(py::module_& m) {
  m.def("_collectives_probe", &collectives_probe, py::arg("backend"));

  // Test hook: the batches of one epoch computed the way `dsp train` does (job.cpp: scheduler
  // order, sampler.sample_nodes, load stage), sequentially on a self communicator, with none of
  // the Loader's threading or queueing: tests compare the Loader's tensors with these. temporal:
  // the sampler option (off, uniform, recent).
  m.def(
      "_reference_epoch",
      [](const std::string& part_dir, std::vector<int> fanouts, int64_t batch_size, uint64_t seed,
         int64_t epoch, const std::string& temporal) {
        std::vector<LoadedBatch> out;
        {
          py::gil_scoped_release nogil;
          auto coord = make_coordinator("self");
          PartitionData part = load_partition(part_dir, 0, 1);
          SamplerOptions so;
          read_options(sampler_options_table(), {{"fanouts", fanouts}, {"temporal", temporal}}, so,
                       "_reference_epoch");
          so.seed = seed;
          CollectiveSampler sampler(part, coord->channel(WorkerKind::kSampler), so);
          FeatureStore store(part, coord->channel(WorkerKind::kLoader));
          EpochScheduler sched(std::vector<int64_t>(part.seeds.data<int64_t>(),
                                                    part.seeds.data<int64_t>() + part.seeds.dim(0)),
                               batch_size, seed);
          coord->channel(WorkerKind::kMain).set_step(-1, 0);
          int64_t steps = sched.agree_steps(coord->channel(WorkerKind::kMain));
          std::vector<int64_t> order = sched.epoch_order(epoch);
          for (int64_t t = 0; t < steps; ++t) {
            coord->channel(WorkerKind::kSampler).set_step(epoch, t);
            SampledBatch sb = sampler.sample_nodes(sched.batch_seeds(order, t), epoch, t);
            sb.epoch = epoch;
            sb.batch = t;
            coord->channel(WorkerKind::kLoader).set_step(epoch, t);
            out.push_back(dsp::load_batch(std::move(sb), &store, part.labels));
          }
        }
        py::list res;
        for (auto& lb : out) res.append(batch_to_py(std::move(lb)));
        return res;
      },
      py::arg("part_dir"), py::arg("fanouts"), py::arg("batch_size"), py::arg("seed"),
      py::arg("epoch"), py::arg("temporal") = "off");
}

}  // namespace

void bind(py::module_& m) {
  bind_basics(m);
  bind_commands(m);
  bind_generate_hetero(m);
  bind_partition(m);
  bind_save_dataset(m);
  bind_save_hetero_dataset(m);
  bind_id_maps(m);
  bind_checksum(m);
  bind_loader(m);
  bind_thread_memory(m);
  bind_epoch_hook(m);
}

}  // namespace dsp::py_bind

PYBIND11_MODULE(_dsp, m) {
  m.doc() = "dsp's C++ core (use the `dsp` package, which wraps this in torch tensors)";
  dsp::py_bind::bind(m);
}
