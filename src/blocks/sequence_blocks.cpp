// Blocks over sequences: Map, Fold, RNN, Reduce (Sum, Min, Max), Mean, Broadcast, Zip,
// ZipWith, NGrams, Nth, Gather (Nth over a list of indices in one step) and GatherLists. Reductions
// combine pairwise in a balanced tree, as TF Fold's; Sum in order (SumOrder::kInOrder) of float32
// tensors is one ragged_rows call per sequence (one batched segment sum per depth).
#include <array>
#include "internal.h"

namespace weft::blocks {
namespace {

std::weak_ptr<TypeSlot> weak(const SlotPtr& slot) { return slot; }

// The element type of a finite sequence-like input (Sequence, homogeneous Tuple, Input array).
Type element_type(const std::string& block, const Type& t, bool allow_broadcast) {
  if (allow_broadcast)
    expect_kind(
        block, t,
        {Type::Kind::kSequence, Type::Kind::kBroadcast, Type::Kind::kTuple, Type::Kind::kInput});
  else
    expect_kind(block, t, {Type::Kind::kSequence, Type::Kind::kTuple, Type::Kind::kInput});
  if (t.is_sequence_like()) return t.element();
  if (t.is_input()) return Type::input();
  if (t.items().empty()) fail("blocks", block, ": the Tuple input is empty");
  for (const Type& item : t.items())
    if (item != t.items()[0])
      fail("blocks", "bad input type ", t.to_string(), " for ", block,
           ": the Tuple's items must all have one type");
  return t.items()[0];
}

WeaveValue pair(WeaveValue a, WeaveValue b) {
  WeaveList items;
  items.reserve(2);
  items.push_back(std::move(a));
  items.push_back(std::move(b));
  return WeaveValue::of(Type::Kind::kTuple, std::move(items));
}

class MapImpl : public detail::BlockImpl {
 public:
  explicit MapImpl(Block element)
      : BlockImpl("Map"), element_(internal::required(element, "Map", "element")) {
    out()->set_check([d = describe()](const Type& t) {
      if (!t.is_sequence_like() && !t.is_input())
        fail("blocks", d, ": the output type must be a Sequence or Broadcast (or Input), not ",
             t.to_string());
    });
    in()->observe([d = describe(), e = weak(element_.impl().in())](const Type& t) {
      Type elem = element_type(d, t, true);
      if (auto slot = e.lock()) slot->set(elem);
    });
    derive(out(), {in(), element_.impl().out()}, [](std::span<const Type> t) {
      return t[0].kind() == Type::Kind::kBroadcast ? Type::broadcast(t[1]) : Type::sequence(t[1]);
    });
    // An element taking Input: the mapped value is user data (a sequence of Input is Input).
    element_.impl().in()->observe([i = weak(in())](const Type& t) {
      auto slot = i.lock();
      if (t.is_input() && slot && !slot->known()) slot->set(t);
    });
  }
  std::vector<Block> children() const override { return {element_}; }
  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    const detail::BlockImpl& e = element_.impl();
    if (input.kind == Type::Kind::kBroadcast)
      return WeaveValue::of(Type::Kind::kBroadcast, {e.eval(state, input.items[0])});
    // Map(Identity()) over a sequence or a user-data list is that value: shared, not rebuilt
    // element by element (an Input list would otherwise be copied into a new one).
    if (e.is_identity() && (input.kind == Type::Kind::kSequence
                                ? !out()->type().is_input()
                                : input.kind == Type::Kind::kInput && input.input->is_array()))
      return input;
    WeaveList items = internal::elements_of(describe(), input, state);
    for (WeaveValue& item : items) item = e.eval(state, item);
    // Mapped user data is user data (an Input array), as its type says.
    return internal::as_type(state, out()->type(),
                             WeaveValue::of(Type::Kind::kSequence, std::move(items)));
  }

 private:
  Block element_;
};

class FoldImpl : public detail::BlockImpl {
 public:
  FoldImpl(Block combine, Block start)
      : BlockImpl("Fold"),
        combine_(internal::required(combine, "Fold", "combine")),
        start_(internal::required(start, "Fold", "start")) {
    start_.impl().in()->set(Type::void_type());
    unify(out(), start_.impl().out());
    in()->set_check([d = describe()](const Type& t) { element_type(d, t, false); });
    derive(combine_.impl().in(), {in(), start_.impl().out()},
           [d = describe()](std::span<const Type> t) {
             return Type::tuple({t[1], element_type(d, t[0], false)});
           });
    // The combine must return the accumulator's type.
    auto check = [d = describe(), c = combine_.describe(), co = weak(combine_.impl().out()),
                  so = weak(start_.impl().out())](const Type&) {
      auto cs = co.lock();
      auto ss = so.lock();
      if (cs && ss && cs->known() && ss->known() && cs->type() != ss->type())
        fail("blocks", d, ": the combine ", c, " returns ", cs->type().to_string(),
             " but the accumulator (start's output) is ", ss->type().to_string());
    };
    combine_.impl().out()->observe(check);
    start_.impl().out()->observe(check);
  }
  std::vector<Block> children() const override { return {combine_, start_}; }
  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    WeaveValue acc = start_.impl().eval(state, WeaveValue{});
    for (WeaveValue& x : internal::elements_of(describe(), input, state))
      acc = combine_.impl().eval(state, internal::as_type(state, combine_.impl().in()->type(),
                                                          pair(std::move(acc), std::move(x))));
    return acc;
  }

 private:
  Block combine_, start_;
};

class RNNImpl : public detail::BlockImpl {
 public:
  RNNImpl(Block cell, Block initial, bool from_input)
      : BlockImpl("RNN"),
        cell_(internal::required(cell, "RNN", "cell")),
        initial_(std::move(initial)),
        from_input_(from_input),
        state_(std::make_shared<TypeSlot>(describe(), "state")) {
    const std::string d = describe();
    cell_.impl().out()->observe([d, s = weak(state_)](const Type& t) {
      if (!t.is_tuple() || t.items().size() != 2)
        fail("blocks", d, ": the cell must return Tuple(output, state), got ", t.to_string());
      if (auto slot = s.lock()) slot->set(t.items()[1]);
    });
    if (initial_.defined()) {
      initial_.impl().in()->set(Type::void_type());
      unify(state_, initial_.impl().out());
    }
    // The element type of the sequence part of the input.
    auto sequence_part = [d, from_input](const Type& t) {
      if (!from_input) return t;
      if (!t.is_tuple() || t.items().size() != 2)
        fail("blocks", "bad input type ", t.to_string(), " for ", d,
             ", expected Tuple(Sequence, state) (initial_state_from_input)");
      return t.items()[0];
    };
    in()->observe([d, from_input, s = weak(state_), sequence_part](const Type& t) {
      element_type(d, sequence_part(t), false);
      if (from_input)
        if (auto slot = s.lock()) slot->set(t.items()[1]);
    });
    derive(cell_.impl().in(), {in(), state_}, [d, sequence_part](std::span<const Type> t) {
      return Type::tuple({element_type(d, sequence_part(t[0]), false), t[1]});
    });
    derive(out(), {cell_.impl().out()}, [](std::span<const Type> t) {
      return Type::tuple({Type::sequence(t[0].items()[0]), t[0].items()[1]});
    });
    if (!initial_.defined() && !from_input_)
      state_->observe([d](const Type& t) { internal::check_zeros_type(d, t); });
  }
  std::vector<Block> children() const override {
    if (initial_.defined()) return {cell_, initial_};
    return {cell_};
  }
  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    WeaveValue s;
    const WeaveValue* seq = &input;
    if (from_input_) {
      s = input.items[1];
      seq = &input.items[0];
    } else if (initial_.defined()) {
      s = initial_.impl().eval(state, WeaveValue{});
    } else {
      s = internal::zeros_value(state, this, state_->type());
    }
    WeaveList outputs;
    for (WeaveValue& x : internal::elements_of(describe(), *seq, state)) {
      WeaveValue r = cell_.impl().eval(state, internal::as_type(state, cell_.impl().in()->type(),
                                                                pair(std::move(x), std::move(s))));
      outputs.push_back(r.items[0]);  // copies share the items: O(1)
      s = r.items[1];
    }
    return pair(WeaveValue::of(Type::Kind::kSequence, std::move(outputs)), std::move(s));
  }

 private:
  Block cell_, initial_;
  bool from_input_;
  SlotPtr state_;
};

// Whether a sequence of `element`s is summed by ONE ragged_rows operation (SumRowsImpl).
bool sums_as_rows(const Type& element) {
  return element.is_tensor() && element.dtype() == DType::kFloat32;
}

// Sequence(T) -> T for a float32 tensor T: the elements added in order by one call of a
// ragged_rows loom operation (loom.h), so Sum over sequences of any lengths is one batched
// segment sum per depth. Other element types register no operation (Reduce adds pairwise).
class SumRowsImpl : public detail::BlockImpl {
 public:
  SumRowsImpl() : BlockImpl("SumRows") {}
  std::optional<OperationSpec> operation() const override {
    const Type& element = out()->type();
    if (!sums_as_rows(element)) return std::nullopt;
    OperationSpec spec;
    spec.name = "sum";
    spec.inputs = {element.type_shape()};
    spec.outputs = {element.type_shape()};
    spec.options.ragged_rows = true;
    spec.body = [](std::span<const Var> in) {  // rows, segment ids, counts (loom.h)
      return std::vector<Var>{segment_sum(in[0], in[1].value(), in[2].shape()[0])};
    };
    return spec;
  }
  // `input`: a non-empty Sequence of tensors.
  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    thread_local std::vector<loom::Value> args;
    args.clear();
    for (const WeaveValue& element : internal::shared_elements_of(describe(), input, state))
      args.push_back(element.tensor);
    return WeaveValue::of_tensor(state.weaver().call(state.operation_of(this), args)[0]);
  }
};

class ReduceImpl : public detail::BlockImpl {
 public:
  // rows: a SumRowsImpl block reducing a whole sequence in one call where its element type
  // allows, or an empty handle (pairwise reduction by `combine` always).
  ReduceImpl(Block combine, Block default_value, Block rows = Block())
      : BlockImpl("Reduce"),
        combine_(internal::required(combine, "Reduce", "combine")),
        default_(std::move(default_value)),
        rows_(std::move(rows)) {
    const std::string d = describe();
    in()->observe([d, o = weak(out()), ci = weak(combine_.impl().in())](const Type& t) {
      Type elem = element_type(d, t, false);
      if (auto slot = ci.lock()) slot->set(Type::tuple({elem, elem}));
      if (auto slot = o.lock()) slot->set(elem);
    });
    if (rows_.defined()) {
      unify(in(), rows_.impl().in());
      unify(out(), rows_.impl().out());
    }
    auto check = [d, c = combine_.describe(), co = weak(combine_.impl().out()),
                  o = weak(out())](const Type&) {
      auto cs = co.lock();
      auto slot = o.lock();
      if (cs && slot && cs->known() && slot->known() && slot->type() != cs->type())
        fail("blocks", d, ": the combine ", c, " returns ", cs->type().to_string(),
             " but the elements are ", slot->type().to_string());
    };
    combine_.impl().out()->observe(check);
    out()->observe(check);
    if (default_.defined()) {
      default_.impl().in()->set(Type::void_type());
      unify(out(), default_.impl().out());
    } else {
      out()->observe([d](const Type& t) { internal::check_zeros_type(d, t); });
    }
  }
  std::vector<Block> children() const override {
    std::vector<Block> blocks{combine_};
    if (default_.defined()) blocks.push_back(default_);
    if (rows_.defined()) blocks.push_back(rows_);
    return blocks;
  }
  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    // One call even for one element, so every sequence's sum lies at the same depth (one
    // batched call of the consumers, however the lengths differ).
    if (rows_.defined() && sums_as_rows(out()->type()) && input.kind != Type::Kind::kInput &&
        !input.items.empty())
      return rows_.impl().eval(state, input);
    WeaveList level = internal::elements_of(describe(), input, state);
    if (level.empty()) {
      if (default_.defined()) return default_.impl().eval(state, WeaveValue{});
      return internal::zeros_value(state, this, out()->type());
    }
    const detail::BlockImpl& c = combine_.impl();
    while (level.size() > 1) {
      std::size_t next = 0;
      for (std::size_t i = 0; i + 1 < level.size(); i += 2)
        level[next++] =
            c.eval(state, internal::as_type(state, c.in()->type(),
                                            pair(std::move(level[i]), std::move(level[i + 1]))));
      if (level.size() % 2) level[next++] = std::move(level.back());
      level.resize(next);
    }
    return std::move(level[0]);
  }

 private:
  Block combine_, default_, rows_;
};

class MeanImpl : public detail::BlockImpl {
 public:
  MeanImpl()
      : BlockImpl("Mean"),
        sum_(Sum()),
        scale_(internal::generic_function(
            "mean", [](std::span<const Var> in) { return std::vector<Var>{in[0] * in[1]}; })) {
    unify(in(), sum_.impl().in());
    derive(scale_.impl().in(), {sum_.impl().out()}, [d = describe()](std::span<const Type> t) {
      if (!t[0].is_tensor() || t[0].dtype() != DType::kFloat32)
        fail("blocks", "bad input type Sequence(", t[0].to_string(), ") for ", d,
             ", expected a Sequence of float32 Tensors");
      return Type::tuple({t[0], t[0]});
    });
    unify(out(), scale_.impl().out());
  }
  std::vector<Block> children() const override { return {sum_, scale_}; }
  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    const std::int64_t n = input.kind == Type::Kind::kInput ? std::int64_t(input.input->size())
                                                            : std::int64_t(input.items.size());
    WeaveValue total = sum_.impl().eval(state, input);
    const Type& type = out()->type();
    const loom::Value reciprocal = state.memoized(this, n, [&] {
      thread_local std::vector<float> values;
      values.assign(std::size_t(type.shape().numel()), n == 0 ? 1.0f : 1.0f / float(n));
      return state.weaver().constant(state.type_id(type), std::span<const float>(values));
    });
    return scale_.impl().eval(state, pair(std::move(total), WeaveValue::of_tensor(reciprocal)));
  }

 private:
  Block sum_, scale_;
};

class BroadcastImpl : public detail::BlockImpl {
 public:
  BroadcastImpl() : BlockImpl("Broadcast") {
    derive(out(), {in()}, [](std::span<const Type> t) { return Type::broadcast(t[0]); });
  }
  WeaveValue eval(WeaveState&, const WeaveValue& input) const override {
    return WeaveValue::of(Type::Kind::kBroadcast, {input});
  }
};

class ZipImpl : public detail::BlockImpl {
 public:
  // Weft: an Input item (user data that is a list at weave time, e.g. a list of indices) zips
  // like a Sequence of Input, since Sequence(Input) canonicalizes to Input and could otherwise
  // never meet a Sequence of tensors here.
  ZipImpl() : BlockImpl("Zip") {
    derive(out(), {in()}, [d = describe()](std::span<const Type> t) {
      // A tuple of user-data lists is user data: zipping it gives user data.
      if (t[0].is_input()) return Type::input();
      expect_kind(d, t[0], {Type::Kind::kTuple});
      bool all_broadcast = true;
      std::vector<Type> elements;
      for (const Type& item : t[0].items()) {
        if (item.is_input()) {
          all_broadcast = false;
          elements.push_back(Type::input());
          continue;
        }
        if (!item.is_sequence_like())
          fail("blocks", "bad input type ", t[0].to_string(), " for ", d,
               ", expected a Tuple of Sequences (or Input lists)");
        all_broadcast = all_broadcast && item.kind() == Type::Kind::kBroadcast;
        elements.push_back(item.element());
      }
      Type tuple = Type::tuple(std::move(elements));
      return all_broadcast ? Type::broadcast(tuple) : Type::sequence(tuple);
    });
  }
  WeaveValue eval(WeaveState& state, const WeaveValue& given) const override {
    WeaveValue user_lists;
    if (given.kind == Type::Kind::kInput)
      user_lists =
          WeaveValue::of(Type::Kind::kTuple, internal::elements_of(describe(), given, state));
    const WeaveValue& input = given.kind == Type::Kind::kInput ? user_lists : given;
    // Input lists become their elements; sequences and broadcasts are used as they are.
    std::vector<WeaveItems> lists(input.items.size());
    std::size_t n = SIZE_MAX;
    for (std::size_t k = 0; k < input.items.size(); ++k) {
      const WeaveValue& s = input.items[k];
      lists[k] = internal::shared_elements_of(describe(), s, state);
      if (s.kind != Type::Kind::kBroadcast) n = std::min(n, lists[k].size());
    }
    const bool infinite = n == SIZE_MAX;
    const std::size_t count = infinite ? 1 : n;
    WeaveList rows(count);
    for (std::size_t i = 0; i < count; ++i) {
      WeaveList row;
      row.reserve(input.items.size());  // one allocation per row (moved into it below)
      for (std::size_t k = 0; k < input.items.size(); ++k) {
        const bool broadcast = input.items[k].kind == Type::Kind::kBroadcast;
        row.push_back(lists[k][broadcast ? 0 : i]);
      }
      rows[i] = WeaveValue::of(Type::Kind::kTuple, std::move(row));
    }
    return internal::as_type(
        state, out()->type(),
        WeaveValue::of(infinite ? Type::Kind::kBroadcast : Type::Kind::kSequence, std::move(rows)));
  }
};

class NGramsImpl : public detail::BlockImpl {
 public:
  explicit NGramsImpl(int n) : BlockImpl("NGrams", std::to_string(n)), n_(n) {
    if (n <= 0) fail("blocks", describe(), ": n must be positive, got ", n);
    derive(out(), {in()}, [d = describe(), n](std::span<const Type> t) {
      Type elem = element_type(d, t[0], true);
      Type gram = Type::tuple(std::vector<Type>(std::size_t(n), elem));
      // As the original: the n-grams of a Broadcast are a Broadcast of n-tuples of its element.
      return t[0].kind() == Type::Kind::kBroadcast ? Type::broadcast(gram) : Type::sequence(gram);
    });
  }
  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    if (input.kind == Type::Kind::kBroadcast)
      return WeaveValue::of(
          Type::Kind::kBroadcast,
          {internal::as_type(
              state, out()->type().element(),
              WeaveValue::of(Type::Kind::kTuple, WeaveList(std::size_t(n_), input.items[0])))});
    const WeaveItems items = internal::shared_elements_of(describe(), input, state);
    WeaveList grams;
    for (std::size_t i = 0; i + std::size_t(n_) <= items.size(); ++i)
      grams.push_back(WeaveValue::of(
          Type::Kind::kTuple,
          WeaveList(items.begin() + std::ptrdiff_t(i), items.begin() + std::ptrdiff_t(i) + n_)));
    return internal::as_type(state, out()->type(),
                             WeaveValue::of(Type::Kind::kSequence, std::move(grams)));
  }

 private:
  int n_;
};

// Nth's and Gather's input: Tuple(sequence-like, Input) -> the element type. `refusals` word
// the three ways it can fail (not two items, no sequence first, no user data second);
// `expected` names the tuple the block wants.
Type indexed_element_type(const std::string& block, const Type& t,
                          const std::array<const char*, 3>& refusals, const char* expected) {
  const char* problem = !t.is_tuple() || t.items().size() != 2                         ? refusals[0]
                        : !t.items()[0].is_sequence_like() && !t.items()[0].is_input() ? refusals[1]
                        : !t.items()[1].is_input()                                     ? refusals[2]
                                                                                       : nullptr;
  if (problem)
    fail("blocks", "bad input type ", t.to_string(), " for ", block, ": ", problem, " (expected ",
         expected, ")");
  return element_type(block, t.items()[0], false);
}

class NthImpl : public detail::BlockImpl {
 public:
  NthImpl() : BlockImpl("Nth") {
    derive(out(), {in()}, [d = describe()](std::span<const Type> t) {
      // TF Fold's three refusals, each naming the type.
      return indexed_element_type(
          d, t[0],
          {"Nth block takes 2 inputs", "first input to Nth must be a sequence",
           "second input to Nth must be a PyObject"},
          "Tuple(Sequence, Input index)");
    });
  }
  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    const Input& index = internal::input_of(describe(), input.items[1]);
    if (!index.is_number_integer())
      fail("blocks", describe(), ": the index must be an integer, got ", describe_input(index));
    const WeaveItems items = internal::shared_elements_of(describe(), input.items[0], state);
    const auto i =
        internal::python_index(describe(), index.get<std::int64_t>(), std::int64_t(items.size()));
    return items[std::size_t(i)];
  }
};

// [items[i] for i in indices] as a value of `type`. `list` numbers the index list among several
// (GatherLists) for the errors, which name the block, the list, the position and the index.
WeaveValue gather_one(WeaveState& state, const std::string& block, const WeaveItems& items,
                      const Input& indices, std::optional<std::size_t> list, const Type& type) {
  auto where = [&](std::size_t k) {
    return list ? "list " + std::to_string(*list) + ", position " + std::to_string(k)
                : "position " + std::to_string(k) + " of the list";
  };
  if (!indices.is_array())
    fail("blocks", block, ": ", list ? "list " + std::to_string(*list) : "the indices",
         " must be a list of integers, got ", describe_input(indices));
  WeaveList picked;
  picked.reserve(indices.size());
  const auto n = std::int64_t(items.size());
  for (std::size_t k = 0; k < indices.size(); ++k) {
    const Input& index = indices[k];
    if (!index.is_number_integer())
      fail("blocks", block, ": ", where(k), " must be an integer, got ", describe_input(index));
    const auto i = index.get<std::int64_t>();
    if (i < -n || i >= n) internal::python_index(block + " (" + where(k) + ")", i, n);  // throws
    picked.push_back(items[std::size_t(i < 0 ? i + n : i)]);
  }
  return internal::as_type(state, type, WeaveValue::of(Type::Kind::kSequence, std::move(picked)));
}

// Gather (lists false) and GatherLists (lists true: a list of index lists, one sequence each).
class GatherImpl : public detail::BlockImpl {
 public:
  explicit GatherImpl(bool lists) : BlockImpl(lists ? "GatherLists" : "Gather"), lists_(lists) {
    derive(out(), {in()}, [d = describe(), lists](std::span<const Type> t) {
      const Type element =
          indexed_element_type(d, t[0],
                               {"it takes 2 inputs", "the first input must be a sequence",
                                "the second input must be user data"},
                               lists ? "Tuple(Sequence, Input list of index lists)"
                                     : "Tuple(Sequence, Input list of indices)");
      return lists ? Type::sequence(Type::sequence(element)) : Type::sequence(element);
    });
  }
  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    const Input& indices = internal::input_of(describe(), input.items[1]);
    const WeaveItems items = internal::shared_elements_of(describe(), input.items[0], state);
    const Type& type = out()->type();
    if (!lists_) return gather_one(state, describe(), items, indices, std::nullopt, type);
    if (!indices.is_array())
      fail("blocks", describe(), ": the indices must be a list of lists of integers, got ",
           describe_input(indices));
    const Type& inner = type.is_input() ? type : type.element();
    WeaveList sequences;
    sequences.reserve(indices.size());
    for (std::size_t j = 0; j < indices.size(); ++j)
      sequences.push_back(gather_one(state, describe(), items, indices[j], j, inner));
    return internal::as_type(state, type,
                             WeaveValue::of(Type::Kind::kSequence, std::move(sequences)));
  }

 private:
  bool lists_;
};

FunctionBody elementwise(Var (*fn)(Var, Var)) {
  return [fn](std::span<const Var> in) { return std::vector<Var>{fn(in[0], in[1])}; };
}
Var add_values(Var a, Var b) { return a + b; }
Var min_values(Var a, Var b) { return a - relu(a - b); }
Var max_values(Var a, Var b) { return a + relu(b - a); }

}  // namespace

Map::Map(Block element) : Block(std::make_shared<MapImpl>(std::move(element))) {}
Fold::Fold(Block combine, Block start)
    : Block(std::make_shared<FoldImpl>(std::move(combine), std::move(start))) {}
RNN::RNN(Block cell, Block initial_state, bool initial_state_from_input)
    : Block(std::make_shared<RNNImpl>(std::move(cell), std::move(initial_state),
                                      initial_state_from_input)) {}
Reduce::Reduce(Block combine, Block default_value)
    : Block(std::make_shared<ReduceImpl>(std::move(combine), std::move(default_value))) {}
Sum::Sum(SumOrder order)
    : Reduce(std::make_shared<ReduceImpl>(
          internal::generic_function("add", elementwise(add_values)), Block(),
          order == SumOrder::kInOrder ? Block(std::make_shared<SumRowsImpl>()) : Block())) {}
Min::Min() : Reduce(internal::generic_function("minimum", elementwise(min_values))) {}
Max::Max() : Reduce(internal::generic_function("maximum", elementwise(max_values))) {}
Mean::Mean() : Block(std::make_shared<MeanImpl>()) {}
Broadcast::Broadcast() : Block(std::make_shared<BroadcastImpl>()) {}
Zip::Zip() : Block(std::make_shared<ZipImpl>()) {}
Block ZipWith(const Block& element) { return Zip() >> Map(element); }
NGrams::NGrams(int n) : Block(std::make_shared<NGramsImpl>(n)) {}
Nth::Nth() : Block(std::make_shared<NthImpl>()) {}
Gather::Gather() : Block(std::make_shared<GatherImpl>(false)) {}
GatherLists::GatherLists() : Block(std::make_shared<GatherImpl>(true)) {}

}  // namespace weft::blocks
