// SST trees in their JSON form (io::sst_tree_from_input after io::parse_json), the second form
// `weft infer sentiment` and the server take.
#include "weft/io/sst_json.h"
#include "fuzz_target.h"
#include "weft/io/json_lines.h"

using namespace weft;

WEFT_FUZZ_TARGET(sst_json) {
  const nlohmann::json value = io::parse_json(input, "fuzz");
  const io::SstTree tree = io::sst_tree_from_input(value);
  (void)io::to_input(tree);
}
