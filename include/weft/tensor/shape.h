// Shape: the extents of a tensor, stored inline (no heap) because ops create many of them.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft {

class Shape {
 public:
  static constexpr int kMaxRank = 6;

  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims);
  explicit Shape(std::span<const std::int64_t> dims);

  int rank() const { return rank_; }
  std::int64_t operator[](int axis) const { return dims_[axis]; }
  std::int64_t& operator[](int axis) { return dims_[axis]; }
  std::int64_t numel() const;
  // Elements per row: the product of every extent after the leading (batch) axis.
  std::int64_t row_size() const;
  std::span<const std::int64_t> dims() const { return {dims_.data(), std::size_t(rank_)}; }

  // The same shape with the leading axis replaced (rank 0 becomes [rows]).
  Shape with_rows(std::int64_t rows) const;
  // The shape without the leading axis: a per-example shape.
  Shape without_rows() const;
  // The shape with `rows` prepended as a new leading axis.
  Shape prepend(std::int64_t rows) const;

  bool operator==(const Shape& other) const;
  bool operator!=(const Shape& other) const { return !(*this == other); }

  // "[3, 4]"; a scalar is "[]".
  std::string to_string() const;

 private:
  std::array<std::int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

std::ostream& operator<<(std::ostream& out, const Shape& shape);

}  // namespace weft
WEFT_API_END
