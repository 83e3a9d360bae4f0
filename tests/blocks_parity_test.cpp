// Issue 18: the places where the blocks' semantics differed from TensorFlow Fold's documented
// ones (empty tuples, user data through Map and tuples, canonical types, composition-time
// errors, loom tags, ForwardDeclaration lifetimes, depth of metrics and outputs).
#include <thread>

#include "blocks_test_util.h"

namespace weft::testing {
namespace {

// ---- The empty record / empty AllOf --------------------------------------------------------

// TF Fold: Record([]) gives (), AllOf() gives None (Void), whatever the input.
TEST(BlocksParity, EmptyRecordIsTheEmptyTupleAndEmptyAllOfIsVoid) {
  EXPECT_EQ(*Record(std::vector<std::pair<std::string, Block>>{}).output_type(), Type::tuple({}));
  EXPECT_EQ(*AllOf({}).output_type(), Type::void_type());
  EXPECT_EQ(*(Scalar() >> AllOf({})).output_type(), Type::void_type());
  EXPECT_EQ(Type::tuple({}).to_string(), "Tuple()");
  EvalValue v = eval(Record(std::vector<std::pair<std::string, Block>>{}), Input::object());
  EXPECT_EQ(v.kind, Type::Kind::kTuple);
  EXPECT_EQ(v.size(), 0u);
  EvalValue w = eval(Scalar() >> AllOf({}), 3);
  EXPECT_EQ(w.kind, Type::Kind::kVoid);
}

TEST(BlocksParity, EmptyRecordIntoConcatIsRejectedWhenComposed) {
  const std::string message =
      error_of([] { Block b = Record(std::vector<std::pair<std::string, Block>>{}) >> Concat(); });
  EXPECT_THAT(message, HasSubstr("Concat requires at least one tensor as input"));
}

TEST(BlocksParity, RootWithNoOutputsReachesItsError) {
  const std::string message =
      error_of([] { Compiler c(Record(std::vector<std::pair<std::string, Block>>{})); });
  EXPECT_THAT(message, HasSubstr("has no outputs (Tuple()) and no metrics"));
  EXPECT_THAT(error_of([] { Compiler c(AllOf({})); }), HasSubstr("has no outputs"));
}

// ---- Map over user data ------------------------------------------------------------------

TEST(BlocksParity, MapOverUserDataGivesUserData) {
  Block doubled = Map(InputTransform([](const Input& x) { return Input(x.get<int>() * 2); }));
  EXPECT_EQ(*doubled.output_type(), Type::input());
  // The user-data blocks that follow see a user value.
  EvalValue v = eval(doubled >> Vector(3), Input::array({1, 2, 3}));
  EXPECT_THAT(floats(v), ElementsAre(2, 4, 6));
  EvalValue item = eval(Map(Identity()) >> GetItem(-1) >> Scalar(), Input::array({5, 6, 7}));
  EXPECT_THAT(floats(item), ElementsAre(7));
  EvalValue raw = eval(doubled, Input::array({1, 2}));
  EXPECT_EQ(raw.kind, Type::Kind::kInput);
  EXPECT_EQ(raw.input, Input::array({2, 4}));
  // ... and an empty list stays user data.
  EXPECT_EQ(eval(doubled, Input::array()).input, Input::array());
}

// ---- Canonical types ----------------------------------------------------------------------

TEST(BlocksParity, TupleOfUserDataIsUserData) {
  EXPECT_EQ(Type::tuple({Type::input(), Type::input()}), Type::input());
  EXPECT_EQ(Type::tuple({Type::tuple({Type::input()}), Type::sequence(Type::input())}),
            Type::input());
  EXPECT_TRUE(Type::tuple({Type::input(), Type::scalar()}).is_tuple());
  EXPECT_TRUE(Type::tuple({}).is_tuple());
  // Values agree with the type: an AllOf / Record of user data is one user value.
  Block pair = AllOf({Identity(), InputTransform([](const Input& x) { return x.size(); })});
  EXPECT_EQ(*(Block(InputTransform([](const Input& x) { return x; })) >> pair).output_type(),
            Type::input());
  EvalValue v =
      eval(InputTransform([](const Input& x) { return x; }) >> pair >> GetItem(1) >> Scalar(),
           Input::array({1, 2, 3}));
  EXPECT_THAT(floats(v), ElementsAre(3));
  EvalValue r =
      eval(Record({{"b", Identity()}, {"a", Identity()}}) >> Vector(2), Input{{"a", 1}, {"b", 2}});
  EXPECT_THAT(floats(r), ElementsAre(2, 1));
  // Zipping user-data lists is user data.
  EvalValue z =
      eval(Record({{"x", Identity()}, {"y", Identity()}}) >> Zip() >> GetItem(1) >> Vector(2),
           Input{{"x", {1, 2}}, {"y", {3, 4}}});
  EXPECT_THAT(floats(z), ElementsAre(2, 4));
}

TEST(BlocksParity, TerminalsListUserData) {
  const Type t = Type::tuple({Type::scalar(), Type::input(), Type::sequence(Type::vector(2))});
  EXPECT_THAT(t.terminals(), ElementsAre(Type::scalar(), Type::input(), Type::vector(2)));
  EXPECT_THAT(Type::input().terminals(), ElementsAre(Type::input()));
  EXPECT_TRUE(Type::void_type().terminals().empty());
}

// ---- Errors at composition time -----------------------------------------------------------

TEST(BlocksParity, MapOutputTypeVoidIsRejectedAtOnce) {
  const std::string message = error_of([] { Map(Identity()).set_output_type(Type::void_type()); });
  EXPECT_THAT(message, HasSubstr("<Map>: the output type must be a Sequence or Broadcast"));
  EXPECT_THAT(message, HasSubstr("not Void"));
}

TEST(BlocksParity, NGramsOfABroadcastIsABroadcastOfTuples) {
  Block b = Scalar() >> Broadcast() >> NGrams(2);
  EXPECT_EQ(*b.output_type(), Type::broadcast(Type::tuple({Type::scalar(), Type::scalar()})));
  // Zipped with a finite sequence: each element meets the broadcast pair.
  Block seq = Record({{"xs", Map(Scalar())}, {"y", Scalar() >> Broadcast() >> NGrams(2)}}) >>
              Zip() >>
              Map(Function("f", {Type::scalar(), Type::tuple({Type::scalar(), Type::scalar()})},
                           [](std::span<const Var> x) { return x[0] * 100.0f + x[1] + x[2]; }));
  EvalValue v = eval(seq, Input{{"xs", {1, 2}}, {"y", 3}});
  ASSERT_EQ(v.size(), 2u);
  EXPECT_THAT(floats(v[0]), ElementsAre(106));
  EXPECT_THAT(floats(v[1]), ElementsAre(206));
}

TEST(BlocksParity, UnusableArgumentsNameTheBlockAndTheArgument) {
  const std::string key = error_of([] { OneOf(KeyFunction(), {Scalar(), Scalar()}); });
  EXPECT_THAT(key, HasSubstr("<OneOf>: the key function (key_fn) is empty"));
  const std::string element = error_of([] { Map m{Block()}; });
  EXPECT_THAT(element, HasSubstr("<Map>: the element block is empty"));
  EXPECT_THAT(error_of([] { Fold(Block(), Zeros(Type::scalar())); }),
              HasSubstr("<Fold>: the combine block is empty"));
  EXPECT_THAT(error_of([] {
                Record({{"a", Block()}});
              }),
              HasSubstr("<Record>: the 'a' field block is empty"));
  EXPECT_THAT(error_of([] {
                OneOf([](const Input&) { return 0; }, {Scalar(), Block()});
              }),
              HasSubstr("<OneOf>: the case 1 block is empty"));
  EXPECT_THAT(error_of([] { Block b = Scalar() >> Block(); }),
              HasSubstr("<Pipe>: block 1 of 2 is empty"));
  for (const std::string& m : {key, element})
    EXPECT_THAT(m, ::testing::Not(HasSubstr("use of an empty Block handle")));
}

// ---- Loom tags ------------------------------------------------------------------------------

TEST(BlocksParity, OneTagNamesOneTypeShape) {
  loom::Loom loom;
  loom.add_type({DType::kFloat32, Shape{4}, "hidden"});
  EXPECT_EQ(loom.add_type({DType::kFloat32, Shape{4}, "hidden"}), 0u);
  loom.add_type({DType::kFloat32, Shape{4}, ""});
  const std::string message = error_of([&] {
    loom.add_type({DType::kFloat32, Shape{3}, "hidden"});
  });
  EXPECT_THAT(message, HasSubstr("tag 'hidden'"));
  EXPECT_THAT(message, HasSubstr("float32 [4] 'hidden'"));
  EXPECT_THAT(message, HasSubstr("float32 [3] 'hidden'"));
}

// ---- Lifetimes ----------------------------------------------------------------------------

// A recursive sum over nested lists: leaves are numbers, nodes are lists of two subtrees.
Block tree_sum(ForwardDeclaration& decl) {
  Block leaf = Scalar();
  Block node = Record({decl.reference(), decl.reference()}) >> scalar_add();
  return OneOf([](const Input& x) { return Input(x.is_array()); }, {{false, leaf}, {true, node}});
}

TEST(BlocksParity, ForwardDeclarationToADestroyedBlockIsAnError) {
  ForwardDeclaration decl(Type::input(), Type::scalar());
  decl.resolve_to(tree_sum(decl));  // nobody keeps the model
  const std::string message = error_of([&] { Compiler c(decl.reference()); });
  EXPECT_THAT(message, HasSubstr("the block it resolves to was destroyed"));
}

TEST(BlocksParity, ACompiledModelKeepsItsRecursiveBlocksAlive) {
  std::unique_ptr<Compiler> compiler;
  {
    ForwardDeclaration decl(Type::input(), Type::scalar());
    Block model = tree_sum(decl);
    decl.resolve_to(model);
    compiler = std::make_unique<Compiler>(decl.reference());
  }  // the model's only owner is now the compiler
  Tape tape;
  std::vector<Input> examples{Input::parse("[[1, 2], 3]"), Input(4)};
  BatchResult r = compiler->forward(examples, tape);
  EXPECT_THAT(r.output().value().to_float_vector(), ElementsAre(6, 4));
}

// ---- Depth of metrics and outputs ---------------------------------------------------------

TEST(BlocksParity, MetricsAndOutputsAddNoDepthAnywhere) {
  Block neg = Function("neg", {Type::scalar()}, [](std::span<const Var> x) { return -x[0]; });
  Block model = Scalar() >> neg >> AllOf({Identity(), Metric("m")}) >> GetItem(0);
  EXPECT_EQ(max_depth(model, 2), 1);  // one Function call; the Metric and the output add none
  Compiler exact(model, {.max_depth = 1});
  std::vector<Input> examples{1, 2};
  WovenBatch batch = exact.weave(examples);
  EXPECT_EQ(batch.depth(), 1);
  Tape tape;
  BatchResult r = exact.run(batch, tape);
  EXPECT_THAT(r.output().value().to_float_vector(), ElementsAre(-1, -2));
  EXPECT_THAT(r.metric("m").values.value().to_float_vector(), ElementsAre(-1, -2));
  EXPECT_EQ(r.stats().levels, 1u);  // the schedule: one level, no pass-through level
  EXPECT_EQ(r.stats().batched_calls, 1);
}

// ---- Type utilities -----------------------------------------------------------------------

TEST(BlocksParity, TypeSizeCountsElementsOrIsUnsized) {
  EXPECT_EQ(Type::tensor(Shape{2, 3}).size(), 6);
  EXPECT_EQ(Type::scalar().size(), 1);
  EXPECT_EQ(Type::tuple({Type::vector(4), Type::tuple({Type::scalar(), Type::vector(2)})}).size(),
            7);
  EXPECT_EQ(Type::tuple({}).size(), 0);
  EXPECT_EQ(Type::void_type().size(), 0);
  EXPECT_EQ(Type::sequence(Type::scalar()).size(), std::nullopt);
  EXPECT_EQ(Type::tuple({Type::scalar(), Type::sequence(Type::scalar())}).size(), std::nullopt);
  EXPECT_EQ(Type::input().size(), std::nullopt);
}

TEST(BlocksParity, FlattenAndUnflattenByType) {
  const Type t = Type::tuple({Type::vector(2), Type::sequence(Type::scalar()), Type::input()});
  Block b = Record({{"v", Vector(2)}, {"s", Map(Scalar())}, {"u", Identity()}});
  const Input example{{"v", {1, 2}}, {"s", {3, 4, 5}}, {"u", "hi"}};
  EvalValue v = eval(b, example);
  std::vector<EvalValue> flat = flatten(t, v);
  ASSERT_EQ(flat.size(), 5u);
  EXPECT_THAT(floats(flat[0]), ElementsAre(1, 2));
  EXPECT_THAT(floats(flat[3]), ElementsAre(5));
  EXPECT_EQ(flat[4].input, Input("hi"));
  EvalValue back = unflatten(t, flat, &v);
  ASSERT_EQ(back.size(), 3u);
  EXPECT_THAT(floats(back[0]), ElementsAre(1, 2));
  ASSERT_EQ(back[1].size(), 3u);
  EXPECT_THAT(floats(back[1][2]), ElementsAre(5));
  EXPECT_EQ(back[2].input, Input("hi"));
  // Fixed-size types need no shape; misuse names the problem.
  const Type fixed = Type::tuple({Type::vector(2), Type::scalar()});
  EvalValue f = unflatten(fixed, std::span<const EvalValue>(flat).subspan(0, 2));
  EXPECT_THAT(floats(f[1]), ElementsAre(3));
  EXPECT_THAT(error_of([&] { unflatten(t, flat); }), HasSubstr("pass a value shaped like"));
  EXPECT_THAT(error_of([&] { unflatten(fixed, flat); }), HasSubstr("left over"));
  EXPECT_THAT(error_of([&] { unflatten(fixed, std::span<const EvalValue>(flat).subspan(0, 1)); }),
              HasSubstr("too few terminals"));
  EXPECT_THAT(error_of([&] { flatten(Type::vector(3), flat[0]); }), HasSubstr("is not a"));
}

// ---- Merging separately woven batches -----------------------------------------------------

TEST(BlocksParity, ShardsWovenOnTheirOwnThreadsMergeIntoOneBatch) {
  Block square =
      Function("sq", {Type::scalar()}, [](std::span<const Var> x) { return x[0] * x[0]; });
  Block model = Map(Scalar()) >> AllOf({Sum(), Map(square >> Metric("squares"))}) >> GetItem(0);
  Compiler compiler(model, {.threads = 1});
  std::vector<Input> examples;
  for (int i = 0; i < 9; ++i) {
    Input list = Input::array();
    for (int j = 0; j <= i % 4; ++j) list.push_back(i + j);
    examples.push_back(list);
  }
  const std::vector<std::span<const Input>> shards{std::span<const Input>(examples).subspan(0, 4),
                                                   std::span<const Input>(examples).subspan(4, 0),
                                                   std::span<const Input>(examples).subspan(4)};
  std::vector<WovenBatch> woven(shards.size());
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < shards.size(); ++k)
    threads.emplace_back([&, k] { woven[k] = compiler.weave(shards[k]); });
  for (auto& t : threads) t.join();
  WovenBatch merged = compiler.merge(std::move(woven));
  WovenBatch all = compiler.weave(examples);
  EXPECT_EQ(merged.size(), 9u);
  Tape tape;
  BatchResult a = compiler.run(merged, tape);
  BatchResult b = compiler.run(all, tape);
  EXPECT_EQ(a.output().value().to_float_vector(), b.output().value().to_float_vector());
  EXPECT_EQ(a.output_examples(), b.output_examples());
  EXPECT_EQ(a.metric("squares").values.value().to_float_vector(),
            b.metric("squares").values.value().to_float_vector());
  EXPECT_EQ(a.metric("squares").examples, b.metric("squares").examples);
  EXPECT_EQ(a.metric("squares").examples.back(), 8);

  Compiler other(model);
  std::vector<WovenBatch> foreign;
  foreign.push_back(other.weave(examples));
  EXPECT_THAT(error_of([&] { compiler.merge(std::move(foreign)); }),
              HasSubstr("merge: batch 0 of 1 was not woven by this compiler"));
  EXPECT_THAT(error_of([&] { compiler.merge({}); }), HasSubstr("at least one"));
}

// ---- Issue 34: what TensorFlow Fold's own tests found ------------------------------------

// Python iterates text by character: Map, Slice and Length do too (code points, not bytes).
TEST(BlocksParity, TextIsTheSequenceOfItsCharacters) {
  Block codes = Map(InputTransform([](const Input& c) {
                      return Input(int(static_cast<unsigned char>(c.get<std::string>()[0])));
                    }) >>
                    Scalar());
  const EvalValue v = eval(codes, "abc");
  ASSERT_EQ(v.size(), 3u);
  EXPECT_THAT(floats(v[0]), ElementsAre(97));
  EXPECT_THAT(floats(v[2]), ElementsAre(99));
  EXPECT_EQ(eval(Slice(std::nullopt, std::nullopt, -1), "h\u00e9llo").input, "oll\u00e9h");
  EXPECT_EQ(eval(Slice(1, 3), "abcd").input, "bc");
  EXPECT_THAT(floats(eval(Length(), "h\u00e9llo")), ElementsAre(5));
  EXPECT_THAT(floats(eval(Map(Scalar()) >> Sum(), Input::array({1, 2}))), ElementsAre(3));
}

// NumPy reads "3" into an int32; a treebank's labels arrive as text.
TEST(BlocksParity, NumbersWrittenAsTextAreRead) {
  EXPECT_THAT(eval(Scalar(DType::kInt32), "3").tensor.to_double_vector(), ElementsAre(3));
  EXPECT_THAT(floats(eval(Vector(2), Input::array({"0.5", 2}))), ElementsAre(0.5f, 2));
  EXPECT_THAT(error_of([] { eval(Scalar(), "three"); }), HasSubstr("expects a number, got"));
  EXPECT_THAT(error_of([] { eval(Scalar(DType::kInt32), "2.5"); }),
              HasSubstr("expects an integer, got 2.5"));
}

TEST(BlocksParity, UntypedForwardDeclarationLearnsItsTypes) {
  ForwardDeclaration decl;
  Block sum = Record({{"l", decl()}, {"r", decl()}}) >> scalar_add();
  Block expr = OneOf([](const Input& x) { return Input(x.is_number() ? 0 : 1); },
                     std::vector<Block>{Scalar(), sum});
  decl.resolve_to(expr);
  EXPECT_EQ(*decl().output_type(), Type::scalar());
  EXPECT_EQ(*decl().input_type(), Type::input());
  const Input tree = {{"l", 1}, {"r", {{"l", 2}, {"r", 3}}}};
  EXPECT_THAT(floats(eval(expr, tree)), ElementsAre(6));
  EXPECT_EQ(max_depth(expr, tree), 2);
  ForwardDeclaration unresolved;
  Block orphan = unresolved();
  EXPECT_THAT(error_of([&] { Compiler c(orphan); }), HasSubstr("was never resolved"));
}

TEST(BlocksParity, FunctionOutputsNestedAsTheNestingSays) {
  const auto body = [](std::span<const Var> x) {
    return std::vector<Var>{x[0], x[0] * 2.0f, x[0] * 3.0f};
  };
  Function f("nested", {Type::vector(2)}, body, std::nullopt, [](const std::vector<Type>& t) {
    return Type::tuple({t[0], Type::tuple({t[1], t[2]})});
  });
  const Type v2 = Type::vector(2);
  EXPECT_EQ(*f.output_type(), Type::tuple({v2, Type::tuple({v2, v2})}));
  const EvalValue v = eval(Vector(2) >> f, Input::array({1, 2}));
  EXPECT_THAT(floats(v[0]), ElementsAre(1, 2));
  EXPECT_THAT(floats(v[1][1]), ElementsAre(3, 6));
  EXPECT_THAT(error_of([&] {
                Function bad("bad", {v2}, body, std::nullopt, [](const std::vector<Type>& t) {
                  return Type::tuple({t[0], t[1]});
                });
              }),
              HasSubstr("does not hold the body's outputs"));
}

TEST(BlocksParity, EmptyAllOfIsVoidEvenWhereTheInputIsATensor) {
  Block b = Record({{"a", Scalar() >> AllOf({})}, {"b", Scalar()}});
  const EvalValue v = eval(b, {{"a", 1}, {"b", 2}});
  EXPECT_EQ(v[0].kind, Type::Kind::kVoid);
  EXPECT_THAT(floats(v[1]), ElementsAre(2));
}

TEST(BlocksParity, CompilerNamesItsMetricsBeforeAnyBatch) {
  Compiler c(Record({{"x", Map(Scalar() >> Metric("x"))}, {"y", Scalar() >> Metric("y")}}) >>
             Void());
  EXPECT_THAT(c.metric_names(), ::testing::UnorderedElementsAre("x", "y"));
}

}  // namespace
}  // namespace weft::testing
