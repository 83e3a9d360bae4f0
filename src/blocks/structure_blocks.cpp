// Blocks that route values without computing: Identity, InputTransform, GetItem, Slice, Void,
// AllOf, Record, OneOf, Optional and ForwardDeclaration (recursion).
#include <map>

#include "internal.h"

namespace weft::blocks {
namespace {

std::weak_ptr<TypeSlot> weak(const SlotPtr& slot) { return slot; }

class IdentityImpl : public detail::BlockImpl {
 public:
  IdentityImpl() : BlockImpl("Identity") { unify(in(), out()); }
  bool is_identity() const override { return true; }
  WeaveValue eval(WeaveState&, const WeaveValue& input) const override { return input; }
};

class InputTransformImpl : public detail::BlockImpl {
 public:
  InputTransformImpl(std::function<Input(const Input&)> fn, std::string name)
      : BlockImpl("InputTransform", std::move(name)), fn_(std::move(fn)) {
    if (!fn_) fail("blocks", describe(), ": the function is not callable (empty)");
    in()->set(Type::input());
    out()->set(Type::input());
  }
  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    return WeaveValue::of_input(state.keep(fn_(internal::input_of(describe(), input))));
  }

 private:
  std::function<Input(const Input&)> fn_;
};

// Looks up `key` (a member name or an integer index) in user data.
const Input& input_item(const std::string& block, const Input& value, const std::string& key,
                        std::optional<std::int64_t> index) {
  if (value.is_object()) {
    auto it = value.find(key);
    if (it == value.end())
      fail("blocks", block, ": the input has no key '", key, "': ", describe_input(value));
    return *it;
  }
  if (value.is_array() && index)
    return value[std::size_t(internal::python_index(block, *index, std::int64_t(value.size())))];
  fail("blocks", block, ": cannot take item '", key, "' of ", describe_input(value), " (",
       value.type_name(), ")");
}

std::optional<std::int64_t> parse_index(const std::string& key) {
  if (key.empty()) return std::nullopt;
  std::size_t used = 0;
  try {
    const long long v = std::stoll(key, &used);
    if (used == key.size()) return std::int64_t(v);
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

class GetItemImpl : public detail::BlockImpl {
 public:
  GetItemImpl(std::string key, std::optional<std::int64_t> index)
      : BlockImpl("GetItem", key), key_(std::move(key)), index_(index) {
    in()->observe([o = weak(out()), d = describe(), index](const Type& t) {
      expect_kind(d, t, {Type::Kind::kInput, Type::Kind::kTuple, Type::Kind::kSequence});
      Type result = t;
      if (t.is_tuple()) {
        if (!index) fail("blocks", d, ": a Tuple ", t.to_string(), " needs an integer key");
        const auto n = std::int64_t(t.items().size());
        result = t.items()[std::size_t(internal::python_index(d, *index, n))];
      } else if (t.kind() == Type::Kind::kSequence) {
        if (!index) fail("blocks", d, ": a Sequence needs an integer key");
        result = t.element();
      }
      if (auto slot = o.lock()) slot->set(result);
    });
  }
  WeaveValue eval(WeaveState&, const WeaveValue& input) const override {
    if (input.kind == Type::Kind::kInput)
      return WeaveValue::of_input(&input_item(describe(), *input.input, key_, index_));
    const auto n = std::int64_t(input.items.size());
    return input.items[std::size_t(internal::python_index(describe(), *index_, n))];
  }

 private:
  std::string key_;
  std::optional<std::int64_t> index_;
};

class SliceImpl : public detail::BlockImpl {
 public:
  SliceImpl(std::optional<std::int64_t> start, std::optional<std::int64_t> stop,
            std::optional<std::int64_t> step)
      : BlockImpl("Slice"), start_(start), stop_(stop), step_(step) {
    if (step && *step == 0) fail("blocks", describe(), ": the step cannot be 0");
    in()->observe([this, o = weak(out())](const Type& t) {
      if (t.kind() == Type::Kind::kBroadcast)
        fail("blocks", "bad input type ", t.to_string(), " for ", describe(),
             ": an infinite sequence (Broadcast) cannot be sliced");
      expect_kind(describe(), t, {Type::Kind::kInput, Type::Kind::kTuple, Type::Kind::kSequence});
      Type result = t;
      if (t.is_tuple()) {
        std::vector<Type> items;
        for (std::int64_t i : positions(std::int64_t(t.items().size())))
          items.push_back(t.items()[std::size_t(i)]);
        result = Type::tuple(std::move(items));
      }
      if (auto slot = o.lock()) slot->set(result);
    });
  }
  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    if (input.kind == Type::Kind::kInput && input.input->is_string()) {  // text slices as text
      const std::vector<std::string> characters =
          internal::utf8_characters(input.input->get_ref<const std::string&>());
      std::string result;
      for (std::int64_t i : positions(std::int64_t(characters.size())))
        result += characters[std::size_t(i)];
      return WeaveValue::of_input(state.keep(Input(std::move(result))));
    }
    if (input.kind == Type::Kind::kInput) {
      const Input& value = *input.input;
      if (!value.is_array())
        fail("blocks", describe(), " expects an array, got ", describe_input(value));
      Input result = Input::array();
      for (std::int64_t i : positions(std::int64_t(value.size())))
        result.push_back(value[std::size_t(i)]);
      return WeaveValue::of_input(state.keep(std::move(result)));
    }
    WeaveList items;
    for (std::int64_t i : positions(std::int64_t(input.items.size())))
      items.push_back(input.items[std::size_t(i)]);
    return WeaveValue::of(input.kind, std::move(items));
  }

 private:
  std::vector<std::int64_t> positions(std::int64_t n) const {
    return internal::slice_positions(start_, stop_, step_, n);
  }
  std::optional<std::int64_t> start_, stop_, step_;
};

class VoidImpl : public detail::BlockImpl {
 public:
  VoidImpl() : BlockImpl("Void") { out()->set(Type::void_type()); }
  void validate() const override {}
  WeaveValue eval(WeaveState&, const WeaveValue&) const override { return WeaveValue{}; }
};

class AllOfImpl : public detail::BlockImpl {
 public:
  explicit AllOfImpl(std::vector<Block> blocks) : BlockImpl("AllOf"), blocks_(std::move(blocks)) {
    for (std::size_t i = 0; i < blocks_.size(); ++i)
      internal::required(blocks_[i], "AllOf", "block " + std::to_string(i));
    if (blocks_.empty()) {
      out()->set(Type::void_type());  // nothing, as TF Fold's AllOf(); Record({}) is Tuple()
      return;
    }
    std::vector<SlotPtr> outs;
    for (const Block& b : blocks_) {
      unify(in(), b.impl().in());
      outs.push_back(b.impl().out());
    }
    derive(out(), outs, [](std::span<const Type> t) {
      return Type::tuple(std::vector<Type>(t.begin(), t.end()));
    });
  }
  void validate() const override {
    if (!blocks_.empty()) BlockImpl::validate();
  }
  std::vector<Block> children() const override { return blocks_; }
  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    if (blocks_.empty()) return WeaveValue{};
    WeaveList items;
    items.reserve(blocks_.size());
    for (const Block& b : blocks_) items.push_back(b.impl().eval(state, input));
    return internal::as_type(state, out()->type(),
                             WeaveValue::of(Type::Kind::kTuple, std::move(items)));
  }

 private:
  std::vector<Block> blocks_;
};

class RecordImpl : public detail::BlockImpl {
 public:
  explicit RecordImpl(std::vector<std::pair<std::string, Block>> fields)
      : BlockImpl("Record"), fields_(std::move(fields)) {
    std::vector<SlotPtr> outs;
    std::vector<std::weak_ptr<TypeSlot>> child_ins;
    if (fields_.empty()) out()->set(Type::tuple({}));  // Record({}): the empty tuple
    for (const auto& [key, block] : fields_) {
      internal::required(block, "Record", "'" + key + "' field");
      indices_.push_back(parse_index(key));
      outs.push_back(block.impl().out());
      child_ins.push_back(block.impl().in());
    }
    in()->observe([this, child_ins](const Type& t) {
      expect_kind(describe(), t, {Type::Kind::kInput, Type::Kind::kTuple});
      for (std::size_t k = 0; k < fields_.size(); ++k) {
        Type item = t;
        if (t.is_tuple()) {
          if (!indices_[k])
            fail("blocks", describe(), ": key '", fields_[k].first,
                 "' cannot index the Tuple input ", t.to_string());
          const auto n = std::int64_t(t.items().size());
          item = t.items()[std::size_t(internal::python_index(describe(), *indices_[k], n))];
        }
        if (auto slot = child_ins[k].lock()) slot->set(item);
      }
    });
    derive(out(), outs, [](std::span<const Type> t) {
      return Type::tuple(std::vector<Type>(t.begin(), t.end()));
    });
  }
  std::vector<Block> children() const override {
    std::vector<Block> out;
    for (const auto& f : fields_) out.push_back(f.second);
    return out;
  }
  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    WeaveList items;
    items.reserve(fields_.size());
    for (std::size_t k = 0; k < fields_.size(); ++k) {
      WeaveValue item;
      if (input.kind == Type::Kind::kInput) {
        item = WeaveValue::of_input(
            &input_item(describe(), *input.input, fields_[k].first, indices_[k]));
      } else {
        item = input.items[std::size_t(
            *indices_[k] < 0 ? *indices_[k] + std::int64_t(input.items.size()) : *indices_[k])];
      }
      items.push_back(fields_[k].second.impl().eval(state, item));
    }
    return internal::as_type(state, out()->type(),
                             WeaveValue::of(Type::Kind::kTuple, std::move(items)));
  }

 private:
  std::vector<std::pair<std::string, Block>> fields_;
  std::vector<std::optional<std::int64_t>> indices_;
};

class OneOfImpl : public detail::BlockImpl {
 public:
  OneOfImpl(KeyFunction key_fn, Block key_block, std::vector<std::pair<Input, Block>> cases,
            Block pre, std::int64_t list_size)
      : BlockImpl("OneOf"),
        key_fn_(std::move(key_fn)),
        key_block_(std::move(key_block)),
        pre_(std::move(pre)),
        list_size_(list_size) {
    if (cases.empty()) fail("blocks", describe(), " needs at least one case");
    if (!key_fn_ && !key_block_.defined())
      fail("blocks", describe(), ": the key function (key_fn) is empty (not callable)");
    for (const auto& [key, block] : cases) internal::required(block, "OneOf", "case " + key.dump());
    if (key_fn_) {
      in()->set_check([d = describe()](const Type& t) { expect_kind(d, t, {Type::Kind::kInput}); });
    } else {
      unify(in(), key_block_.impl().in());
      key_block_.impl().out()->set(Type::input());
    }
    SlotPtr case_input = in();
    if (pre_.defined()) {
      unify(in(), pre_.impl().in());
      case_input = pre_.impl().out();
    }
    for (auto& [key, block] : cases) {
      if (!index_.emplace(key, cases_.size()).second)
        fail("blocks", describe(), ": duplicate case key ", describe_input(key));
      unify(case_input, block.impl().in());
      const SlotPtr& case_out = block.impl().out();
      if (case_out->known() && out()->known() && case_out->type() != out()->type())
        fail("blocks", describe(),
             ": Type mismatch between output types of the cases: ", out()->type().to_string(),
             " and ", case_out->type().to_string(), " (case ", key.dump(), ", ", block.describe(),
             ")");
      unify(out(), case_out);
      cases_.push_back(block);
    }
  }
  std::vector<Block> children() const override {
    std::vector<Block> all = cases_;
    if (key_block_.defined()) all.push_back(key_block_);
    if (pre_.defined()) all.push_back(pre_);
    return all;
  }
  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    Input key = key_fn_ ? key_fn_(internal::input_of(describe(), input))
                        : internal::input_of(describe(), key_block_.impl().eval(state, input));
    if (list_size_ > 0 && key.is_number_integer() && key.get<std::int64_t>() < 0)
      key = key.get<std::int64_t>() + list_size_;
    auto it = index_.find(key);
    if (it == index_.end()) {
      std::string known;
      for (const auto& [k, i] : index_) known += (known.empty() ? "" : ", ") + k.dump();
      fail("blocks", describe(), ": no case for key ", describe_input(key), " (cases: ", known,
           ")");
    }
    const WeaveValue x = pre_.defined() ? pre_.impl().eval(state, input) : input;
    return cases_[it->second].impl().eval(state, x);
  }

 private:
  KeyFunction key_fn_;
  Block key_block_;
  Block pre_;
  std::int64_t list_size_;
  std::vector<Block> cases_;
  std::map<Input, std::size_t> index_;
};

class OptionalImpl : public detail::BlockImpl {
 public:
  OptionalImpl(Block some, Block none)
      : BlockImpl("Optional"),
        some_(internal::required(some, "Optional", "some_case")),
        none_(std::move(none)) {
    in()->set(Type::input());
    unify(in(), some_.impl().in());
    unify(out(), some_.impl().out());
    if (none_.defined()) {
      none_.impl().in()->set(Type::void_type());
      unify(out(), none_.impl().out());
    } else {
      out()->observe([d = describe()](const Type& t) { internal::check_zeros_type(d, t); });
    }
  }
  std::vector<Block> children() const override {
    if (none_.defined()) return {some_, none_};
    return {some_};
  }
  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    if (!internal::input_of(describe(), input).is_null()) return some_.impl().eval(state, input);
    if (none_.defined()) return none_.impl().eval(state, WeaveValue{});
    return internal::zeros_value(state, this, out()->type());
  }

 private:
  Block some_, none_;
};

}  // namespace

// The declaration's input and output type slots are shared by every reference and the target
// (unified with each), so an untyped declaration learns its types from either side.
struct ForwardDeclaration::State {
  SlotPtr input = std::make_shared<TypeSlot>("<ForwardDeclaration>", "input");
  SlotPtr output = std::make_shared<TypeSlot>("<ForwardDeclaration>", "output");
  std::weak_ptr<detail::BlockImpl> target;
  bool resolved = false;
};

namespace {
std::string slot_text(const TypeSlot& slot) {
  return slot.known() ? slot.type().to_string() : std::string("?");
}

class ReferenceImpl : public detail::BlockImpl {
 public:
  explicit ReferenceImpl(std::shared_ptr<ForwardDeclaration::State> state)
      : BlockImpl("ForwardDeclaration",
                  slot_text(*state->input) + " -> " + slot_text(*state->output)),
        state_(std::move(state)) {
    unify(in(), state_->input);
    unify(out(), state_->output);
  }
  std::vector<Block> children() const override {
    if (auto t = state_->target.lock()) return {Block(t)};
    return {};
  }
  void validate() const override {
    if (!state_->resolved)
      fail("blocks", describe(), " was never resolved: call resolve_to(block) before compiling");
    if (state_->target.expired())
      fail("blocks", describe(),
           ": the block it resolves to was destroyed (keep it alive, e.g. "
           "as part of the root block)");
    BlockImpl::validate();
  }
  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    auto target = state_->target.lock();
    if (!target) validate();
    return target->eval(state, input);
  }

 private:
  std::shared_ptr<ForwardDeclaration::State> state_;
};
}  // namespace

ForwardDeclaration::ForwardDeclaration() : state_(std::make_shared<State>()) {}

ForwardDeclaration::ForwardDeclaration(const Type& input, const Type& output)
    : ForwardDeclaration() {
  state_->input->set(input);
  state_->output->set(output);
}

Block ForwardDeclaration::reference() const {
  return Block(std::make_shared<ReferenceImpl>(state_));
}

void ForwardDeclaration::resolve_to(const Block& block) {
  if (state_->resolved) fail("blocks", "ForwardDeclaration is already resolved");
  internal::required(block, "ForwardDeclaration", "resolve_to(block)");
  // Declared types are set on the target first, so that a mismatch names the target.
  if (state_->input->known()) block.impl().in()->set(state_->input->type());
  if (state_->output->known()) block.impl().out()->set(state_->output->type());
  unify(block.impl().in(), state_->input);
  unify(block.impl().out(), state_->output);
  state_->target = block.impl_ptr();
  state_->resolved = true;
}

Identity::Identity() : Block(std::make_shared<IdentityImpl>()) {}
InputTransform::InputTransform(std::function<Input(const Input&)> fn, std::string name)
    : Block(std::make_shared<InputTransformImpl>(std::move(fn), std::move(name))) {}
GetItem::GetItem(std::int64_t index)
    : Block(std::make_shared<GetItemImpl>(std::to_string(index), index)) {}
GetItem::GetItem(std::string key) : Block(std::make_shared<GetItemImpl>(key, parse_index(key))) {}
Slice::Slice(std::optional<std::int64_t> start, std::optional<std::int64_t> stop,
             std::optional<std::int64_t> step)
    : Block(std::make_shared<SliceImpl>(start, stop, step)) {}
Void::Void() : Block(std::make_shared<VoidImpl>()) {}
AllOf::AllOf(std::vector<Block> blocks) : Block(std::make_shared<AllOfImpl>(std::move(blocks))) {}
Record::Record(std::vector<std::pair<std::string, Block>> fields)
    : Block(std::make_shared<RecordImpl>(std::move(fields))) {}
namespace {
std::vector<std::pair<std::string, Block>> numbered(const std::vector<Block>& items) {
  std::vector<std::pair<std::string, Block>> fields;
  for (std::size_t i = 0; i < items.size(); ++i) fields.emplace_back(std::to_string(i), items[i]);
  return fields;
}
std::vector<std::pair<Input, Block>> numbered_cases(const std::vector<Block>& items) {
  std::vector<std::pair<Input, Block>> cases;
  for (std::size_t i = 0; i < items.size(); ++i) cases.emplace_back(Input(i), items[i]);
  return cases;
}
}  // namespace
Record::Record(const std::vector<Block>& items) : Record(numbered(items)) {}
OneOf::OneOf(KeyFunction key_fn, std::vector<std::pair<Input, Block>> cases, Block pre_block)
    : Block(std::make_shared<OneOfImpl>(std::move(key_fn), Block(), std::move(cases),
                                        std::move(pre_block), 0)) {}
OneOf::OneOf(KeyFunction key_fn, const std::vector<Block>& cases, Block pre_block)
    : Block(std::make_shared<OneOfImpl>(std::move(key_fn), Block(), numbered_cases(cases),
                                        std::move(pre_block), std::int64_t(cases.size()))) {}
OneOf::OneOf(Block key_block, std::vector<std::pair<Input, Block>> cases, Block pre_block)
    : Block(std::make_shared<OneOfImpl>(KeyFunction(),
                                        internal::required(key_block, "OneOf", "key_block"),
                                        std::move(cases), std::move(pre_block), 0)) {}
Optional::Optional(Block some_case, Block none_case)
    : Block(std::make_shared<OptionalImpl>(std::move(some_case), std::move(none_case))) {}

}  // namespace weft::blocks
