// SST bracketed trees (io::parse_sst_tree), as `weft train sentiment` reads its data and
// `weft infer sentiment` a line. A tree that parses must print back to text that parses to the
// same tree.
#include <cstdio>
#include <cstdlib>

#include "fuzz_target.h"
#include "weft/io/sst.h"

using namespace weft;

WEFT_FUZZ_TARGET(sst_tree) {
  const io::SstTree tree = io::parse_sst_tree(input, "fuzz", 1);
  if (io::parse_sst_tree(io::to_string(tree), "again", 1) != tree) {
    std::fprintf(stderr, "sst_tree: the printed tree does not parse back to itself\n");
    std::abort();
  }
}
