// JSON lines (io::for_each_json_line), the input of `weft infer calculator` and of data files.
#include <sstream>

#include "fuzz_target.h"
#include "weft/io/json_lines.h"

using namespace weft;

WEFT_FUZZ_TARGET(json_lines) {
  std::istringstream in{std::string(input)};
  std::size_t bytes = 0;
  io::for_each_json_line(in, "fuzz", [&](nlohmann::json&& value, std::int64_t) {
    bytes += io::json_excerpt(value).size();
  });
}
