// The block library (TensorFlow Fold's blocks, natively): every block's type and meaning. This
// file is the API reference. "in -> out" is the block's type; "depth" is the loom depth it adds
// (constants 0, each Function call +1). Types are inferred as blocks are composed and a mismatch
// throws weft::Error at once; bad user data at weave time throws weft::Error naming the block
// and the offending value. Deliberate differences from the original are marked "Weft:".
//
// Depth (Weft:): Metric blocks and the root's outputs add NO loom depth (the original passes
// both through a tagging op, +1), because the executor gathers any value. max_depth(), the
// batch's depth(), CompilerOptions::max_depth and the schedule's levels all count the same
// levels: those of Function-like calls only. Blocks that take other blocks as arguments throw
// at construction when one is an empty handle, naming the block and the argument.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "weft/blocks/block.h"
#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft::blocks {

// ---- Tensors from data and constants (depth 0) ---------------------------------------------

// Input -> Tensor(shape, dtype): a number or nested arrays of exactly shape's elements, as a
// loom constant, in any dtype, read exactly: int32 / int64 take integers in their range, bool
// takes true / false (or 0 / 1), float64 keeps every digit. Scalar int32s are memoized per
// (block, value) within one weave. (TF Fold's
// td.Tensor; renamed so it does not hide weft::Tensor.)
class AsTensor : public Block {
 public:
  explicit AsTensor(const Shape& shape, DType dtype = DType::kFloat32);
};
// Input -> Tensor([], dtype).
class Scalar : public AsTensor {
 public:
  explicit Scalar(DType dtype = DType::kFloat32) : AsTensor(Shape{}, dtype) {}
};
// Input -> Tensor([size], dtype).
class Vector : public AsTensor {
 public:
  explicit Vector(std::int64_t size, DType dtype = DType::kFloat32)
      : AsTensor(Shape{size}, dtype) {}
};
// any -> Tensor(shape of the value) (the input is ignored; Void where nothing feeds it, so it
// sits beside input-reading blocks in AllOf and Record): a Parameter is differentiable
// (Weaver::parameter, one row shared by every use); a plain Tensor is a constant. Depth 0.
class FromTensor : public Block {
 public:
  explicit FromTensor(const Parameter& parameter);
  explicit FromTensor(const weft::Tensor& value);
};
// any (ignored) -> T: zero tensors, empty sequences, tuples of these, or nothing for Void. Input
// and Broadcast types throw. Depth 0.
class Zeros : public Block {
 public:
  explicit Zeros(const Type& type);
};
// Input -> Tensor([n], dtype): the one-hot row of an integer in [start, stop) (or [0, start)
// when stop is not given); out of range throws at weave time. Memoized per value. Depth 0.
class OneHot : public Block {
 public:
  explicit OneHot(std::int64_t start, std::optional<std::int64_t> stop = std::nullopt,
                  DType dtype = DType::kFloat32);
};
// Input -> Tensor([elements.size()], dtype): the one-hot row of the element equal to the input.
// An unknown element throws when strict, else gives zeros. Duplicates throw at construction.
class OneHotFromList : public Block {
 public:
  explicit OneHotFromList(std::vector<Input> elements, DType dtype = DType::kFloat32,
                          bool strict = true);
};
// Sequence / Tuple / Input (array or object) -> Tensor([], dtype): the length, a constant.
// Default dtype float32, as the original.
class Length : public Block {
 public:
  explicit Length(DType dtype = DType::kFloat32);
};

// ---- Operations ----------------------------------------------------------------------------

// The batched body of a Function: one [B, ...] Var per input tensor (a tuple input gives its
// tensors in order), one Var per output tensor.
using FunctionBody = std::function<std::vector<Var>(std::span<const Var>)>;

// Tensor nest -> tensor nest: ONE loom operation per Function instance, batched over every node
// that uses it (depth +1). `inputs` are the argument types (one: that type; several: a Tuple of
// them; empty: inferred from composition, for generic bodies like `a + b`). The output type is
// inferred by running the body once on zeros of batch 1 on a scratch tape (no gradients), unless
// `output` is given; several outputs make a Tuple. The body may use Parameters; it must treat
// rows independently (it sees all nodes of a depth at once).
// Nests the inferred output types of a body that returns its outputs flat (one Var per tensor):
// gets their types in order and returns the output type, e.g. Tuple(h, Tuple(c, h)) for a cell
// returning (h, (c, h)) as [h, c, h]. Its terminals must be those types, in that order.
using OutputNesting = std::function<Type(const std::vector<Type>&)>;

class Function : public Block {
 public:
  Function(std::string name, std::vector<Type> inputs, FunctionBody body,
           std::optional<Type> output = std::nullopt, OutputNesting nesting = {});
  // A body returning one Var.
  template <typename F>
  requires std::is_same_v<std::invoke_result_t<F, std::span<const Var>>, Var> Function(
      std::string name, std::vector<Type> inputs, F body, std::optional<Type> output = std::nullopt)
      : Function(std::move(name), std::move(inputs), wrap(std::move(body)), std::move(output)) {}

 private:
  template <typename F>
  static FunctionBody wrap(F body) {
    return [body = std::move(body)](std::span<const Var> in) { return std::vector<Var>{body(in)}; };
  }
};
// Tuple of tensors -> Tensor: concatenation along `dim` of the per-example shape (the batch
// axis excluded). Scalars count as [1]; other extents must match; mixed dtypes throw; nested
// tuples need flatten. One loom operation (+1); rank-1 float inputs are gathered straight into
// the concatenated layout.
class Concat : public Block {
 public:
  explicit Concat(int dim = 0, bool flatten = false);
};

// ---- Plumbing ------------------------------------------------------------------------------

// T -> T.  Dropped from pipes.
class Identity : public Block {
 public:
  Identity();
};
// Input -> Input: applies a C++ function to the user's data (parse, split, convert).
class InputTransform : public Block {
 public:
  explicit InputTransform(std::function<Input(const Input&)> fn, std::string name = "");
};
// x[key]. Input: object member or array element (negative counts from the end); Tuple: the
// item (integer key); Sequence: the element. Broadcast throws. Missing keys throw at weave time.
class GetItem : public Block {
 public:
  explicit GetItem(std::int64_t index);
  explicit GetItem(std::string key);
};
// x[start:stop:step] with Python's meaning (negative indices, step may be negative, not 0) on
// Input arrays, Tuples (-> the sliced Tuple type) and Sequences.
class Slice : public Block {
 public:
  explicit Slice(std::optional<std::int64_t> start = std::nullopt,
                 std::optional<std::int64_t> stop = std::nullopt,
                 std::optional<std::int64_t> step = std::nullopt);
};
// Sequential composition: Pipe({a, b, c}) = a >> b >> c. Identity blocks are dropped; an
// empty pipe is Identity.
Block Pipe(const std::vector<Block>& blocks);
// T -> Void.
class Void : public Block {
 public:
  Void();
};
// T -> Tuple(b1(x), ..., bn(x)); AllOf({}) -> Void (nothing, as TF Fold's AllOf(); only Record({})
// is the empty tuple);
// one block gives a 1-tuple. A tuple of Input items is Input (the value is one user array).
class AllOf : public Block {
 public:
  explicit AllOf(std::vector<Block> blocks);
};
// Input (object or array) or Tuple -> Tuple(b_k(x[k]) for each (k, b_k)), in the given order
// (the original sorted dict keys; pass the pairs sorted for that). Keys index arrays and tuples
// when they are integers ("0", "1", ...). Record({}) -> Tuple(); fields all giving Input give
// Input (the value is one user array of the fields' values, in the given order).
class Record : public Block {
 public:
  explicit Record(std::vector<std::pair<std::string, Block>> fields);
  // Keys 0..n-1 (for Tuple or array input).
  explicit Record(const std::vector<Block>& items);
};
// An explicit DAG of blocks. Wires carry values: input() is the composition's input, add()
// runs a block on the wires it reads (one wire: its value; several: a Tuple of them; none: Void)
// and returns its output wire; wire[i] is item i of a tuple. Blocks run in the order added (a
// block can read only earlier wires, so there are no cycles). Unused non-Void outputs and a
// missing output throw at compile time.
class Composition : public Block {
 public:
  struct Wire {
    int node = 0;   // 0: the composition's input; k: the k-th added block
    int item = -1;  // -1: the whole value
    Wire operator[](int i) const;
  };
  explicit Composition(std::string name = "");
  Wire input() const { return Wire{0, -1}; }
  Wire add(const Block& block, std::vector<Wire> reads);
  Wire add(const Block& block, Wire read) { return add(block, std::vector<Wire>{read}); }
  // A block that reads nothing (Void input).
  Wire add(const Block& block) { return add(block, std::vector<Wire>{}); }
  void set_output(Wire wire);
  // The output is a Tuple of these wires.
  void set_output(std::vector<Wire> wires);
};

// ---- Sequences -----------------------------------------------------------------------------

// Sequence(T) / Broadcast(T) / Tuple(T, ..., T) / Input array -> Sequence(U) [Broadcast(U)]:
// [f(x_i) for x_i in x]. On a Broadcast the element is evaluated once. An element giving Input
// makes the whole Input (a user array), as Sequence(Input) is Input. The output type can only
// be a Sequence, Broadcast or Input (anything else throws when set).
class Map : public Block {
 public:
  explicit Map(Block element);
};
// Sequence(T) -> A: acc = start(); for x_i: acc = combine((acc, x_i)). start: Void -> A,
// combine: Tuple(A, T) -> A. Depth: one combine per element (n on n elements).
class Fold : public Block {
 public:
  Fold(Block combine, Block start);
};
// Sequence(X) -> Tuple(Sequence(Y), S) with cell: Tuple(X, S) -> Tuple(Y, S). The initial state
// is initial_state() (Void -> S; default Zeros(S)), or with initial_state_from_input the input
// is Tuple(Sequence(X), S). An empty sequence gives ([], initial state).
class RNN : public Block {
 public:
  explicit RNN(Block cell, Block initial_state = Block(), bool initial_state_from_input = false);
};
// Sequence(T) / Tuple / Input -> T: balanced pairwise reduction, (x0,x1),(x2,x3),...; an odd
// last element is carried to the next round; depth ceil(log2 n). Empty input gives default()
// (Void -> T; default Zeros(T)). combine: Tuple(T, T) -> T.
class Reduce : public Block {
 public:
  explicit Reduce(Block combine, Block default_value = Block());

 protected:
  explicit Reduce(std::shared_ptr<detail::BlockImpl> impl) : Block(std::move(impl)) {}
};
// How Sum adds a sequence's elements. kPairwise: TF Fold's balanced pairing (depth
// ceil(log2 n), one batched add per round). kInOrder: float32 tensors added one after another
// by ONE batched call per depth however long the sequences (a loom ragged_rows operation: depth
// 1 for any non-empty sequence, so sums over neighbour lists of any sizes batch together, as
// message passing wants); other element types still pair. The order is the CPU's: the CUDA
// backend's segment sum adds with atomics, in no fixed order, so its last bits can vary.
enum class SumOrder { kPairwise, kInOrder };
// Reduce with elementwise +, min, max over a Sequence of tensors. Zeros on empty input.
class Sum : public Reduce {
 public:
  explicit Sum(SumOrder order = SumOrder::kPairwise);
};
class Min : public Reduce {
 public:
  Min();
};
class Max : public Reduce {
 public:
  Max();
};
// Sequence(Tensor) -> Tensor: Sum(x) * safe_reciprocal(Length(x)) (1/0 taken as 1), so zeros on
// empty input. Depth: Sum's + 1.
class Mean : public Block {
 public:
  Mean();
};
// T -> Broadcast(T): the value repeated without end (for Zip with sequences, Map).
class Broadcast : public Block {
 public:
  Broadcast();
};
// Tuple(Sequence/Broadcast ...) -> Sequence(Tuple(...)): truncated to the shortest finite
// sequence; all-Broadcast stays Broadcast.
class Zip : public Block {
 public:
  Zip();
};
// Zip() >> Map(element).
Block ZipWith(const Block& element);
// Sequence(T) -> Sequence(Tuple(T x n)): [x[i:i+n] for i in 0..len-n]. n <= 0 throws.
// Broadcast(T) -> Broadcast(Tuple(T x n)), as the original.
class NGrams : public Block {
 public:
  explicit NGrams(int n);
};
// Tuple(Sequence(T), Input) -> T: x[0][x[1]] (negative counts from the end; out of range throws).
class Nth : public Block {
 public:
  Nth();
};
// Tuple(Sequence(T), Input) -> Sequence(T): [x[0][i] for i in x[1]], the indices a user-data
// list of integers (negative counts from the end; repeats allowed; an empty list gives an empty
// sequence). A non-list, a non-integer or an index out of range throws at weave time naming the
// block, the position in the list and the index. Weft: TF Fold spells it Zip() >> Map(Nth())
// over (Broadcast(x[0]), x[1]), which builds a tuple and an Nth step per index; Gather takes the
// whole list in one step (each neighbour list of a graph, say). Depth 0.
class Gather : public Block {
 public:
  Gather();
};
// Tuple(Sequence(T), Input) -> Sequence(Sequence(T)): Gather for each list of a list of index
// lists, [[x[0][i] for i in ids] for ids in x[1]]: every node's neighbours of a graph in one weave
// step (Weft: TF Fold would Zip a Broadcast of x[0] with the lists and Map a gather over the
// rows). A node with no neighbours gets an empty sequence. Errors as Gather's, naming the list
// too ("list 3, position 1"). Depth 0.
class GatherLists : public Block {
 public:
  GatherLists();
};

// ---- Loops whose length the model decides --------------------------------------------------

// What a Loop does when its body has run max_steps times and the stop value still says go on.
enum class LoopBound {
  kFail,  // the example fails: "Loop ... did not stop within its bound of N steps", naming it
  kStop,  // the loop ends there, as if the stop value had said stop
};
struct LoopOptions {
  std::int64_t max_steps = 100;  // the most times the body runs (>= 0)
  double threshold = 0.5;        // the loop ends when the stop value is > threshold
  LoopBound at_bound = LoopBound::kFail;
  bool emits = false;          // the body gives Tuple(state, output); outputs are collected
  bool collect_stops = false;  // the output adds Sequence(stop values), one per check made
  // The data decides the length (training a decoder on its targets): the input is
  // Tuple(S, Input n) and the body runs exactly n times (0 <= n <= max_steps); the stop block
  // runs only when collect_stops, for a loss on it. Such a loop reads nothing: it weaves.
  bool teacher_forced = false;
};
// S -> S, or Tuple(S, [Sequence(Y)], [Sequence(P)]) when emits / collect_stops:
//   for t = 0, 1, ...: p = stop(s); if p > threshold: end; if t == max_steps: at_bound;
//                      s = body(s)   (emits: (s, y) = body(s), y appended)
// body: S -> S (emits: S -> Tuple(S, Y)); stop: S -> Tensor of one float element (a
// probability, or any score against the threshold). The stop value is READ, so the number of
// iterations depends on computed values: a root holding such a loop runs on the flow engine
// (Compiler::needs_flow), batched across examples at every iteration; gradients flow through
// every iteration (the decision itself is not differentiable). Depth: one body per iteration.
class Loop : public Block {
 public:
  Loop(Block body, Block stop, LoopOptions options = {});
};

// ---- Choice --------------------------------------------------------------------------------

// The key of an input for OneOf: a C++ function of the (pre-processed) input.
using KeyFunction = std::function<Input(const Input&)>;
// T -> U: key = key_fn(x); then cases[key](pre(x)) (pre: optional pre_block). Keys are Input
// values (strings, numbers); integer-keyed cases given as a list accept negative keys. Every
// case must have the same output type (checked as types become known); a missing key throws
// at weave time naming the key and the known keys.
class OneOf : public Block {
 public:
  OneOf(KeyFunction key_fn, std::vector<std::pair<Input, Block>> cases, Block pre_block = Block());
  OneOf(KeyFunction key_fn, const std::vector<Block>& cases, Block pre_block = Block());
  // The key computed by a block of the input with Input output.
  OneOf(Block key_block, std::vector<std::pair<Input, Block>> cases, Block pre_block = Block());
};
// Input -> T: none_case() if x is null (Void -> T; default Zeros(T)), else some_case(x).
class Optional : public Block {
 public:
  explicit Optional(Block some_case, Block none_case = Block());
};

// ---- Recursion -----------------------------------------------------------------------------

// Recursion (tree models): declare the types, use reference() inside the model (any number of
// times), then resolve_to(model). References hold the model weakly (a strong hold would be an
// ownership cycle, model -> reference -> model, and leak): someone must own it — the root, or
// the Compiler, which keeps every block it reached alive for its whole life. Compiling when the
// model was already destroyed throws ("the block it resolves to was destroyed"), never dangles.
// An unresolved declaration throws at compile time.
class ForwardDeclaration {
 public:
  ForwardDeclaration(const Type& input, const Type& output);
  // Untyped (TF Fold's ForwardDeclaration()): the types come from where the references are
  // used and from the block it resolves to; unknown ones at compile time throw.
  ForwardDeclaration();
  Block reference() const;
  Block operator()() const { return reference(); }
  void resolve_to(const Block& block);
  struct State;  // shared with the references (structure_blocks.cpp)

 private:
  std::shared_ptr<State> state_;
};

// ---- Metrics and collected values ----------------------------------------------------------

// Tensor, or Tuple(Tensor, Input label) -> Void: appends one row per evaluation to the metric
// `name` (variable-length across the batch; Compiler results give the rows, the example of each
// row and the labels). Two Metric blocks with one name must have one value type (compile time).
// Weft: no pass-through loom op (depth +0, in max_depth and the schedule alike), because the
// executor gathers any value.
class Metric : public Block {
 public:
  explicit Metric(std::string name);
};

// Weft: per-node values of a recursive model for later blocks and for the caller (the original
// let them out only through metrics). Collect(name): T -> T passes its input through and appends
// it to the example's list `name`; Collected(name, T): Void -> Sequence(T) gives that list as it
// stands (its input is ignored; run it after the model, e.g. later in an AllOf or Composition). A
// root output holding Collected(...) gives the caller one row per node
// (BatchResult::output_examples tells whose).
class Collect : public Block {
 public:
  explicit Collect(std::string name);
};
class Collected : public Block {  // any (ignored) -> Sequence(T)
 public:
  Collected(std::string name, const Type& element);
};

}  // namespace weft::blocks
WEFT_API_END
