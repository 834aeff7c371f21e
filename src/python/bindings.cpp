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
#include "python/bindings.hpp"
#include "python/loader.hpp"
#include "python/pg_communicator.hpp"

namespace py = pybind11;

namespace dsp::py_bind {
namespace {

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
  auto convert = [](ConvertFrom from, const char* what) {
    return [from, what](const std::string& input, const std::string& out, const py::kwargs& kw) {
      ConvertCommand cmd;
      read_options(convert_options(), py_to_json(kw), cmd, what);
      DSP_CHECK_ARG(cmd.from == ConvertFrom::kNone, "{}: the format is the function's ({})", what,
                    from);
      cmd.from = from;
      cmd.input = input;
      cmd.output = out;
      py::gil_scoped_release nogil;
      const DatasetMeta m = run_convert(cmd);
      py::gil_scoped_acquire gil;
      return json_to_py(m.to_json());
    };
  };
  m.def("convert_ogb", convert(ConvertFrom::kOgb, "dsp.convert_ogb"), py::arg("raw_dir"),
        py::arg("out"),
        ("Converts an OGB node dataset in its raw CSV layout (dsp convert --from ogb). Keywords, "
         "as the CLI's flags:\n" +
         describe_options(convert_options()))
            .c_str());
  m.def("convert_edge_list", convert(ConvertFrom::kEdgeList, "dsp.convert_edge_list"),
        py::arg("path"), py::arg("out"),
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
        if (command == "loader") return options_to_py(pyext::loader_options_table());
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
// `options`: the Loader's keywords (path among them) read through loader_options_table, dsp
// train's parsers and messages; `sampler`: the sampler's, through dsp train's sampler table
// (csp/sampler.hpp).
LoaderHolder new_loader(const py::object& fanouts, std::optional<IdArray> nodes,
                        const py::dict& options, std::optional<py::dict> sampler) {
  pyext::LoaderOptions o;
  const nlohmann::json given = py_to_json(options);
  const char* what = given.contains("task") ? "dsp.LinkLoader" : "dsp.Loader";
  read_options(pyext::loader_options_table(), given, o, what);
  nlohmann::json so = sampler ? py_to_json(*sampler) : nlohmann::json::object();
  DSP_CHECK_ARG(!so.contains("fanouts"), "dsp.Loader: fanouts is an argument of its own");
  // A list (every relation), the per-relation text or a {relation: [count per layer]} map: the
  // table's fanouts key reads each.
  so["fanouts"] = py_to_json(fanouts);
  read_options(sampler_options_table(), so, o.sampler, what);
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
      .def(py::init(&new_loader), py::arg("fanouts"), py::arg("nodes") = py::none(),
           py::arg("options") = py::dict(), py::arg("sampler") = py::none())
      .def_property_readonly("rank", &pyext::Loader::rank)
      .def_property_readonly("device",
                             [](const pyext::Loader& l) { return l.runtime().device().str(); })
      .def_property_readonly("size", &pyext::Loader::size)
      .def_property_readonly("steps", &pyext::Loader::steps)
      .def_property_readonly(
          "num_local_seeds",
          [](const pyext::Loader& l) { return static_cast<int64_t>(l.local_seeds().size()); })
      .def_property_readonly("local_seeds",
                             [](const pyext::Loader& l) {
                               std::vector<int64_t> v = l.local_seeds();
                               return vec_to_numpy(std::move(v));
                             })
      .def_property_readonly("partition_dir",
                             [](const pyext::Loader& l) { return l.runtime().part().dir; })
      .def_property_readonly(
          "link_train",
          [](const pyext::Loader& l) { return array_to_numpy(l.runtime().part().link_train); })
      .def_property_readonly(
          "meta",
          [](const pyext::Loader& l) { return json_to_py(l.runtime().part().meta.to_json()); })
      .def_property_readonly("features",
                             [](const pyext::Loader& l) {
                               const PartitionData& p = l.runtime().part();
                               DSP_CHECK_ARG(!p.feature_rows.defined(),
                                             "{} reads its features from {} by reference "
                                             "(--feature-storage reference, or a partition on "
                                             "the fly): node v's row is row new2old[v] of that "
                                             "file ({}/new2old.npy)",
                                             p.dir, p.meta.feature_source, p.dir);
                               return array_to_numpy(p.features);
                             })
      .def_property_readonly(
          "labels",
          [](const pyext::Loader& l) { return array_to_numpy(l.runtime().part().labels); })
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
  // order, sampler.sample, load stage), sequentially on a self communicator, with none of
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
          SamplerConfig sc;
          read_options(sampler_options_table(), {{"fanouts", fanouts}, {"temporal", temporal}}, sc,
                       "_reference_epoch");
          SamplerOptions so = sc.options();
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
            SampledBatch sb = sampler.sample(sched.batch_seeds(order, t), epoch, t);
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
