// Tensor-set comparison and in-place value copies for optimizer state and checkpoints.
#include "tensor_match.h"

#include <cstring>
#include <set>

#include "weft/backend/tensor_ops.h"
#include "weft/core/error.h"

namespace weft::train::detail {
namespace {

constexpr std::size_t kMaxListed = 20;

std::string list_names(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < kMaxListed; ++i)
    out += (i == 0 ? "'" : ", '") + names[i] + "'";
  if (names.size() > kMaxListed) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

}  // namespace

std::vector<std::string> compare_tensors(std::span<const ExpectedTensor> expected,
                                         const io::TensorMap& found, std::string_view what,
                                         std::string_view owner) {
  std::vector<std::string> problems;
  std::vector<std::string> missing;
  std::set<std::string> known;
  for (const ExpectedTensor& e : expected) {
    known.insert(e.name);
    const auto it = found.find(e.name);
    if (it == found.end()) {
      missing.push_back(e.name);
      continue;
    }
    const Tensor& t = it->second;
    if (t.dtype() != e.dtype)
      problems.push_back(weft::detail::concat_message(what, " '", e.name, "' is ",
                                                      dtype_name(t.dtype()), " in the file but ",
                                                      dtype_name(e.dtype), " in ", owner));
    else if (t.shape() != e.shape)
      problems.push_back(weft::detail::concat_message(what, " '", e.name, "' has shape ", t.shape(),
                                                      " in the file but ", e.shape, " in ", owner));
  }
  std::vector<std::string> unexpected;
  for (const auto& entry : found)
    if (known.count(entry.first) == 0) unexpected.push_back(entry.first);
  if (!missing.empty())
    problems.push_back(weft::detail::concat_message("missing ", what, "s (in ", owner,
                                                    ", not in the file): ", list_names(missing)));
  if (!unexpected.empty())
    problems.push_back(weft::detail::concat_message("unexpected ", what, "s (in the file, not in ",
                                                    owner, "): ", list_names(unexpected)));
  return problems;
}

std::string join(const std::vector<std::string>& lines, std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += separator;
    out += lines[i];
  }
  return out;
}

void copy_values(const Tensor& src, Tensor& dst) {
  WEFT_ASSERT(src.shape() == dst.shape() && src.dtype() == dst.dtype());
  if (src.numel() == 0) return;
  if (dst.device() == Device::kCpu) {
    const Tensor host = src.to(Device::kCpu);
    std::memcpy(dst.raw_data(), host.raw_data(), dst.nbytes());
    return;
  }
  backend::copy_values(src, dst);
}

}  // namespace weft::train::detail
