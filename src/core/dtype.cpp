#include "core/dtype.hpp"

#include "core/error.hpp"

namespace dsp {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kFloat16: return 2;
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
    case DType::kUInt8: return 1;
    case DType::kInt8: return 1;
    case DType::kBFloat16: return 2;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kFloat16: return "float16";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kBFloat16: return "bfloat16";
  }
  return "?";
}

DType parse_dtype(const std::string& s) {
  for (DType t : {DType::kInt32, DType::kInt64, DType::kFloat16, DType::kFloat32,
                  DType::kFloat64, DType::kUInt8, DType::kInt8, DType::kBFloat16}) {
    if (s == dtype_name(t)) return t;
  }
  DSP_THROW_T(InvalidArgument, "unknown dtype '{}'", s);
}

}  // namespace dsp
