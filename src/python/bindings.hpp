#pragma once
// What the files of the `dsp._dsp` module share (bindings.cpp, convert.cpp, bind_save.cpp):
// values across the border (JSON as Python objects, arrays as numpy arrays that own or keep their
// C++ buffers, an option table as Python sees it) and the binders of the files besides
// bindings.cpp. No torch header (python/CMakeLists.txt says why).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/dtype.hpp"
#include "core/options.hpp"
#include "graph/array.hpp"

namespace dsp::py_bind {
namespace py = pybind11;

py::object json_to_py(const nlohmann::json& j);
nlohmann::json py_to_json(const py::handle& o);
py::dtype numpy_dtype(DType t);
// A numpy view of `a` that keeps its buffer (often a file mapping) alive; None if undefined.
py::object array_to_numpy(const Array& a);

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

// A numpy array owning `v`, or None when it is empty.
template <class T>
py::object vec_or_none(std::vector<T>&& v) {
  return v.empty() ? py::object(py::none()) : py::object(vec_to_numpy(std::move(v)));
}

// dsp.save_dataset's and dsp.save_hetero_dataset's writers (bind_save.cpp).
void bind_save_dataset(py::module_& m);
void bind_save_hetero_dataset(py::module_& m);

}  // namespace dsp::py_bind
