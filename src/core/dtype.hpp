#pragma once
// Element types of arrays, files and collectives.
#include <cstddef>
#include <cstdint>
#include <string>

namespace dsp {

// kInt8 and kBFloat16: low-precision features (dsp partition --feature-dtype, core/quant.hpp).
enum class DType : uint8_t {
  kInt32, kInt64, kFloat16, kFloat32, kFloat64, kUInt8, kInt8, kBFloat16
};

size_t dtype_size(DType t);
const char* dtype_name(DType t);     // "int32", "float16", ...
DType parse_dtype(const std::string&);  // inverse of dtype_name; InvalidArgument otherwise

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<int32_t>() { return DType::kInt32; }
template <>
constexpr DType dtype_of<int64_t>() { return DType::kInt64; }
template <>
constexpr DType dtype_of<float>() { return DType::kFloat32; }
template <>
constexpr DType dtype_of<double>() { return DType::kFloat64; }
template <>
constexpr DType dtype_of<uint8_t>() { return DType::kUInt8; }
template <>
constexpr DType dtype_of<int8_t>() { return DType::kInt8; }
// float16 is stored as raw uint16_t bits (bfloat16 too; read it through raw()).
template <>
constexpr DType dtype_of<uint16_t>() { return DType::kFloat16; }

}  // namespace dsp
