// The meaning of the non-sequence blocks on concrete inputs, with exact values and the loom
// depth each adds: constants (0), Function and Concat (+1), routing blocks (0).
#include "blocks_test_util.h"

namespace weft::testing {
namespace {

TEST(BlocksBasic, TensorsFromData) {
  EXPECT_THAT(floats(eval(Scalar(), 2.5)), ElementsAre(2.5f));
  EXPECT_THAT(floats(eval(Vector(3), {1, 2, 3})), ElementsAre(1, 2, 3));
  EvalValue m = eval(AsTensor({2, 2}), {{1, 2}, {3, 4}});
  EXPECT_EQ(m.tensor.shape(), (Shape{2, 2}));
  EXPECT_THAT(floats(m), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(eval(Scalar(DType::kInt32), 7).tensor.to_int_vector(), ElementsAre(7));
  EXPECT_EQ(max_depth(Vector(3), {1, 2, 3}), 0);
}

TEST(BlocksBasic, TensorsOfEveryDtypeFromData) {
  const EvalValue big = eval(Vector(2, DType::kInt64), {9007199254740993LL, -4});
  ASSERT_EQ(big.tensor.dtype(), DType::kInt64);
  EXPECT_EQ(big.tensor.data<std::int64_t>()[0], 9007199254740993LL);  // 2^53 + 1, exactly
  EXPECT_EQ(eval(Scalar(DType::kFloat64), 0.1).tensor.to_double_vector()[0], 0.1);
  EXPECT_EQ(eval(Vector(3, DType::kBool), {true, false, 1}).tensor.to_string(),
            "Tensor(bool, [3], cpu, {true, false, true})");
  // Exact: no value is narrowed or reinterpreted on the way in.
  expect_error([] { eval(Scalar(DType::kInt32), 3000000000LL); },
               {"3000000000 is out of range for int32"});
  expect_error([] { eval(Scalar(DType::kInt64), 1.5); }, {"expects an integer, got 1.5"});
  expect_error(
      [] {
        eval(Vector(2, DType::kBool), {true, 2});
      },
      {"expects a boolean (true, false, 0 or 1), got 2"});
  // Constants, one-hots and lengths in the other dtypes.
  const weft::Tensor ids = weft::Tensor::from_vector({2}, std::vector<std::int64_t>{5, -6});
  EXPECT_EQ(eval(FromTensor(ids)).tensor.to_string(), ids.to_string());
  EXPECT_EQ(eval(OneHot(3, std::nullopt, DType::kBool), 1).tensor.to_string(),
            "Tensor(bool, [3], cpu, {false, true, false})");
  EXPECT_EQ(eval(Length(DType::kInt64), {4, 5, 6}).tensor.to_string(),
            "Tensor(int64, [], cpu, {3})");
}

TEST(BlocksBasic, FunctionsComputeInEveryDtypeAndBatch) {
  // int64 arithmetic, a comparison giving bool and a where, over a sequence woven as one batch.
  Function clip("clip", {Type::scalar(DType::kInt64)}, [](std::span<const Var> x) {
    Var limit = x[0].tape().constant(weft::Tensor::from_vector({}, std::vector<std::int64_t>{10}));
    return where(greater(x[0], limit), limit, x[0] * 2.0f);
  });
  EXPECT_EQ(*clip.output_type(), Type::scalar(DType::kInt64));
  const EvalValue v = eval(Map(Scalar(DType::kInt64) >> clip), {3, 40, -7});
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].tensor.to_string(), "Tensor(int64, [], cpu, {6})");
  EXPECT_EQ(v[1].tensor.to_string(), "Tensor(int64, [], cpu, {10})");
  EXPECT_EQ(v[2].tensor.to_string(), "Tensor(int64, [], cpu, {-14})");
  Function positive("positive", {Type::vector(2, DType::kFloat64)}, [](std::span<const Var> x) {
    Var zero = x[0].tape().constant(weft::Tensor::from_vector({}, std::vector<double>{0}));
    return greater(x[0], zero);
  });
  EXPECT_EQ(*positive.output_type(), Type::vector(2, DType::kBool));
  EXPECT_EQ(eval(Vector(2, DType::kFloat64) >> positive, {1e-300, -1e-300}).tensor.to_string(),
            "Tensor(bool, [2], cpu, {true, false})");
}

TEST(BlocksBasic, FunctionIsOneCallDeep) {
  Function twice("twice", {Type::vector(2)}, [](std::span<const Var> x) { return x[0] * 2.0f; });
  EXPECT_EQ(*twice.output_type(), Type::vector(2));
  Block b = Vector(2) >> twice;
  EXPECT_THAT(floats(eval(b, {1, -2})), ElementsAre(2, -4));
  EXPECT_EQ(max_depth(b, {1, -2}), 1);
  EXPECT_EQ(max_depth(b >> twice >> twice, {1, -2}), 3);
}

TEST(BlocksBasic, FunctionWithSeveralOutputsGivesATuple) {
  Function split2("split", {Type::vector(4)}, [](std::span<const Var> x) {
    auto [a, b] = split<2>(x[0]);
    return std::vector<Var>{a, b};
  });
  EXPECT_EQ(*split2.output_type(), Type::tuple({Type::vector(2), Type::vector(2)}));
  EvalValue v = eval(Vector(4) >> split2, {1, 2, 3, 4});
  ASSERT_EQ(v.size(), 2u);
  EXPECT_THAT(floats(v[0]), ElementsAre(1, 2));
  EXPECT_THAT(floats(v[1]), ElementsAre(3, 4));
}

TEST(BlocksBasic, FromTensorConstantAndParameter) {
  weft::Tensor t = weft::Tensor::from_vector({2}, std::vector<float>{7, 8});
  EXPECT_FALSE(FromTensor(t).input_type().has_value());  // any input, ignored
  EvalValue beside = eval(AllOf({Scalar(), FromTensor(t), Zeros(Type::scalar())}), 3);
  EXPECT_THAT(floats(beside[1]), ElementsAre(7, 8));
  EXPECT_THAT(floats(beside[2]), ElementsAre(0));
  EXPECT_THAT(floats(eval(FromTensor(t))), ElementsAre(7, 8));
  Parameter p("p", weft::Tensor::from_vector({3}, std::vector<float>{1, 2, 3}));
  EXPECT_THAT(floats(eval(FromTensor(p))), ElementsAre(1, 2, 3));
  EXPECT_EQ(max_depth(FromTensor(p)), 0);
}

TEST(BlocksBasic, ZerosOfNestedTypes) {
  EvalValue v = eval(Zeros(Type::tuple({Type::vector(2), Type::sequence(Type::scalar())})));
  ASSERT_EQ(v.size(), 2u);
  EXPECT_THAT(floats(v[0]), ElementsAre(0, 0));
  EXPECT_EQ(v[1].kind, Type::Kind::kSequence);
  EXPECT_EQ(v[1].size(), 0u);
}

TEST(BlocksBasic, OneHotAndOneHotFromList) {
  EXPECT_THAT(floats(eval(OneHot(2, 5), 3)), ElementsAre(0, 1, 0));
  EXPECT_THAT(floats(eval(OneHot(3), 0)), ElementsAre(1, 0, 0));
  EXPECT_THAT(floats(eval(OneHotFromList({"a", "b", "c"}), "c")), ElementsAre(0, 0, 1));
  EXPECT_THAT(floats(eval(OneHotFromList({"a", "b"}, DType::kFloat32, false), "z")),
              ElementsAre(0, 0));
  EXPECT_THAT(error_of([] { eval(OneHot(2, 5), 5); }),
              HasSubstr("[blocks] <OneHot>: 5 is out of range [2, 5)"));
  EXPECT_THAT(error_of([] {
                eval(OneHotFromList({"a", "b"}), "z");
              }),
              HasSubstr("\"z\" is not one of the 2 elements"));
  EXPECT_THAT(error_of([] { OneHotFromList({"a", "a"}); }), HasSubstr("duplicate element \"a\""));
}

TEST(BlocksBasic, LengthGetItemSlice) {
  EXPECT_THAT(floats(eval(Length(), {4, 5, 6})), ElementsAre(3));
  EXPECT_THAT(eval(Length(DType::kInt32), {4, 5}).tensor.to_int_vector(), ElementsAre(2));
  EXPECT_THAT(floats(eval(GetItem(-1) >> Scalar(), {4, 5, 6})), ElementsAre(6));
  EXPECT_THAT(floats(eval(GetItem("b") >> Scalar(), {{"a", 1}, {"b", 2}})), ElementsAre(2));
  EvalValue s = eval(Slice(1) >> Map(Scalar()), {4, 5, 6});
  ASSERT_EQ(s.size(), 2u);
  EXPECT_THAT(floats(s[1]), ElementsAre(6));
  EvalValue r = eval(Slice(std::nullopt, std::nullopt, -2) >> Map(Scalar()), {4, 5, 6});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_THAT(floats(r[0]), ElementsAre(6));
  EXPECT_THAT(floats(r[1]), ElementsAre(4));
  // On a Tuple, GetItem and Slice select items (types follow).
  Block t = AllOf({Scalar(), Vector(1), Length()}) >> Slice(1);
  EXPECT_EQ(*t.output_type(), Type::tuple({Type::vector(1), Type::scalar()}));
  EXPECT_THAT(floats(eval(Record({Scalar(), Vector(1)}) >> GetItem(1), {8, {9}})), ElementsAre(9));
}

TEST(BlocksBasic, InputTransformAndUserTypes) {
  Block words = InputTransform([](const Input& text) {
    Input out = Input::array();
    for (char c : text.get<std::string>()) out.push_back(int(c - '0'));
    return out;
  });
  EvalValue v = eval(words >> Map(Scalar()) >> Sum(), "1234");
  EXPECT_THAT(floats(v), ElementsAre(10));
}

TEST(BlocksBasic, RecordKeepsTheGivenOrder) {
  Block r = Record({{"b", Scalar()}, {"a", Vector(2)}});
  EXPECT_EQ(*r.output_type(), Type::tuple({Type::scalar(), Type::vector(2)}));
  EvalValue v = eval(r, {{"a", {1, 2}}, {"b", 3}});
  EXPECT_THAT(floats(v[0]), ElementsAre(3));
  EXPECT_THAT(floats(v[1]), ElementsAre(1, 2));
  // Integer keys index arrays and tuples.
  EvalValue a = eval(Record({Scalar(), Scalar()}), {5, 6});
  EXPECT_THAT(floats(a[1]), ElementsAre(6));
  EXPECT_THAT(error_of([&] {
                eval(r, {{"a", {1, 2}}});
              }),
              HasSubstr("<Record>: the input has no key 'b'"));
}

TEST(BlocksBasic, AllOfAndVoid) {
  EvalValue v =
      eval(AllOf({Scalar(), Scalar() >> Function("neg", {Type::scalar()},
                                                 [](std::span<const Var> x) { return -x[0]; })}),
           4);
  EXPECT_THAT(floats(v[0]), ElementsAre(4));
  EXPECT_THAT(floats(v[1]), ElementsAre(-4));
  EXPECT_EQ(*AllOf({}).output_type(), Type::void_type());  // nothing, as TF Fold's AllOf()
  EXPECT_EQ(*AllOf({Scalar()}).output_type(), Type::tuple({Type::scalar()}));
  EXPECT_EQ(*(Scalar() >> Void()).output_type(), Type::void_type());
}

TEST(BlocksBasic, ConcatIsOneCall) {
  Block c = Record({{"a", Vector(2)}, {"b", Scalar()}}) >> Concat();
  EXPECT_EQ(*c.output_type(), Type::vector(3));
  EXPECT_THAT(floats(eval(c, {{"a", {1, 2}}, {"b", 3}})), ElementsAre(1, 2, 3));
  EXPECT_EQ(max_depth(c, {{"a", {1, 2}}, {"b", 3}}), 1);
  // Along dimension 1 of [2, k] matrices, and nested tuples with flatten.
  Block m = Record({AsTensor({2, 1}), AsTensor({2, 2})}) >> Concat(1);
  EXPECT_THAT(floats(eval(m, {{{1}, {2}}, {{3, 4}, {5, 6}}})), ElementsAre(1, 3, 4, 2, 5, 6));
  Block f = AllOf({Scalar(), AllOf({Scalar(), Vector(2)})}) >> Concat(0, true);
  EXPECT_EQ(*f.output_type(), Type::vector(4));
}

TEST(BlocksBasic, OneOfDispatchesOnTheKey) {
  Block neg = Function("neg", {Type::scalar()}, [](std::span<const Var> x) { return -x[0]; });
  Block b = OneOf([](const Input& x) { return x["op"]; },
                  {{"id", GetItem("v") >> Scalar()}, {"neg", GetItem("v") >> Scalar() >> neg}});
  EXPECT_THAT(floats(eval(b, {{"op", "id"}, {"v", 3}})), ElementsAre(3));
  EXPECT_THAT(floats(eval(b, {{"op", "neg"}, {"v", 3}})), ElementsAre(-3));
  EXPECT_THAT(error_of([&] {
                eval(b, {{"op", "sqrt"}, {"v", 3}});
              }),
              HasSubstr("<OneOf>: no case for key \"sqrt\" (cases: \"id\", \"neg\")"));
  // Cases as a list: integer keys, negative ones from the end; a pre-block.
  Block by_index =
      OneOf([](const Input& x) { return x[0]; }, {Scalar(), Scalar() >> neg}, GetItem(1));
  EXPECT_THAT(floats(eval(by_index, {-1, 5})), ElementsAre(-5));
  EXPECT_THAT(floats(eval(by_index, {0, 5})), ElementsAre(5));
  // The key from a block.
  Block by_block = OneOf(GetItem("k"), {{1, GetItem("v") >> Scalar()}});
  EXPECT_THAT(floats(eval(by_block, {{"k", 1}, {"v", 8}})), ElementsAre(8));
}

TEST(BlocksBasic, OptionalOnNull) {
  EXPECT_THAT(floats(eval(Optional(Vector(2)), nullptr)), ElementsAre(0, 0));
  EXPECT_THAT(floats(eval(Optional(Vector(2)), {1, 2})), ElementsAre(1, 2));
  weft::Tensor t = weft::Tensor::from_vector({2}, std::vector<float>{7, 8});
  EXPECT_THAT(floats(eval(Optional(Vector(2), FromTensor(t)), nullptr)), ElementsAre(7, 8));
}

TEST(BlocksBasic, CompositionWiresADag) {
  Composition c;
  auto a = c.add(GetItem("a") >> Scalar(), c.input());
  auto b = c.add(GetItem("b") >> Scalar(), c.input());
  auto sum = c.add(scalar_add(), {a, b});
  auto both = c.add(AllOf({Identity(), Identity()}), sum);
  c.set_output({both[1], a});
  EvalValue v = eval(c, {{"a", 1}, {"b", 2}});
  EXPECT_THAT(floats(v[0]), ElementsAre(3));
  EXPECT_THAT(floats(v[1]), ElementsAre(1));
  EXPECT_EQ(*c.input_type(), Type::input());

  Composition unused;
  unused.add(Scalar(), unused.input());
  auto x = unused.add(Scalar(), unused.input());
  unused.set_output(x);
  EXPECT_THAT(error_of([&] { eval(unused, 1); }),
              HasSubstr("children have unused outputs: <Tensor"));
  Composition none;
  none.add(Scalar() >> Void(), none.input());
  EXPECT_THAT(error_of([&] { eval(none, 1); }), HasSubstr("Composition block has no output"));
}

TEST(BlocksBasic, UserCppTypesThroughToJson) {
  std::vector<std::pair<float, float>> points{{1, 2}, {3, 4}};  // to_json: [a, b]
  Compiler compiler(Vector(2));
  Tape tape;
  auto batch = compiler.weave_values(std::span<const std::pair<float, float>>(points));
  BatchResult r = compiler.run(batch, tape);
  EXPECT_THAT(r.output().value().to_float_vector(), ElementsAre(1, 2, 3, 4));
}

}  // namespace
}  // namespace weft::testing
