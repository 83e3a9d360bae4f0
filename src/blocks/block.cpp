// Type slots and their linking (the composition-time type inference), the Block handle, and
// sequential composition (Pipe, >>).
#include "weft/blocks/block.h"

#include "weft/blocks/blocks.h"
#include "weft/core/error.h"

namespace weft::blocks {

const Type& TypeSlot::type() const {
  if (!type_) fail("blocks", "the ", side_, " type of ", owner_, " is not known yet");
  return *type_;
}

void TypeSlot::set(const Type& type) {
  if (type_) {
    if (*type_ != type)
      fail("blocks", "type mismatch in ", owner_, ": its ", side_, " type is ", type_->to_string(),
           " but ", type.to_string(), " is expected here");
    return;
  }
  if (check_) check_(type);
  type_ = type;
  // Observers may add observers (and set this slot again, a no-op): iterate by index.
  for (std::size_t i = 0; i < observers_.size(); ++i) {
    auto observer = observers_[i];
    observer(*type_);
  }
}

void TypeSlot::observe(std::function<void(const Type&)> observer) {
  observers_.push_back(observer);
  if (type_) observer(*type_);
}

void unify(const SlotPtr& a, const SlotPtr& b) {
  if (a == b) return;
  std::weak_ptr<TypeSlot> weak_a = a, weak_b = b;
  a->observe([weak_b](const Type& t) {
    if (auto slot = weak_b.lock()) slot->set(t);
  });
  b->observe([weak_a](const Type& t) {
    if (auto slot = weak_a.lock()) slot->set(t);
  });
}

void derive(const SlotPtr& target, std::vector<SlotPtr> sources,
            std::function<Type(std::span<const Type>)> fn) {
  std::weak_ptr<TypeSlot> weak_target = target;
  std::vector<std::weak_ptr<TypeSlot>> weak_sources(sources.begin(), sources.end());
  auto attempt = [weak_target, weak_sources, fn](const Type&) {
    std::vector<Type> types;
    for (const auto& w : weak_sources) {
      auto slot = w.lock();
      if (!slot || !slot->known()) return;
      types.push_back(slot->type());
    }
    if (auto t = weak_target.lock()) t->set(fn(types));
  };
  for (const SlotPtr& s : sources) s->observe(attempt);
}

void expect_kind(const std::string& block, const Type& type,
                 std::initializer_list<Type::Kind> kinds) {
  for (Type::Kind k : kinds)
    if (type.kind() == k) return;
  std::string expected;
  for (Type::Kind k : kinds) {
    if (!expected.empty()) expected += " or ";
    switch (k) {
      case Type::Kind::kTensor:
        expected += "Tensor";
        break;
      case Type::Kind::kTuple:
        expected += "Tuple";
        break;
      case Type::Kind::kSequence:
        expected += "Sequence";
        break;
      case Type::Kind::kBroadcast:
        expected += "Broadcast";
        break;
      case Type::Kind::kVoid:
        expected += "Void";
        break;
      case Type::Kind::kInput:
        expected += "Input";
        break;
    }
  }
  fail("blocks", "bad input type ", type.to_string(), " for ", block, ", expected ", expected);
}

std::string describe_input(const Input& value) {
  std::string text = value.dump();
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

namespace detail {

BlockImpl::BlockImpl(std::string kind, std::string name)
    : kind_(std::move(kind)),
      description_(name.empty() ? "<" + kind_ + ">" : "<" + kind_ + " '" + name + "'>"),
      in_(std::make_shared<TypeSlot>(description_, "input")),
      out_(std::make_shared<TypeSlot>(description_, "output")) {}

std::vector<Block> BlockImpl::children() const { return {}; }

void BlockImpl::validate() const {
  if (!in_->known())
    fail("blocks", "the input type of ", description_,
         " could not be inferred; compose it with a typed block or call set_input_type");
  if (!out_->known())
    fail("blocks", "the output type of ", description_,
         " could not be inferred; compose it with a typed block or call set_output_type");
}

}  // namespace detail

std::optional<Type> Block::input_type() const {
  return impl().in()->known() ? std::optional<Type>(impl().in()->type()) : std::nullopt;
}

std::optional<Type> Block::output_type() const {
  return impl().out()->known() ? std::optional<Type>(impl().out()->type()) : std::nullopt;
}

Block& Block::set_input_type(const Type& type) {
  impl().in()->set(type);
  return *this;
}

Block& Block::set_output_type(const Type& type) {
  impl().out()->set(type);
  return *this;
}

detail::BlockImpl& Block::impl() const {
  if (!impl_)
    fail("blocks", "this Block handle is empty (default-constructed, never given a block)");
  return *impl_;
}

namespace {

class PipeImpl : public detail::BlockImpl {
 public:
  explicit PipeImpl(std::vector<Block> blocks) : BlockImpl("Pipe"), blocks_(std::move(blocks)) {
    unify(in(), blocks_.front().impl().in());
    for (std::size_t i = 0; i + 1 < blocks_.size(); ++i)
      unify(blocks_[i].impl().out(), blocks_[i + 1].impl().in());
    unify(out(), blocks_.back().impl().out());
  }
  std::vector<Block> children() const override { return blocks_; }
  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    WeaveValue value = blocks_[0].impl().eval(state, input);
    for (std::size_t i = 1; i < blocks_.size(); ++i) value = blocks_[i].impl().eval(state, value);
    return value;
  }

 private:
  std::vector<Block> blocks_;
};

}  // namespace

Block Pipe(const std::vector<Block>& blocks) {
  std::vector<Block> kept;
  for (std::size_t i = 0; i < blocks.size(); ++i)
    if (!blocks[i].defined())
      fail("blocks", "<Pipe>: block ", i, " of ", blocks.size(),
           " is empty (a default-constructed Block handle)");
  for (const Block& b : blocks)
    if (!b.impl().is_identity()) kept.push_back(b);
  if (kept.empty()) {
    if (!blocks.empty()) return blocks.front();
    return Identity();
  }
  if (kept.size() == 1) return kept[0];
  return Block(std::make_shared<PipeImpl>(std::move(kept)));
}

Block operator>>(const Block& a, const Block& b) { return Pipe({a, b}); }

}  // namespace weft::blocks
