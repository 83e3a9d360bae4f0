// Types and their inference: the text of types, and every composition-time type error
// asserted by message (thrown when the blocks are composed, never at run time), plus the
// weave-time errors on bad user data.
#include "blocks_test_util.h"

namespace weft::testing {
namespace {

TEST(BlocksTypes, TextAndEquality) {
  Type t = Type::tuple({Type::tensor({2, 3}, DType::kInt32), Type::sequence(Type::scalar()),
                        Type::broadcast(Type::input()), Type::void_type()});
  EXPECT_EQ(t.to_string(),
            "Tuple(Tensor([2, 3], int32), Sequence(Tensor([], float32)), Broadcast(Input), Void)");
  EXPECT_EQ(Type::vector(3), Type::tensor({3}));
  EXPECT_NE(Type::vector(3), Type::vector(3, DType::kInt32));
  EXPECT_NE(Type::sequence(Type::scalar()), Type::broadcast(Type::scalar()));
  EXPECT_EQ(t.terminals().size(), 3u);  // user data is terminal (the Broadcast's Input)
  EXPECT_TRUE(Type::tuple({Type::scalar(), Type::tuple({Type::vector(2)})}).is_tensor_nest());
  EXPECT_FALSE(t.is_tensor_nest());
}

TEST(BlocksTypes, InferenceFlowsThroughComposition) {
  Block b = Map(Vector(2)) >> Sum();
  EXPECT_EQ(*b.input_type(), Type::input());
  EXPECT_EQ(*b.output_type(), Type::vector(2));
  Block generic = Sum();
  EXPECT_FALSE(generic.output_type().has_value());  // known once composed
  Block piped = Vector(4) >> Identity();            // Identity is dropped from pipes
  EXPECT_EQ(*piped.output_type(), Type::vector(4));
  Block mapped = Map(InputTransform([](const Input& x) { return x; }));
  EXPECT_EQ(*mapped.output_type(), Type::input());  // a Sequence of Input is Input
  EXPECT_EQ(*(mapped >> Map(Scalar())).output_type(), Type::sequence(Type::scalar()));
}

TEST(BlocksTypes, MapOverATensor) {
  Function f("f", {Type::vector(3)}, [](std::span<const Var> x) { return x[0]; });
  EXPECT_THAT(error_of([&] { Vector(3) >> Map(f); }),
              HasSubstr("[blocks] bad input type Tensor([3], float32) for <Map>, expected "
                        "Sequence or Broadcast or Tuple or Input"));
  // Map(Scalar()) takes Input (its element does), so a Tensor cannot meet it.
  EXPECT_THAT(error_of([] { Vector(3) >> Map(Scalar()); }),
              HasSubstr("[blocks] type mismatch in <Map>: its input type is Input but "
                        "Tensor([3], float32) is expected here"));
}

TEST(BlocksTypes, PipeOfMismatchedTensors) {
  Function f("f", {Type::vector(2)}, [](std::span<const Var> x) { return x[0]; });
  EXPECT_THAT(error_of([&] { Vector(3) >> f; }),
              HasSubstr("type mismatch in <Function 'f'>: its input type is Tensor([2], float32) "
                        "but Tensor([3], float32) is expected here"));
}

TEST(BlocksTypes, FoldWhoseCombineDoesNotReturnTheAccumulator) {
  Function widen("widen", {Type::scalar(), Type::scalar()}, [](std::span<const Var> x) {
    return concat({reshape(x[0], {-1, 1}), reshape(x[1], {-1, 1})});
  });
  EXPECT_THAT(error_of([&] { Fold(widen, Zeros(Type::scalar())); }),
              HasSubstr("<Fold>: the combine <Function 'widen'> returns Tensor([2], float32) but "
                        "the accumulator (start's output) is Tensor([], float32)"));
  EXPECT_THAT(error_of([&] { Map(Scalar()) >> Reduce(widen); }),
              HasSubstr("<Reduce>: the combine <Function 'widen'> returns Tensor([2], float32) "
                        "but the elements are Tensor([], float32)"));
}

TEST(BlocksTypes, OneOfCasesWithDifferentOutputs) {
  EXPECT_THAT(
      error_of([] {
        OneOf([](const Input& x) { return x; }, {{"a", Scalar()}, {"b", Vector(2)}});
      }),
      HasSubstr("<OneOf>: Type mismatch between output types of the cases: Tensor([], float32) and "
                "Tensor([2], float32) (case \"b\", <Tensor 'Tensor([2], float32)'>)"));
  EXPECT_THAT(error_of([] { OneOf([](const Input& x) { return x; }, std::vector<Block>{}); }),
              HasSubstr("<OneOf> needs at least one case"));
}

TEST(BlocksTypes, UnresolvedForwardDeclarationAtCompileTime) {
  ForwardDeclaration fwd(Type::input(), Type::scalar());
  Block model = Map(fwd()) >> Sum();
  EXPECT_THAT(error_of([&] { Compiler c(model); }),
              HasSubstr("<ForwardDeclaration 'Input -> Tensor([], float32)'> was never resolved"));
  ForwardDeclaration typed(Type::input(), Type::vector(2));
  EXPECT_THAT(error_of([&] { typed.resolve_to(Scalar()); }),
              HasSubstr("its output type is Tensor([], float32) but Tensor([2], float32)"));
}

TEST(BlocksTypes, OtherKindsRejected) {
  EXPECT_THAT(error_of([] { Vector(2) >> Length(); }),
              HasSubstr("bad input type Tensor([2], float32) for <Length>, expected Sequence or "
                        "Tuple or Input"));
  Block f = Function("f", {}, [](std::span<const Var> x) { return x[0]; });
  EXPECT_THAT(error_of([&] { Map(Scalar()) >> f; }),
              HasSubstr("bad input type Sequence(Tensor([], float32)) for <Function 'f'>, "
                        "expected a Tensor or a Tuple of Tensors"));
  EXPECT_THAT(error_of([] {
                AllOf({Scalar(), Scalar(DType::kInt32)}) >> Concat();
              }),
              HasSubstr("<Concat>: mixed dtypes in Tuple(Tensor([], float32), Tensor([], int32))"));
  EXPECT_THAT(error_of([] {
                AllOf({Scalar(), AllOf({Scalar()})}) >> Concat();
              }),
              HasSubstr("nested tuples need Concat(dim, /*flatten=*/true)"));
  EXPECT_THAT(error_of([] { Zeros(Type::input()); }),
              HasSubstr("<Zeros> cannot make zeros of type Input"));
  EXPECT_THAT(error_of([] { Scalar() >> Broadcast() >> Reduce(scalar_add()); }),
              HasSubstr("bad input type Broadcast(Tensor([], float32)) for <Reduce>"));
  EXPECT_THAT(error_of([] {
                AllOf({Scalar(), Vector(2)}) >> Map(Identity());
              }),
              HasSubstr("the Tuple's items must all have one type"));
  EXPECT_THAT(error_of([] { Map(Scalar()) >> GetItem("x"); }),
              HasSubstr("<GetItem 'x'>: a Sequence needs an integer key"));
  EXPECT_THAT(error_of([] { AllOf({Scalar()}) >> GetItem(3); }),
              HasSubstr("<GetItem '3'>: index 3 is out of range for 1 items"));
}

TEST(BlocksTypes, FunctionBodyFailingOnTheInputType) {
  Parameter w("w", weft::Tensor::zeros({4, 2}));
  EXPECT_THAT(error_of([&] {
                Function("proj", {Type::vector(3)},
                         [w](std::span<const Var> x) { return matmul(x[0], w); });
              }),
              HasSubstr("inferring the output type of <Function 'proj'> on input "
                        "Tensor([3], float32) failed: [matmul]"));
}

TEST(BlocksTypes, MetricNameWithTwoTypes) {
  Block b = AllOf({Scalar() >> Metric("m"), Vector(2) >> Metric("m")});
  EXPECT_THAT(error_of([&] { Compiler c(b); }),
              HasSubstr("Metric m has incompatible types: it is used with"));
}

TEST(BlocksTypes, RootMustTakeInputAndGiveTensors) {
  EXPECT_THAT(error_of([] { Compiler c(Map(Scalar()) >> Broadcast()); }),
              HasSubstr("the root block's output cannot contain Broadcast"));
  EXPECT_THAT(error_of([] { Compiler c(Scalar() >> Void()); }),
              HasSubstr("has no outputs (Void) and no metrics"));
}

TEST(BlocksTypes, BadUserDataAtWeaveTime) {
  EXPECT_THAT(error_of([] { eval(Scalar(), "abc"); }),
              HasSubstr("<Tensor 'Tensor([], float32)'> expects a number, got \"abc\""));
  EXPECT_THAT(error_of([] {
                eval(Vector(3), {1, 2});
              }),
              HasSubstr("expects an array of 3 items at axis 0 (shape [3]), got [1,2]"));
  EXPECT_THAT(error_of([] { eval(Map(Scalar()), 5); }), HasSubstr("<Map> expects an array, got 5"));
  EXPECT_THAT(error_of([] {
                eval(GetItem("k") >> Scalar(), {{"a", 1}});
              }),
              HasSubstr("<GetItem 'k'>: the input has no key 'k': {\"a\":1}"));
  // The compiler adds the example's index.
  Compiler c{Scalar()};
  std::vector<Input> examples{1, 2, "x"};
  EXPECT_THAT(error_of([&] { c.weave(examples); }), HasSubstr("(in example 2)"));
}

}  // namespace
}  // namespace weft::testing
