// Element types and devices a tensor can have.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "weft/core/export.h"
#include "weft/core/named_enum.h"

WEFT_API_BEGIN
namespace weft {

// float32 is the differentiable dtype (parameters, gradients, every layer). float64, int32,
// int64 and bool values flow through tensors, the loom's value buffers, blocks and the
// non-differentiable ops (cast, integer arithmetic, comparisons, where); bool is one byte
// holding 0 or 1.
enum class DType : std::uint8_t { kFloat32, kInt32, kFloat64, kInt64, kBool };

inline constexpr DType kAllDTypes[] = {DType::kFloat32, DType::kInt32, DType::kFloat64,
                                       DType::kInt64, DType::kBool};

constexpr std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
    case DType::kBool:
      return 1;
    default:
      return 4;
  }
}

constexpr std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kInt32:
      return "int32";
    case DType::kFloat64:
      return "float64";
    case DType::kInt64:
      return "int64";
    case DType::kBool:
      return "bool";
  }
  return "unknown";
}

constexpr bool is_floating(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64;
}
constexpr bool is_integer(DType dtype) { return dtype == DType::kInt32 || dtype == DType::kInt64; }

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::kFloat32;
}
template <>
constexpr DType dtype_of<std::int32_t>() {
  return DType::kInt32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::kFloat64;
}
template <>
constexpr DType dtype_of<std::int64_t>() {
  return DType::kInt64;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::kBool;
}

// Calls fn(T{}) with the C++ type of `dtype` (float, std::int32_t, double, std::int64_t, bool).
template <typename Fn>
decltype(auto) visit_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kInt32:
      return fn(std::int32_t{});
    case DType::kFloat64:
      return fn(double{});
    case DType::kInt64:
      return fn(std::int64_t{});
    case DType::kBool:
      return fn(bool{});
    default:
      return fn(float{});
  }
}

#define WEFT_DEVICES(X) \
  X(kCpu, "cpu")        \
  X(kCuda, "cuda")
enum class Device : std::uint8_t { WEFT_DEVICES(WEFT_ENUMERATOR) };
WEFT_ENUM_NAMES(Device, WEFT_DEVICES, device_name, parse_device, "device", "device")

}  // namespace weft
WEFT_API_END
