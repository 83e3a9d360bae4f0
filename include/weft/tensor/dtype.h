// Element types and devices a tensor can have.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft {

enum class DType : std::uint8_t { kFloat32, kInt32 };

constexpr std::size_t dtype_size(DType dtype) { return 4; }

constexpr std::string_view dtype_name(DType dtype) {
  return dtype == DType::kFloat32 ? "float32" : "int32";
}

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

enum class Device : std::uint8_t { kCpu, kCuda };

constexpr std::string_view device_name(Device device) {
  return device == Device::kCpu ? "cpu" : "cuda";
}

}  // namespace weft
WEFT_API_END
