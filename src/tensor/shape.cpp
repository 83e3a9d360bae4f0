// Shape arithmetic and printing.
#include "weft/tensor/shape.h"

#include <ostream>

#include "weft/core/error.h"

namespace weft {

Shape::Shape(std::initializer_list<std::int64_t> dims)
    : Shape(std::span<const std::int64_t>(dims.begin(), dims.size())) {}

namespace {

// "[2, -1]" for a shape that could not be built.
std::string dims_text(std::span<const std::int64_t> dims) {
  std::string out = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

// The product of the extents from `first` on, or an error naming the shape when it does not fit
// int64: a wrapped count would allocate too little and let kernels write past the end.
std::int64_t checked_product(std::span<const std::int64_t> dims, std::size_t first) {
  std::int64_t n = 1;
  bool overflow = false;
  for (std::size_t i = first; i < dims.size(); ++i)
    overflow |= __builtin_mul_overflow(n, dims[i], &n);
  if (!overflow) return n;
  for (std::size_t i = first; i < dims.size(); ++i)
    if (dims[i] == 0) return 0;  // an empty shape, however large its other extents
  fail("shape", dims_text(dims), " has more elements than a 64-bit count holds");
}

}  // namespace

Shape::Shape(std::span<const std::int64_t> dims) {
  if (dims.size() > std::size_t(kMaxRank))
    fail("shape", dims_text(dims), ": rank ", dims.size(), " exceeds the maximum rank ", kMaxRank);
  for (std::int64_t d : dims) {
    if (d < 0) fail("shape", dims_text(dims), ": negative extent ", d);
    dims_[rank_++] = d;
  }
  checked_product(this->dims(), 0);
}

std::int64_t Shape::numel() const { return checked_product(dims(), 0); }

std::int64_t Shape::row_size() const { return checked_product(dims(), 1); }

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
