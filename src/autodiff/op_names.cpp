// The op names, generated from ops.def.
#include <array>

#include "weft/autodiff/ops.h"

namespace weft {

std::span<const std::string_view> op_names() {
  static constexpr std::string_view kNames[] = {
#define WEFT_OP(name, math) #name,
#include "weft/autodiff/ops.def"
#undef WEFT_OP
  };
  return kNames;
}

}  // namespace weft
