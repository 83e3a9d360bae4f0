// Comparing the tensors a file holds with the ones a model or optimizer expects, shared by
// optimizer state loading and checkpoints: every missing, unexpected or mismatched name is
// reported in one message, so a user sees the whole difference at once. Also the in-place
// copy of loaded values into existing (possibly device) tensors.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/io/safetensors.h"
#include "weft/tensor/tensor.h"

namespace weft::train::detail {

struct ExpectedTensor {
  std::string name;
  Shape shape;
  DType dtype = DType::kFloat32;
};

// One line per problem: "parameter 'w' has shape [3, 2] in the file but [3, 4] in the model",
// "missing parameters (in the model, not the file): 'a', 'b'", "unexpected ...". `what` is
// the singular noun ("parameter"), `owner` where the expectation comes from ("the model").
std::vector<std::string> compare_tensors(std::span<const ExpectedTensor> expected,
                                         const io::TensorMap& found, std::string_view what,
                                         std::string_view owner);

// "a; b; c".
std::string join(const std::vector<std::string>& lines, std::string_view separator = "; ");

// Copies src's values into dst's storage (same shape and dtype; any devices), so every handle
// to dst sees them.
void copy_values(const Tensor& src, Tensor& dst);

}  // namespace weft::train::detail
