// Composition: an explicit DAG of blocks joined by wires, run in the order the blocks were
// added. Wire types flow both ways where a wire is read whole (so a child's known input type
// can fix the composition's input), and one way through tuple items.
#include "internal.h"

namespace weft::blocks {
namespace {

class CompositionImpl : public detail::BlockImpl {
 public:
  explicit CompositionImpl(std::string name) : BlockImpl("Composition", std::move(name)) {}

  Composition::Wire add(const Block& block, std::vector<Composition::Wire> reads) {
    for (const auto& w : reads) check_wire(w);
    const detail::BlockImpl& b = block.impl();
    if (reads.empty()) {
      b.in()->set(Type::void_type());
    } else if (reads.size() == 1) {
      unify(wire_slot(reads[0]), b.in());
    } else {
      std::vector<SlotPtr> slots;
      for (const auto& w : reads) slots.push_back(wire_slot(w));
      derive(b.in(), slots, [](std::span<const Type> t) {
        return Type::tuple(std::vector<Type>(t.begin(), t.end()));
      });
    }
    for (const auto& w : reads) used_.at(std::size_t(w.node)) = true;
    nodes_.push_back(Node{block, std::move(reads)});
    used_.push_back(false);
    return Composition::Wire{int(nodes_.size()), -1};
  }

  void set_output(std::vector<Composition::Wire> wires, bool tuple) {
    if (output_set_) fail("blocks", describe(), ": the output is already set");
    for (const auto& w : wires) {
      check_wire(w);
      used_.at(std::size_t(w.node)) = true;
    }
    output_set_ = true;
    output_ = wires;
    output_tuple_ = tuple;
    if (!tuple) {
      unify(out(), wire_slot(wires[0]));
      return;
    }
    std::vector<SlotPtr> slots;
    for (const auto& w : wires) slots.push_back(wire_slot(w));
    derive(out(), slots, [](std::span<const Type> t) {
      return Type::tuple(std::vector<Type>(t.begin(), t.end()));
    });
  }

  std::vector<Block> children() const override {
    std::vector<Block> all;
    for (const Node& n : nodes_) all.push_back(n.block);
    return all;
  }

  void validate() const override {
    if (!output_set_) fail("blocks", describe(), ": Composition block has no output");
    std::string unused;
    for (std::size_t k = 0; k < nodes_.size(); ++k) {
      const SlotPtr& o = nodes_[k].block.impl().out();
      if (!used_[k + 1] && (!o->known() || !o->type().is_void()))
        unused += (unused.empty() ? "" : ", ") + nodes_[k].block.describe();
    }
    if (!unused.empty()) fail("blocks", describe(), ": children have unused outputs: ", unused);
    if (!in()->known()) in()->set(Type::void_type());  // nothing reads the input
    BlockImpl::validate();
  }

  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    WeaveList values(nodes_.size() + 1);
    values[0] = input;
    for (std::size_t k = 0; k < nodes_.size(); ++k) {
      const Node& n = nodes_[k];
      const detail::BlockImpl& block = n.block.impl();
      if (n.reads.size() == 1) {  // the common case: no copy of the argument
        values[k + 1] = block.eval(state, value_of(values, n.reads[0]));
        continue;
      }
      WeaveValue arg;
      if (!n.reads.empty()) {
        arg.kind = Type::Kind::kTuple;
        arg.items.reserve(n.reads.size());
        for (const auto& w : n.reads) arg.items.push_back(value_of(values, w));
        arg = internal::as_type(state, block.in()->type(), std::move(arg));
      }
      values[k + 1] = block.eval(state, arg);
    }
    if (!output_tuple_) return value_of(values, output_[0]);
    WeaveValue result;
    result.kind = Type::Kind::kTuple;
    for (const auto& w : output_) result.items.push_back(value_of(values, w));
    return internal::as_type(state, out()->type(), std::move(result));
  }

 private:
  struct Node {
    Block block;
    std::vector<Composition::Wire> reads;
  };

  void check_wire(const Composition::Wire& w) const {
    if (w.node < 0 || std::size_t(w.node) > nodes_.size())
      fail("blocks", describe(), ": wire ", w.node, " does not exist yet (", nodes_.size(),
           " blocks added); a block can read only the input and earlier blocks");
  }
  const SlotPtr& node_slot(int node) const {
    return node == 0 ? in() : nodes_[std::size_t(node - 1)].block.impl().out();
  }
  SlotPtr wire_slot(const Composition::Wire& w) {
    if (w.item < 0) return node_slot(w.node);
    auto slot = std::make_shared<TypeSlot>(describe(), "wire");
    const int item = w.item;
    derive(slot, {node_slot(w.node)}, [item, d = describe()](std::span<const Type> t) {
      if (!t[0].is_tuple() || item >= int(t[0].items().size()))
        fail("blocks", d, ": wire item ", item, " of a value of type ", t[0].to_string());
      return t[0].items()[std::size_t(item)];
    });
    item_slots_.push_back(slot);
    return slot;
  }
  static const WeaveValue& value_of(const WeaveList& values, const Composition::Wire& w) {
    const WeaveValue& v = values[std::size_t(w.node)];
    return w.item < 0 ? v : v.items[std::size_t(w.item)];
  }

  std::vector<Node> nodes_;
  std::vector<bool> used_{false};  // per wire source: 0 is the input
  std::vector<SlotPtr> item_slots_;
  std::vector<Composition::Wire> output_;
  bool output_set_ = false;
  bool output_tuple_ = false;
};

CompositionImpl& composition(const Block& block) {
  return static_cast<CompositionImpl&>(block.impl());
}

}  // namespace

Composition::Wire Composition::Wire::operator[](int i) const {
  if (item >= 0) fail("blocks", "Composition: nested wire items are not supported");
  return Wire{node, i};
}

Composition::Composition(std::string name)
    : Block(std::make_shared<CompositionImpl>(std::move(name))) {}

Composition::Wire Composition::add(const Block& block, std::vector<Wire> reads) {
  internal::required(block, "Composition", "added");
  return composition(*this).add(block, std::move(reads));
}

void Composition::set_output(Wire wire) { composition(*this).set_output({wire}, false); }

void Composition::set_output(std::vector<Wire> wires) {
  composition(*this).set_output(std::move(wires), true);
}

}  // namespace weft::blocks
