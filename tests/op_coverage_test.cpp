// Every op in ops.def must have at least one WEFT_OP_TEST case: an op added without its
// reference and gradient test fails here, by name.
#include <algorithm>

#include "op_test_util.h"

namespace weft::testing {
namespace {

TEST(OpCoverage, EveryOpInTheListHasATestCase) {
  const auto& covered = registered_op_cases();
  ASSERT_FALSE(op_names().empty());
  for (std::string_view op : op_names())
    EXPECT_NE(std::find(covered.begin(), covered.end(), std::string(op)), covered.end())
        << "op '" << op << "' from ops.def has no WEFT_OP_TEST case";
}

TEST(OpCoverage, EveryTestCaseNamesAListedOp) {
  for (const std::string& op : registered_op_cases())
    EXPECT_NE(std::find(op_names().begin(), op_names().end(), op), op_names().end())
        << "WEFT_OP_TEST names '" << op << "', which is not in ops.def";
}

}  // namespace
}  // namespace weft::testing
