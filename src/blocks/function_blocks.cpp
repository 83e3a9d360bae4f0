// The blocks that become loom operations (Function, Concat) and Metric. A Function's output
// type is inferred by running its body once on zeros of batch 1 on a scratch tape.
#include "internal.h"
#include "weft/backend/cuda.h"

namespace weft::blocks {
namespace {

void check_tensor_nest(const std::string& block, const Type& type) {
  if (!type.is_tensor_nest())
    fail("blocks", "bad input type ", type.to_string(), " for ", block,
         ", expected a Tensor or a Tuple of Tensors");
}

// Runs body on zero inputs of batch 1 on a scratch tape.
std::vector<Var> run_on_zeros(const FunctionBody& body, const Type& input, Device device,
                              Tape& tape) {
  TapeScope scope(tape);
  std::vector<Var> args;
  for (const Type& t : input.terminals())
    args.push_back(tape.constant(weft::Tensor::zeros(t.shape().prepend(1), t.dtype(), device)));
  return body(args);
}

// Runs body on zero inputs of batch 1 and reads the output types off the results, in order. The
// body's parameters may live on the GPU (a ParameterStore on Device::kCuda), which the block cannot
// know when it is composed: when the host run fails and a GPU is there, it tries there.
std::vector<Type> infer_output_types(const std::string& block, const FunctionBody& body,
                                     const Type& input) {
  Tape tape;
  tape.set_grad_enabled(false);
  std::vector<Var> results;
  try {
    results = run_on_zeros(body, input, Device::kCpu, tape);
  } catch (const Error& e) {
    std::string error = e.what();
    bool done = false;
    if (cuda_available()) {
      try {
        tape.clear();
        results = run_on_zeros(body, input, Device::kCuda, tape);
        done = true;
      } catch (const Error& cuda_error) {
        error += std::string(" (and with CUDA inputs: ") + cuda_error.what() + ")";
      }
    }
    if (!done)
      fail("blocks", "inferring the output type of ", block, " on input ", input.to_string(),
           " failed: ", error);
  }
  if (results.empty()) fail("blocks", block, ": the body returned no outputs");
  std::vector<Type> outputs;
  for (const Var& v : results) {
    if (!v.defined()) fail("blocks", block, ": the body returned an undefined Var");
    const Shape& s = v.shape();
    if (s.rank() == 0 || s[0] != 1)
      fail("blocks", block,
           ": the body must return batched values [B, ...]; on a batch of 1 it "
           "returned shape ",
           s);
    outputs.push_back(Type::tensor(s.without_rows(), v.value().dtype()));
  }
  return outputs;
}

// The output type of the inferred types: nested by `nesting` when given (its terminals must be
// exactly those types), else one tensor or a flat Tuple.
Type output_type_of(const std::string& block, std::vector<Type> outputs,
                    const OutputNesting& nesting) {
  if (!nesting) return outputs.size() == 1 ? outputs[0] : Type::tuple(std::move(outputs));
  Type nested = nesting(outputs);
  if (nested.terminals() != outputs)
    fail("blocks", block, ": the nested output type ", nested.to_string(),
         " does not hold the body's outputs ", Type::tuple(outputs).to_string(), " in order");
  return nested;
}

class FunctionImpl : public detail::BlockImpl {
 public:
  FunctionImpl(std::string name, std::vector<Type> inputs, FunctionBody body,
               std::optional<Type> output, OutputNesting nesting)
      : BlockImpl("Function", name), name_(std::move(name)), body_(std::move(body)) {
    if (!body_) fail("blocks", describe(), ": the body is not callable (empty)");
    in()->set_check([d = describe()](const Type& t) { check_tensor_nest(d, t); });
    out()->set_check([d = describe()](const Type& t) {
      if (!t.is_tensor_nest())
        fail("blocks", "bad output type ", t.to_string(), " for ", d,
             ", expected a Tensor or a Tuple of Tensors");
    });
    if (output) {
      out()->set(*output);
    } else {
      std::weak_ptr<TypeSlot> weak_out = out();
      const std::string d = describe();
      FunctionBody b = body_;
      in()->observe([weak_out, d, b, nesting = std::move(nesting)](const Type& t) {
        if (auto o = weak_out.lock())
          o->set(output_type_of(d, infer_output_types(d, b, t), nesting));
      });
    }
    if (!inputs.empty()) in()->set(inputs.size() == 1 ? inputs[0] : Type::tuple(std::move(inputs)));
  }

  std::optional<OperationSpec> operation() const override {
    OperationSpec spec;
    spec.name = name_.empty() ? "function" : name_;
    for (const Type& t : in()->type().terminals()) spec.inputs.push_back(t.type_shape());
    for (const Type& t : out()->type().terminals()) spec.outputs.push_back(t.type_shape());
    spec.body = body_;
    return spec;
  }

  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    thread_local std::vector<loom::Value> args;
    args.clear();
    internal::flatten_tensors(input, args);
    auto results = state.weaver().call(state.operation_of(this), args);
    const Type& type = out()->type();
    if (type.is_tensor()) return WeaveValue::of_tensor(results[0]);
    std::size_t next = 0;
    return internal::unflatten_tensors(type, results, next);
  }

 private:
  std::string name_;
  FunctionBody body_;
};

Type concat_output(const std::string& block, const Type& input, int dim, bool flatten) {
  if (!input.is_tuple()) expect_kind(block, input, {Type::Kind::kTuple});
  if (!flatten)
    for (const Type& item : input.items())
      if (!item.is_tensor())
        fail("blocks", "bad input type ", input.to_string(), " for ", block,
             ": nested tuples need Concat(dim, /*flatten=*/true)");
  std::vector<Type> parts = input.terminals();
  if (parts.empty()) fail("blocks", block, ": Concat requires at least one tensor as input");
  const auto as_rank1 = [](const Shape& s) { return s.rank() == 0 ? Shape{1} : s; };
  Shape shape = as_rank1(parts[0].shape());
  if (dim < 0 || dim >= shape.rank())
    fail("blocks", block, ": dimension ", dim, " is out of range for ", parts[0].to_string());
  std::int64_t extent = 0;
  for (const Type& p : parts) {
    if (p.dtype() != parts[0].dtype())
      fail("blocks", block, ": mixed dtypes in ", input.to_string());
    const Shape s = as_rank1(p.shape());
    bool same = s.rank() == shape.rank();
    for (int i = 0; same && i < s.rank(); ++i) same = i == dim || s[i] == shape[i];
    if (!same)
      fail("blocks", block, ": shapes of ", input.to_string(), " differ outside dimension ", dim);
    extent += s[dim];
  }
  shape[dim] = extent;
  return Type::tensor(shape, parts[0].dtype());
}

class ConcatImpl : public detail::BlockImpl {
 public:
  ConcatImpl(int dim, bool flatten) : BlockImpl("Concat"), dim_(dim) {
    std::weak_ptr<TypeSlot> weak_out = out();
    const std::string d = describe();
    in()->observe([weak_out, d, dim, flatten](const Type& t) {
      Type result = concat_output(d, t, dim, flatten);
      if (auto o = weak_out.lock()) o->set(result);
    });
  }

  std::optional<OperationSpec> operation() const override {
    OperationSpec spec;
    spec.name = "concat";
    bool rank1_floats = dim_ == 0;
    for (const Type& t : in()->type().terminals()) {
      spec.inputs.push_back(t.type_shape());
      rank1_floats = rank1_floats && t.shape().rank() == 1 && t.dtype() == DType::kFloat32;
    }
    spec.outputs.push_back(out()->type().type_shape());
    if (rank1_floats) {
      // The executor gathers the arguments straight into the concatenated layout.
      spec.options.concat_inputs = true;
      spec.body = [](std::span<const Var> in) { return std::vector<Var>{in[0]}; };
      return spec;
    }
    const int axis = dim_ + 1;
    spec.body = [axis](std::span<const Var> in) {
      std::vector<Var> parts;
      for (const Var& v : in)
        parts.push_back(v.shape().rank() == 1 ? reshape(v, {v.shape()[0], 1}) : v);
      return std::vector<Var>{concat(parts, axis)};
    };
    return spec;
  }

  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    thread_local std::vector<loom::Value> args;
    args.clear();
    internal::flatten_tensors(input, args);
    return WeaveValue::of_tensor(state.weaver().call(state.operation_of(this), args)[0]);
  }

 private:
  int dim_;
};

class MetricImpl : public detail::BlockImpl {
 public:
  explicit MetricImpl(std::string name) : BlockImpl("Metric", name), name_(std::move(name)) {
    in()->set_check([d = describe()](const Type& t) {
      const bool labelled = t.is_tuple() && t.items().size() == 2 && t.items()[0].is_tensor() &&
                            t.items()[1].is_input();
      if (!t.is_tensor() && !labelled)
        fail("blocks", "bad input type ", t.to_string(), " for ", d,
             ", expected a Tensor or Tuple(Tensor, Input label)");
    });
    out()->set(Type::void_type());
  }
  const std::string* metric_name() const override { return &name_; }
  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    if (input.kind == Type::Kind::kTensor) {
      state.record_metric(this, input.tensor, nullptr);
    } else {
      state.record_metric(this, input.items[0].tensor, input.items[1].input);
    }
    return WeaveValue{};
  }

 private:
  std::string name_;
};

class CollectImpl : public detail::BlockImpl {
 public:
  explicit CollectImpl(std::string name) : BlockImpl("Collect", name), name_(std::move(name)) {
    unify(in(), out());
  }
  const std::string* collect_name() const override { return &name_; }
  WeaveValue eval(WeaveState& state, const WeaveValue& input) const override {
    state.collected(name_).push_back(input);
    return input;
  }

 private:
  std::string name_;
};

class CollectedImpl : public detail::BlockImpl {
 public:
  CollectedImpl(std::string name, const Type& element)
      : BlockImpl("Collected", name), name_(std::move(name)) {
    out()->set(Type::sequence(element));
  }
  const std::string* collect_name() const override { return &name_; }
  void validate() const override {}  // any input (ignored)
  WeaveValue eval(WeaveState& state, const WeaveValue&) const override {
    return WeaveValue::of(Type::Kind::kSequence, state.collected(name_));
  }

 private:
  std::string name_;
};

}  // namespace

Collect::Collect(std::string name) : Block(std::make_shared<CollectImpl>(std::move(name))) {}
Collected::Collected(std::string name, const Type& element)
    : Block(std::make_shared<CollectedImpl>(std::move(name), element)) {}

Function::Function(std::string name, std::vector<Type> inputs, FunctionBody body,
                   std::optional<Type> output, OutputNesting nesting)
    : Block(std::make_shared<FunctionImpl>(std::move(name), std::move(inputs), std::move(body),
                                           std::move(output), std::move(nesting))) {}
Concat::Concat(int dim, bool flatten) : Block(std::make_shared<ConcatImpl>(dim, flatten)) {}
Metric::Metric(std::string name) : Block(std::make_shared<MetricImpl>(std::move(name))) {}

Block internal::generic_function(std::string name, FunctionBody body) {
  return Function(std::move(name), {}, std::move(body));
}

}  // namespace weft::blocks
