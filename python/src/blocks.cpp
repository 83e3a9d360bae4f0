// weft.blocks: TensorFlow Fold's block combinators from Python. Types are inferred as blocks are
// composed (`a >> b`, Map, Record, ...) and a mismatch raises weft.TypeError at once. A Function
// body, an InputTransform and a OneOf key may be Python callables: the body runs once per
// batched call (per depth and operation), never per node; transforms and keys run per node at
// weave time and take the GIL (native blocks weave without it, on several threads).
#include <pybind11/operators.h>
#include <memory>
#include <optional>
#include <span>

#include "common.h"
#include "weft/blocks/blocks.h"
#include "weft/blocks/compiler.h"
#include "weft/blocks/layers.h"
#include "weft/core/error.h"
#include "weft/loom/schedule.h"

namespace weft::python {

namespace {
// One value a body returned, or an error naming its owner (`what`) and what came back.
Var body_output(py::handle r, const std::string& what) {
  if (!py::isinstance<Var>(r))
    fail(what.rfind("Function", 0) == 0 ? "blocks" : "flow", what, ": the body returned ",
         py::str(py::type::of(r).attr("__name__")).cast<std::string>(),
         r.is_none() ? " (a missing return?)" : "",
         "; it must return a Var (ops on its arguments) or a tuple or list of Vars");
  return r.cast<Var>();
}
}  // namespace

weft::Tensor label_tensor(const blocks::MetricValues& metric, DType dtype) {
  std::vector<std::int64_t> labels;
  labels.reserve(metric.labels.size());
  for (const blocks::Input& l : metric.labels) {
    if (!l.is_number_integer())
      fail("MetricValues", "label ", blocks::describe_input(l), " is not an integer");
    labels.push_back(l.get<std::int64_t>());
  }
  const Shape shape{std::int64_t(labels.size())};
  if (dtype == DType::kInt64) return weft::Tensor::from_vector(shape, labels);
  return weft::Tensor::from_vector(shape, std::vector<std::int32_t>(labels.begin(), labels.end()));
}

std::function<std::vector<Var>(std::span<const Var>)> python_body(py::function fn,
                                                                  const std::string& what) {
  auto callable = std::make_shared<PyCallable>(std::move(fn));
  return [callable, what](std::span<const Var> in) {
    py::gil_scoped_acquire gil;
    py::tuple args(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) args[i] = py::cast(in[i]);
    py::object result = callable->fn()(*args);
    std::vector<Var> out;
    if (py::isinstance<py::tuple>(result) || py::isinstance<py::list>(result)) {
      for (py::handle r : result) out.push_back(body_output(r, what));
    } else {
      out.push_back(body_output(result, what));
    }
    return out;
  };
}

namespace {

using namespace weft::blocks;

DType parse_dtype(const std::string& name) {
  for (DType d : kAllDTypes)
    if (dtype_name(d) == name) return d;
  fail("blocks", "unknown dtype '", name, "' (float32, float64, int32, int64, bool)");
}

std::vector<std::int64_t> dims_of(const Shape& s) { return {s.dims().begin(), s.dims().end()}; }

// Examples converted once to Input: weave() accepts these or a plain list (converted per call).
// take() selects examples by index without copying them: the selection shares the pool.
struct Inputs {
  std::shared_ptr<const std::vector<Input>> pool;
  std::optional<std::vector<std::size_t>> ids;  // the selection, in order; none: the whole pool

  std::size_t size() const { return ids ? ids->size() : pool->size(); }
  template <typename F>
  auto visit(F&& f) const {  // f(pool) or f(pool, ids)
    return ids ? f(std::span<const Input>(*pool), std::span<const std::size_t>(*ids))
               : f(std::span<const Input>(*pool));
  }
};

Inputs to_inputs(py::handle examples) {
  auto items = std::make_shared<std::vector<Input>>();
  for (py::handle e : examples) items->push_back(to_json(e));
  return Inputs{std::move(items), std::nullopt};
}

Inputs take(const Inputs& in, const std::vector<std::int64_t>& indices) {
  std::vector<std::size_t> ids;
  ids.reserve(indices.size());
  for (std::int64_t k : indices) {
    if (k < 0 || k >= std::int64_t(in.size()))
      fail("Inputs.take", "index ", k, " is out of range for ", in.size(), " examples");
    ids.push_back(in.ids ? (*in.ids)[std::size_t(k)] : std::size_t(k));
  }
  return Inputs{in.pool, std::move(ids)};
}

// `examples` as Inputs: the object itself where it is one, else converted into `converted`.
const Inputs& as_inputs(py::handle examples, Inputs& converted) {
  if (py::isinstance<Inputs>(examples)) return examples.cast<const Inputs&>();
  converted = to_inputs(examples);
  return converted;
}

std::function<Input(const Input&)> python_transform(py::function fn) {
  auto callable = std::make_shared<PyCallable>(std::move(fn));
  return [callable](const Input& in) {
    py::gil_scoped_acquire gil;
    return to_json(callable->fn()(from_json(in)));
  };
}

py::object eval_to_python(const EvalValue& v) {
  switch (v.kind) {
    case Type::Kind::kTensor:
      return py::module_::import("numpy").attr("asarray")(py::cast(v.tensor));
    case Type::Kind::kTuple: {
      py::tuple out(v.items.size());
      for (std::size_t i = 0; i < v.items.size(); ++i) out[i] = eval_to_python(v.items[i]);
      return out;
    }
    case Type::Kind::kSequence:
    case Type::Kind::kBroadcast: {
      py::list out;
      for (const EvalValue& item : v.items) out.append(eval_to_python(item));
      return out;
    }
    case Type::Kind::kInput:
      return from_json(v.input);
    default:
      return py::none();
  }
}

std::vector<Block> blocks_of(py::args args) {
  std::vector<Block> out;
  if (args.size() == 1 && (py::isinstance<py::list>(args[0]) || py::isinstance<py::tuple>(args[0])))
    return args[0].cast<std::vector<Block>>();
  for (py::handle a : args) out.push_back(a.cast<Block>());
  return out;
}

std::vector<std::pair<Input, Block>> cases_of(py::handle cases) {
  std::vector<std::pair<Input, Block>> out;
  if (py::isinstance<py::dict>(cases)) {
    for (auto item : cases.cast<py::dict>())
      out.emplace_back(to_json(item.first), item.second.cast<Block>());
  } else {
    std::int64_t k = 0;
    for (py::handle b : cases) out.emplace_back(Input(k++), b.cast<Block>());
  }
  return out;
}

}  // namespace

void init_blocks(py::module_& parent) {
  py::module_ m = parent.def_submodule("blocks", R"doc(
The block combinators of TensorFlow Fold, natively: compose typed blocks with >>, Map, Record,
OneOf, ForwardDeclaration, ...; compile the root with Compiler; weave and run batches of plain
Python examples (dict, list, str, numbers).)doc");

  py::class_<Type>(m, "Type", "A block type: Tensor, Tuple, Sequence, Broadcast, Void or Input.")
      .def_static(
          "tensor",
          [](std::vector<std::int64_t> shape, const std::string& dtype) {
            return Type::tensor(Shape(std::span<const std::int64_t>(shape)), parse_dtype(dtype));
          },
          py::arg("shape"), py::arg("dtype") = "float32")
      .def_static(
          "scalar", [](const std::string& dtype) { return Type::scalar(parse_dtype(dtype)); },
          py::arg("dtype") = "float32")
      .def_static(
          "vector",
          [](std::int64_t n, const std::string& dtype) {
            return Type::vector(n, parse_dtype(dtype));
          },
          py::arg("size"), py::arg("dtype") = "float32")
      .def_static("tuple",
                  [](py::args items) {
                    return Type::tuple(items.size() == 1 && py::isinstance<py::list>(items[0])
                                           ? items[0].cast<std::vector<Type>>()
                                           : items.cast<std::vector<Type>>());
                  })
      .def_static("sequence", &Type::sequence)
      .def_static("broadcast", &Type::broadcast)
      .def_static("void", &Type::void_type)
      .def_static("input", &Type::input)
      .def_property_readonly("kind",
                             [](const Type& t) {
                               static const char* names[] = {"tensor",    "tuple", "sequence",
                                                             "broadcast", "void",  "input"};
                               return std::string(names[int(t.kind())]);
                             })
      .def_property_readonly("shape",
                             [](const Type& t) { return py::tuple(py::cast(dims_of(t.shape()))); })
      .def_property_readonly("dtype",
                             [](const Type& t) { return std::string(dtype_name(t.dtype())); })
      .def_property_readonly("items", &Type::items)
      .def_property_readonly("element", &Type::element)
      .def("__eq__", [](const Type& a, const Type& b) { return a == b; })
      .def("__hash__", [](const Type& t) { return std::hash<std::string>()(t.to_string()); })
      .def("__repr__", &Type::to_string);

  py::class_<Block>(m, "Block", R"doc(
A typed piece of a model (input type -> output type). `a >> b` composes; a type mismatch raises
weft.TypeError naming both types and the block.)doc")
      .def_property_readonly("input_type", &Block::input_type)
      .def_property_readonly("output_type", &Block::output_type)
      .def("set_input_type",
           [](Block& b, const Type& t) {
             b.set_input_type(t);
             return b;
           })
      .def("set_output_type",
           [](Block& b, const Type& t) {
             b.set_output_type(t);
             return b;
           })
      .def("__rshift__", [](const Block& a, const Block& b) { return a >> b; })
      .def(
          "eval",
          [](const Block& b, py::object value) { return eval_to_python(eval(b, to_json(value))); },
          py::arg("value") = py::none(),
          "Runs the block on one value (no gradients); NumPy results.")
      .def(
          "max_depth",
          [](const Block& b, py::object value) { return max_depth(b, to_json(value)); },
          py::arg("value") = py::none(), "The deepest loom level the block reaches on the value.")
      .def("__repr__", [](const Block& b) {
        return b.defined() ? b.describe() : std::string("<empty Block>");
      });

  // ---- Tensors from data and constants ------------------------------------------------------
  py::class_<AsTensor, Block>(m, "AsTensor", "Input -> Tensor(shape, dtype) (TF Fold's td.Tensor).")
      .def(py::init([](std::vector<std::int64_t> s, const std::string& d) {
             return AsTensor(Shape(std::span<const std::int64_t>(s)), parse_dtype(d));
           }),
           py::arg("shape"), py::arg("dtype") = "float32");
  py::class_<Scalar, AsTensor>(m, "Scalar", "Input -> Tensor([], dtype).")
      .def(py::init([](const std::string& d) { return Scalar(parse_dtype(d)); }),
           py::arg("dtype") = "float32");
  py::class_<Vector, AsTensor>(m, "Vector", "Input -> Tensor([size], dtype).")
      .def(py::init([](std::int64_t n, const std::string& d) { return Vector(n, parse_dtype(d)); }),
           py::arg("size"), py::arg("dtype") = "float32");
  py::class_<FromTensor, Block>(m, "FromTensor",
                                "any -> a Parameter (differentiable) or a constant tensor.")
      .def(py::init([](py::handle v) {
             if (py::isinstance<Parameter>(v)) return FromTensor(v.cast<Parameter>());
             return FromTensor(as_tensor(v));
           }),
           py::arg("value"));
  py::class_<Zeros, Block>(m, "Zeros").def(py::init<const Type&>(), py::arg("type"));
  py::class_<OneHot, Block>(m, "OneHot")
      .def(py::init([](std::int64_t start, std::optional<std::int64_t> stop, const std::string& d) {
             return OneHot(start, stop, parse_dtype(d));
           }),
           py::arg("start"), py::arg("stop") = py::none(), py::arg("dtype") = "float32");
  py::class_<OneHotFromList, Block>(m, "OneHotFromList")
      .def(py::init([](py::list elements, const std::string& d, bool strict) {
             std::vector<Input> e;
             for (py::handle x : elements) e.push_back(to_json(x));
             return OneHotFromList(std::move(e), parse_dtype(d), strict);
           }),
           py::arg("elements"), py::arg("dtype") = "float32", py::arg("strict") = true);
  py::class_<Length, Block>(m, "Length")
      .def(py::init([](const std::string& d) { return Length(parse_dtype(d)); }),
           py::arg("dtype") = "float32");

  // ---- Operations ---------------------------------------------------------------------------
  py::class_<Function, Block>(m, "Function", R"doc(
Function(name, inputs, body, output=None): ONE loom operation batched over every node using it.
`inputs` is a list of Types (one per argument; [] to infer from composition); body(*vars) gets
one [B, ...] Var per input tensor and returns a Var or a tuple of Vars. It runs once per
(depth, operation) on all nodes at once, holding the GIL for that call only.)doc")
      .def(py::init([](std::string name, std::vector<Type> inputs, py::function body,
                       std::optional<Type> output, std::optional<py::function> nesting) {
             OutputNesting nest;
             if (nesting) {  // flat output types -> the nested type (TF Fold's nested results)
               auto callable = std::make_shared<PyCallable>(std::move(*nesting));
               nest = [callable](const std::vector<Type>& flat) {
                 py::gil_scoped_acquire gil;
                 return callable->fn()(flat).cast<Type>();
               };
             }
             FunctionBody native = python_body(std::move(body), "Function '" + name + "'");
             return Function(std::move(name), std::move(inputs), std::move(native),
                             std::move(output), std::move(nest));
           }),
           py::arg("name"), py::arg("inputs"), py::arg("body"), py::arg("output") = py::none(),
           py::arg("nesting") = py::none());
  py::class_<Concat, Block>(m, "Concat")
      .def(py::init<int, bool>(), py::arg("dim") = 0, py::arg("flatten") = false);

  // ---- Plumbing -----------------------------------------------------------------------------
  py::class_<Identity, Block>(m, "Identity").def(py::init<>());
  py::class_<InputTransform, Block>(m, "InputTransform", R"doc(
Input -> Input by a Python function of plain values, run per node at weave time under the GIL
(a few microseconds each; native blocks need no GIL).)doc")
      .def(py::init([](py::function fn, std::string name) {
             return InputTransform(python_transform(std::move(fn)), std::move(name));
           }),
           py::arg("fn"), py::arg("name") = "");
  py::class_<GetItem, Block>(m, "GetItem",
                             "x[key]: an object member, array / tuple / sequence item.")
      .def(py::init<std::int64_t>(), py::arg("key"))
      .def(py::init<std::string>(), py::arg("key"));
  py::class_<Slice, Block>(m, "Slice")
      .def(py::init<std::optional<std::int64_t>, std::optional<std::int64_t>,
                    std::optional<std::int64_t>>(),
           py::arg("start") = py::none(), py::arg("stop") = py::none(),
           py::arg("step") = py::none());
  m.def(
      "Pipe", [](py::args blocks) { return Pipe(blocks_of(blocks)); },
      "Pipe(a, b, c) = a >> b >> c.");
  py::class_<Void, Block>(m, "Void").def(py::init<>());
  py::class_<AllOf, Block>(m, "AllOf", "T -> Tuple(b1(x), ..., bn(x)).")
      .def(py::init([](py::args blocks) { return AllOf(blocks_of(blocks)); }));
  py::class_<Record, Block>(m, "Record", R"doc(
Record({key: block}) / Record([(key, block), ...]) / Record([block, ...]): Tuple of each block on
x[key]. A dict's keys are sorted, as TF Fold did; a list of pairs keeps its order.)doc")
      .def(py::init([](py::handle fields) {
             if (py::isinstance<py::dict>(fields)) {
               std::vector<std::pair<std::string, Block>> f;
               for (auto item : fields.cast<py::dict>())
                 f.emplace_back(py::str(item.first).cast<std::string>(), item.second.cast<Block>());
               std::stable_sort(f.begin(), f.end(),
                                [](const auto& a, const auto& b) { return a.first < b.first; });
               return Record(std::move(f));
             }
             py::list items(py::reinterpret_borrow<py::object>(fields));
             if (items.size() > 0 && py::isinstance<py::tuple>(items[0])) {
               std::vector<std::pair<std::string, Block>> f;
               for (py::handle it : items) {
                 py::tuple t = it.cast<py::tuple>();
                 f.emplace_back(py::str(t[0]).cast<std::string>(), t[1].cast<Block>());
               }
               return Record(std::move(f));
             }
             return Record(items.cast<std::vector<Block>>());
           }),
           py::arg("fields"));
  py::class_<Composition::Wire>(m, "Wire").def("__getitem__", &Composition::Wire::operator[]);
  py::class_<Composition, Block>(m, "Composition",
                                 "An explicit DAG of blocks (wires carry values).")
      .def(py::init<std::string>(), py::arg("name") = "")
      .def("input", &Composition::input)
      .def(
          "add",
          [](Composition& c, const Block& b, py::object reads) {
            if (reads.is_none()) return c.add(b);
            if (py::isinstance<Composition::Wire>(reads))
              return c.add(b, reads.cast<Composition::Wire>());
            return c.add(b, reads.cast<std::vector<Composition::Wire>>());
          },
          py::arg("block"), py::arg("reads") = py::none())
      .def("set_output", [](Composition& c, py::object w) {
        if (py::isinstance<Composition::Wire>(w))
          c.set_output(w.cast<Composition::Wire>());
        else
          c.set_output(w.cast<std::vector<Composition::Wire>>());
      });

  // ---- Sequences ----------------------------------------------------------------------------
  py::class_<Map, Block>(m, "Map", "[f(x_i) for x_i in x].")
      .def(py::init<Block>(), py::arg("element"));
  py::class_<Fold, Block>(m, "Fold", "Left fold: acc = combine((acc, x_i)) from start().")
      .def(py::init<Block, Block>(), py::arg("combine"), py::arg("start"));
  py::class_<RNN, Block>(m, "RNN").def(py::init<Block, Block, bool>(), py::arg("cell"),
                                       py::arg_v("initial_state", Block(), "None"),
                                       py::arg("initial_state_from_input") = false);
  py::class_<Reduce, Block>(m, "Reduce", "Balanced pairwise reduction, depth ceil(log2 n).")
      .def(py::init<Block, Block>(), py::arg("combine"), py::arg_v("default", Block(), "None"));
  py::class_<Sum, Reduce>(m, "Sum").def(
      py::init(
          [](bool in_order) { return Sum(in_order ? SumOrder::kInOrder : SumOrder::kPairwise); }),
      py::arg("in_order") = false);
  py::class_<Min, Reduce>(m, "Min").def(py::init<>());
  py::class_<Max, Reduce>(m, "Max").def(py::init<>());
  py::class_<Mean, Block>(m, "Mean").def(py::init<>());
  py::class_<Broadcast, Block>(m, "Broadcast").def(py::init<>());
  py::class_<Zip, Block>(m, "Zip").def(py::init<>());
  m.def("ZipWith", &ZipWith, py::arg("element"));
  py::class_<NGrams, Block>(m, "NGrams").def(py::init<int>(), py::arg("n"));
  py::class_<Nth, Block>(m, "Nth").def(py::init<>());
  py::class_<Gather, Block>(m, "Gather",
                            "(values, indices) -> [values[i] for i in indices], in one weave step.")
      .def(py::init<>());
  py::class_<GatherLists, Block>(
      m, "GatherLists",
      "(values, lists) -> [[values[i] for i in ids] for ids in lists], in one weave step.")
      .def(py::init<>());
  py::class_<Loop, Block>(m, "Loop", R"doc(
Loop(body, stop, max_steps=100, threshold=0.5, at_bound="fail", emits=False,
collect_stops=False, teacher_forced=False): S -> S, or Tuple(S, [Sequence(Y)], [Sequence(P)]).
Each iteration reads p = stop(state) and ends once p > threshold, else state = body(state)
(emits: (state, y) = body(state)). The model decides the length, so a root holding it runs on
the flow engine, batched across examples at every iteration. at_bound: "fail" (the example
fails, named) or "stop" after max_steps iterations. teacher_forced: input Tuple(S, n), exactly
n iterations (what training on targets needs).)doc")
      .def(py::init([](Block body, Block stop, std::int64_t max_steps, double threshold,
                       const std::string& at_bound, bool emits, bool collect_stops,
                       bool teacher_forced) {
             if (at_bound != "fail" && at_bound != "stop")
               fail("blocks", "Loop: at_bound must be 'fail' or 'stop', not '", at_bound, "'");
             LoopOptions o;
             o.max_steps = max_steps;
             o.threshold = threshold;
             o.at_bound = at_bound == "fail" ? LoopBound::kFail : LoopBound::kStop;
             o.emits = emits;
             o.collect_stops = collect_stops;
             o.teacher_forced = teacher_forced;
             return Loop(std::move(body), std::move(stop), o);
           }),
           py::arg("body"), py::arg("stop"), py::arg("max_steps") = 100, py::arg("threshold") = 0.5,
           py::arg("at_bound") = "fail", py::arg("emits") = false, py::arg("collect_stops") = false,
           py::arg("teacher_forced") = false);

  // ---- Choice and recursion -----------------------------------------------------------------
  py::class_<OneOf, Block>(m, "OneOf", R"doc(
OneOf(key_fn, cases, pre_block=None): cases[key_fn(x)](pre(x)). key_fn is a Python function of
the plain value (run per node under the GIL) or a Block giving the key; cases a dict {key: block}
or a list of blocks (keys 0..n-1).)doc")
      .def(py::init([](py::object key, py::handle cases, std::optional<Block> pre) {
             Block p = pre ? *pre : Block();
             if (py::isinstance<Block>(key)) return OneOf(key.cast<Block>(), cases_of(cases), p);
             return OneOf(KeyFunction(python_transform(key.cast<py::function>())), cases_of(cases),
                          p);
           }),
           py::arg("key_fn"), py::arg("cases"), py::arg("pre_block") = py::none());
  py::class_<blocks::Optional, Block>(m, "Optional")
      .def(py::init<Block, Block>(), py::arg("some_case"), py::arg_v("none_case", Block(), "None"));
  py::class_<ForwardDeclaration>(m, "ForwardDeclaration", R"doc(
Recursion: decl = ForwardDeclaration(Type.input(), state); use decl() inside the model; then
decl.resolve_to(model). The declaration keeps the model alive (and each decl() the
declaration), so decl.resolve_to(td.OneOf(...)) needs no other name for the model; a Compiler
keeps every block it reached alive.)doc")
      .def(py::init<const Type&, const Type&>(), py::arg("input_type"), py::arg("output_type"))
      .def(py::init<>())
      .def("reference", &ForwardDeclaration::reference, py::keep_alive<0, 1>())
      .def("__call__", &ForwardDeclaration::reference, py::keep_alive<0, 1>())
      .def("resolve_to", &ForwardDeclaration::resolve_to, py::keep_alive<1, 2>());

  // ---- Metrics ------------------------------------------------------------------------------
  py::class_<Metric, Block>(m, "Metric",
                            "Tensor or (Tensor, label) -> Void: one metric row per evaluation.")
      .def(py::init<std::string>(), py::arg("name"));
  py::class_<Collect, Block>(m, "Collect").def(py::init<std::string>(), py::arg("name"));
  py::class_<Collected, Block>(m, "Collected")
      .def(py::init<std::string, const Type&>(), py::arg("name"), py::arg("element"));

  // ---- Layer blocks -------------------------------------------------------------------------
  py::class_<FCBlock, Function>(m, "FCBlock", "Tensor([in]) -> Tensor([out]) by an nn.FC.")
      .def(py::init<const nn::FC&>(), py::arg("layer"));
  py::class_<EmbeddingBlock, Function>(m, "EmbeddingBlock", "Tensor([], int32) -> Tensor([dim]).")
      .def(py::init<const nn::Embedding&>(), py::arg("layer"));
  py::class_<LSTMBlock, Function>(m, "LSTMBlock")
      .def(py::init<const nn::LSTMCell&>(), py::arg("cell"));
  py::class_<GRUBlock, Function>(m, "GRUBlock")
      .def(py::init<const nn::GRUCell&>(), py::arg("cell"));
  py::class_<TreeLSTMBlock, Function>(m, "TreeLSTMBlock")
      .def(py::init<const nn::NaryTreeLSTMCell&>(), py::arg("cell"));
  py::class_<ChildSumForgetBlock, Function>(m, "ChildSumForgetBlock")
      .def(py::init<const nn::ChildSumTreeLSTMCell&>());
  py::class_<ChildSumNodeBlock, Function>(m, "ChildSumNodeBlock")
      .def(py::init<const nn::ChildSumTreeLSTMCell&>());

  // ---- Compiling and running ----------------------------------------------------------------
  py::class_<Inputs>(m, "Inputs",
                     "Examples converted once from plain Python values (reuse across epochs).")
      .def(py::init([](py::iterable examples) { return to_inputs(examples); }))
      .def("__len__", &Inputs::size)
      .def("take", &take, py::arg("indices"),
           "The examples at these indices (a batch of an epoch's order), without converting "
           "them from Python again or copying them: the result shares this object's examples.");
  py::class_<WovenBatch>(m, "WovenBatch", "A woven batch: every example's loom calls.")
      .def("__len__", &WovenBatch::size)
      .def_property_readonly("depth", &WovenBatch::depth)
      .def_property_readonly("num_calls",
                             [](const WovenBatch& b) { return b.weaver().num_calls(); });
  py::class_<MetricValues>(m, "MetricValues")
      .def_property_readonly("values", [](const MetricValues& v) { return v.values; })
      .def_property_readonly("examples", [](const MetricValues& v) { return v.examples; })
      .def_property_readonly("labels",
                             [](const MetricValues& v) {
                               py::list out;
                               for (const Input& l : v.labels) out.append(from_json(l));
                               return out;
                             })
      .def(
          "label_tensor", [](const MetricValues& v) { return label_tensor(v, DType::kInt32); },
          "The integer labels as an int32 tensor [rows] (for softmax_cross_entropy).")
      .def("__len__", &MetricValues::rows);
  py::class_<BatchResult>(m, "BatchResult",
                          "Outputs (Vars, in input order) and metric rows of a batch.")
      .def_property_readonly("num_outputs", &BatchResult::num_outputs)
      .def("output", &BatchResult::output, py::arg("k") = 0)
      .def("output_examples", &BatchResult::output_examples, py::arg("k") = 0)
      .def("metric", &BatchResult::metric, py::arg("name"), py::keep_alive<0, 1>())
      .def_property_readonly("metric_names", &BatchResult::metric_names);
  py::class_<Compiler>(m, "Compiler", R"doc(
Compiler(root, threads=0, max_depth=0, strategy="by_depth", examples_per_thread=256): checks
every block's types and makes ONE loom operation per Function. weave(examples) then run(batch,
tape), or forward(examples, tape). The GIL is released while weaving and running; Python
callables inside take it back for their own calls.)doc")
      .def(py::init([](Block root, int threads, int max_depth_, const std::string& strategy,
                       std::size_t per_thread) {
             CompilerOptions o;
             o.threads = threads;
             o.max_depth = max_depth_;
             o.strategy = loom::parse_strategy(strategy);
             o.examples_per_thread = per_thread;
             return std::make_unique<Compiler>(std::move(root), o);
           }),
           py::arg("root"), py::arg("threads") = 0, py::arg("max_depth") = 0,
           py::arg("strategy") = "by_depth", py::arg("examples_per_thread") = 256)
      .def_property_readonly("root", &Compiler::root)
      .def_property_readonly("output_types", &Compiler::output_types)
      .def_property_readonly("metric_names", &Compiler::metric_names)
      .def_property_readonly("needs_flow", &Compiler::needs_flow)
      .def_property_readonly("num_operations",
                             [](const Compiler& c) { return c.loom().num_operations(); })
      .def(
          "weave",
          [](const Compiler& c, py::handle examples) {
            Inputs converted;
            const Inputs& in = as_inputs(examples, converted);  // Inputs: not copied
            py::gil_scoped_release nogil;
            return in.visit([&](auto... pool_ids) { return c.weave(pool_ids...); });
          },
          py::arg("examples"), py::keep_alive<0, 1>())
      .def(
          "run",
          [](const Compiler& c, const WovenBatch& batch, Tape& tape) {
            py::gil_scoped_release nogil;
            return c.run(batch, tape);
          },
          py::arg("batch"), py::arg("tape"), py::keep_alive<0, 1>(), py::keep_alive<0, 2>(),
          py::keep_alive<0, 3>())
      .def(
          "forward",
          [](const Compiler& c, py::handle examples, Tape& tape) {
            Inputs converted;
            const Inputs& in = as_inputs(examples, converted);
            py::gil_scoped_release nogil;
            return in.visit([&](auto... pool_ids) { return c.forward(pool_ids..., tape); });
          },
          py::arg("examples"), py::arg("tape"), py::keep_alive<0, 1>(), py::keep_alive<0, 3>());
  m.def(
      "eval",
      [](const Block& b, py::object value) { return eval_to_python(eval(b, to_json(value))); },
      py::arg("block"), py::arg("value") = py::none());
  m.def(
      "max_depth", [](const Block& b, py::object value) { return max_depth(b, to_json(value)); },
      py::arg("block"), py::arg("value") = py::none());
}

}  // namespace weft::python
