#include "python/bindings.hpp"

namespace dsp::py_bind {

py::object json_to_py(const nlohmann::json& j) {
  return py::module_::import("json").attr("loads")(j.dump());
}

nlohmann::json py_to_json(const py::handle& o) {
  return nlohmann::json::parse(
      py::str(py::module_::import("json").attr("dumps")(o)).cast<std::string>());
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

}  // namespace dsp::py_bind
