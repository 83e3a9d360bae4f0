// Shape arithmetic and printing.
#include "weft/tensor/shape.h"

#include <ostream>

#include "weft/core/error.h"

namespace weft {

Shape::Shape(std::initializer_list<std::int64_t> dims)
    : Shape(std::span<const std::int64_t>(dims.begin(), dims.size())) {}

Shape::Shape(std::span<const std::int64_t> dims) {
  if (dims.size() > std::size_t(kMaxRank))
    fail("shape", "rank ", dims.size(), " exceeds the maximum rank ", kMaxRank);
  for (std::int64_t d : dims) {
    if (d < 0) fail("shape", "negative extent ", d);
    dims_[rank_++] = d;
  }
}

std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

std::int64_t Shape::row_size() const {
  std::int64_t n = 1;
  for (int i = 1; i < rank_; ++i) n *= dims_[i];
  return n;
}

Shape Shape::with_rows(std::int64_t rows) const {
  Shape out = rank_ == 0 ? Shape{0} : *this;
  out.dims_[0] = rows;
  return out;
}

Shape Shape::without_rows() const {
  Shape out;
  for (int i = 1; i < rank_; ++i) out.dims_[out.rank_++] = dims_[i];
  return out;
}

Shape Shape::prepend(std::int64_t rows) const {
  if (rank_ == kMaxRank) fail("shape", "cannot add a batch axis to rank-", rank_, " shape");
  Shape out;
  out.dims_[out.rank_++] = rows;
  for (int i = 0; i < rank_; ++i) out.dims_[out.rank_++] = dims_[i];
  return out;
}

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] != other.dims_[i]) return false;
  return true;
}

std::string Shape::to_string() const {
  std::string out = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) out += ", ";
    out += std::to_string(dims_[i]);
  }
  return out + "]";
}

std::ostream& operator<<(std::ostream& out, const Shape& shape) { return out << shape.to_string(); }

}  // namespace weft
