// SST trees to and from the JSON-like input values of blocks (see weft/io/sst_json.h).
#include "weft/io/sst_json.h"

#include "weft/core/error.h"
#include "weft/io/input_limits.h"

namespace weft::io {
namespace {

using Json = nlohmann::json;

SstTree from_input(const Json& value, const std::string& where, std::int64_t depth) {
  const std::string at = where.empty() ? "the value" : "'" + where + "'";
  if (depth > input_limits().max_tree_depth)
    fail("sst", at, ": trees nested deeper than ", input_limits().max_tree_depth, " levels ",
         limit_hint("max_tree_depth"));
  if (!value.is_object()) fail("sst", at, ": expected an object but found ", value.type_name());
  const auto label = value.find("label");
  if (label == value.end() || !label->is_number_integer())
    fail("sst", at, ": expected an integer \"label\"");
  SstTree tree;
  const std::int64_t number = label->get<std::int64_t>();
  if (number < kSstMinLabel || number > kSstMaxLabel)
    fail("sst", at, ": expected a label ", kSstMinLabel, "..", kSstMaxLabel, " but found ", number);
  tree.label = int(number);
  const auto word = value.find("word");
  const auto children = value.find("children");
  if ((word == value.end()) == (children == value.end()))
    fail("sst", at, ": expected exactly one of \"word\" and \"children\"");
  if (word != value.end()) {
    if (!word->is_string() || word->get_ref<const std::string&>().empty())
      fail("sst", at, ": expected \"word\" to be a non-empty string");
    tree.word = word->get<std::string>();
    return tree;
  }
  if (!children->is_array() || children->empty())
    fail("sst", at, ": expected \"children\" to be a non-empty array");
  const std::string prefix = where.empty() ? "children[" : where + ".children[";
  for (std::size_t i = 0; i < children->size(); ++i)
    tree.children.push_back(
        from_input((*children)[i], prefix + std::to_string(i) + "]", depth + 1));
  return tree;
}

}  // namespace

nlohmann::json to_input(const SstTree& tree) {
  Json node = {{"label", tree.label}};
  if (tree.is_leaf()) {
    node["word"] = tree.word;
    return node;
  }
  Json children = Json::array();
  for (const SstTree& child : tree.children) children.push_back(to_input(child));
  node["children"] = std::move(children);
  return node;
}

SstTree sst_tree_from_input(const nlohmann::json& value) { return from_input(value, "", 1); }

}  // namespace weft::io
