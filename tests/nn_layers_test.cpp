// FC and Embedding: float64 references with finite-difference gradients of inputs and
// parameters, batched-vs-row agreement, default initializers, dropout only in training
// mode, pretrained and frozen tables, and the error messages.
#include <cmath>

#include "nn_test_util.h"
#include "weft/nn/embedding.h"
#include "weft/nn/fc.h"
#include "weft/nn/mode.h"

namespace weft::testing {
namespace {

double activate(nn::Activation activation, double v) {
  switch (activation) {
    case nn::Activation::kRelu:
      return v > 0 ? v : 0;
    case nn::Activation::kTanh:
      return std::tanh(v);
    case nn::Activation::kSigmoid:
      return sigmoid64(v);
    case nn::Activation::kNone:
      break;
  }
  return v;
}

TEST(NnFC, MatchesReferenceWithGradientsForEveryActivation) {
  for (nn::Activation activation : {nn::Activation::kNone, nn::Activation::kRelu,
                                    nn::Activation::kTanh, nn::Activation::kSigmoid}) {
    SCOPED_TRACE(std::string(nn::activation_name(activation)));
    nn::ParameterStore store(1);
    nn::FCOptions options;
    options.activation = activation;
    options.bias_init = nn::uniform(-0.5f, 0.5f);
    nn::FC fc(store, "fc", 5, 4, options);
    auto reference = [activation](const std::vector<HostArray>& in,
                                  const std::vector<HostArray>& p) {
      return map(affine(in[0], p[0], p[1]),
                 [activation](double v) { return activate(activation, v); });
    };
    check_layer(fc.parameters(), [&](const std::vector<Var>& v) { return fc(v[0]); }, reference,
                {random_tensor({3, 5}, 2)});
  }
}

TEST(NnFC, NormalizationRunsBetweenAffineAndActivation) {
  nn::ParameterStore store(4);
  nn::FCOptions options;
  options.activation = nn::Activation::kTanh;
  options.bias_init = nn::uniform(-0.5f, 0.5f);
  options.normalization = [](Var y) { return y * y; };  // a stand-in: rows stay independent
  nn::FC fc(store, "fc", 4, 3, options);
  auto reference = [](const std::vector<HostArray>& in, const std::vector<HostArray>& p) {
    return map(affine(in[0], p[0], p[1]), [](double v) { return std::tanh(v * v); });
  };
  check_layer(fc.parameters(), [&](const std::vector<Var>& v) { return fc(v[0]); }, reference,
              {random_tensor({3, 4}, 5)});
}

TEST(NnFC, WeightNormalizationUsesUnitColumnsTimesLearnedScales) {
  nn::ParameterStore store(5);
  nn::FCOptions options;
  options.activation = nn::Activation::kSigmoid;
  options.bias_init = nn::uniform(-0.5f, 0.5f);
  options.weight_norm = true;
  nn::FC fc(store, "fc", 4, 3, options);
  ASSERT_EQ(fc.parameters().size(), 3u);
  EXPECT_EQ(fc.scale().value().shape(), (Shape{3}));
  EXPECT_EQ(fc.scale().value().to_float_vector(), (std::vector<float>{1, 1, 1}));
  // Scales away from 1, so a wrong formula cannot hide.
  Tensor g = Tensor::from_vector(Shape{3}, std::vector<float>{0.5f, 2.0f, -1.5f});
  Parameter scale = fc.scale();
  scale.value() = g;
  auto reference = [](const std::vector<HostArray>& in, const std::vector<HostArray>& p) {
    HostArray w = p[0];  // [4, 3]
    for (std::int64_t j = 0; j < 3; ++j) {
      double norm = 0;
      for (std::int64_t i = 0; i < 4; ++i)
        norm += w[std::size_t(i * 3 + j)] * w[std::size_t(i * 3 + j)];
      norm = std::sqrt(norm);
      for (std::int64_t i = 0; i < 4; ++i)
        w[std::size_t(i * 3 + j)] = p[0][std::size_t(i * 3 + j)] / norm * p[2][std::size_t(j)];
    }
    return map(affine(in[0], w, p[1]), [](double v) { return sigmoid64(v); });
  };
  check_layer(fc.parameters(), [&](const std::vector<Var>& v) { return fc(v[0]); }, reference,
              {random_tensor({3, 4}, 6)});
  // The effective weight's columns have norms |g_j|.
  Tape tape;
  TapeScope scope(tape);
  std::vector<float> w = fc.effective_weight(tape).value().to_float_vector();
  for (int j = 0; j < 3; ++j) {
    double norm = 0;
    for (int i = 0; i < 4; ++i)
      norm += double(w[std::size_t(i * 3 + j)]) * w[std::size_t(i * 3 + j)];
    EXPECT_NEAR(std::sqrt(norm), std::abs(g.to_float_vector()[std::size_t(j)]), 1e-5);
  }
}

TEST(NnFC, BatchedRowsEqualSingleRows) {
  nn::ParameterStore store(2);
  nn::FC fc(store, "fc", 6, 3, {.activation = nn::Activation::kTanh});
  check_batched_matches_rows([&](const std::vector<Var>& v) { return fc(v[0]); },
                             {random_tensor({5, 6}, 3)}, {true});
}

TEST(NnFC, DefaultInitializersFollowTheActivation) {
  nn::ParameterStore store(3);
  const std::pair<nn::Activation, double> gains[] = {{nn::Activation::kRelu, 1.43},
                                                     {nn::Activation::kTanh, 1.15},
                                                     {nn::Activation::kNone, 1.0},
                                                     {nn::Activation::kSigmoid, 1.0}};
  for (const auto& [activation, gain] : gains) {
    nn::FC fc(store, std::string(nn::activation_name(activation)), 30, 200,
              {.activation = activation});
    const double limit = std::sqrt(3.0 / 30.0) * gain;
    float largest = 0;
    for (float w : fc.weight().value().to_float_vector()) largest = std::max(largest, std::abs(w));
    EXPECT_LE(largest, limit) << nn::activation_name(activation);
    EXPECT_GT(largest, 0.98 * limit) << nn::activation_name(activation);
    EXPECT_EQ(fc.bias().value().to_float_vector(), std::vector<float>(200, 0.0f));
  }
  EXPECT_EQ(store.get("relu/weight").shape(), (Shape{30, 200}));
}

TEST(NnFC, WrongInputWidthNamesTheLayer) {
  nn::ParameterStore store;
  auto scope = store.scope("model");
  nn::FC fc(store, "fc", 5, 2);
  EXPECT_EQ(fc.name(), "model/fc");
  Tape tape;
  expect_error(
      [&] {
        fc(tape.constant(random_tensor({3, 7}, 1)));
      },
      {"[FC 'model/fc'] input has 7 features, expected 5"});
  expect_error([&] { fc(tape.constant(random_tensor({5}, 1))); },
               {"[FC 'model/fc'] input must be float32 [B, 5], got float32 [5]"});
  expect_error([&] { nn::FC(store, "bad", 5, 2, {.input_dropout = 1.0f}); },
               {"[FC 'model/bad'] input_dropout 1 is outside [0, 1)"});
  expect_error([&] { nn::FC(store, "zero", 0, 2); }, {"[FC 'model/zero'] in must be > 0, got 0"});
}

TEST(NnFC, DropoutOnlyInTrainingAndReproducible) {
  nn::ParameterStore store(4);
  nn::FC fc(store, "fc", 8, 16,
            {.activation = nn::Activation::kTanh, .input_dropout = 0.25f, .output_dropout = 0.5f});
  Tape tape;
  TapeScope tape_scope(tape);
  Var x = tape.constant(random_tensor({10, 8}, 5));
  const auto plain = values_of(tanh(linear(x, fc.weight(), fc.bias())));
  EXPECT_EQ(values_of(fc(x)), plain);  // no ForwardMode: inference
  {
    nn::ForwardMode eval(false);
    EXPECT_EQ(values_of(fc(x)), plain);
  }
  Rng rng(6), same(6);
  std::vector<float> trained;
  {
    nn::ForwardMode train(true, &rng);
    trained = values_of(fc(x));
  }
  // The same two masks drawn by hand: input dropout, then output dropout.
  Var expected = dropout(tanh(linear(dropout(x, 0.25f, same), fc.weight(), fc.bias())), 0.5f, same);
  EXPECT_EQ(trained, values_of(expected));
  EXPECT_NE(trained, plain);
}

TEST(NnFC, ActivationNamesParse) {
  EXPECT_EQ(nn::parse_activation("tanh"), nn::Activation::kTanh);
  expect_error([] { nn::parse_activation("gelu"); },
               {"unknown activation 'gelu'; expected none, relu, tanh or sigmoid"});
}

nn::Embedding small_embedding(nn::ParameterStore& store, bool mod_inputs, bool trainable = true) {
  std::vector<float> table;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c) table.push_back(float(10 * r + c));
  return nn::Embedding(store, "words", 4, 3,
                       {.init = nn::from_tensor(Tensor::from_vector({4, 3}, table)),
                        .trainable = trainable,
                        .mod_inputs = mod_inputs});
}

TEST(NnEmbedding, LooksUpAbsModNumBuckets) {
  nn::ParameterStore store;
  nn::Embedding emb = small_embedding(store, /*mod_inputs=*/true);
  Tape tape;
  TapeScope scope(tape);
  Tensor ids = int_tensor({5}, {3, -1, 7, -9, 0});  // -> 3, 1, 3, 1, 0
  EXPECT_EQ(emb.bucket_ids(ids).to_int_vector(), (std::vector<std::int32_t>{3, 1, 3, 1, 0}));
  const std::vector<float> expected = {30, 31, 32, 10, 11, 12, 30, 31, 32, 10, 11, 12, 0, 1, 2};
  EXPECT_EQ(values_of(emb(ids)), expected);
  EXPECT_EQ(values_of(emb(tape.constant(ids))), expected);  // the Var overload
  EXPECT_EQ(store.get("words/table").shape(), (Shape{4, 3}));
}

TEST(NnEmbedding, OutOfRangeIdsThrowWithoutMod) {
  nn::ParameterStore store;
  nn::Embedding emb = small_embedding(store, /*mod_inputs=*/false);
  EXPECT_EQ(values_of(emb(int_tensor({2}, {2, 0}))), (std::vector<float>{20, 21, 22, 0, 1, 2}));
  expect_error(
      [&] {
        emb(int_tensor({3}, {0, 4, 1}));
      },
      {"[Embedding 'words'] id 4 at position 1 is outside [0, 4)"});
  expect_error([&] { emb(int_tensor({1}, {-2})); },
               {"[Embedding 'words'] id -2 at position 0 is outside [0, 4)"});
  expect_error([&] { emb(random_tensor({2}, 1)); },
               {"[Embedding 'words'] ids must be int32 [B], got float32 [2]"});
}

TEST(NnEmbedding, GradientScatterAddsIntoTheTable) {
  nn::ParameterStore store(3);
  nn::Embedding emb(store, "emb", 5, 2);
  Tensor ids = int_tensor({4}, {1, 3, 1, 6});  // 6 -> 1: row 1 is read three times
  auto reference = [](const std::vector<HostArray>&, const std::vector<HostArray>& p) {
    HostArray y(Shape{4, 2}, {});
    for (int id : {1, 3, 1, 1})
      for (int c = 0; c < 2; ++c) y.values.push_back(p[0][std::size_t(id * 2 + c)]);
    return y;
  };
  check_layer(emb.parameters(), [&](const std::vector<Var>&) { return emb(ids); }, reference, {});
}

TEST(NnEmbedding, DefaultInitIsSmallUniform) {
  nn::ParameterStore store(4);
  nn::Embedding emb(store, "emb", 100, 50);
  float largest = 0;
  for (float v : emb.table().value().to_float_vector()) largest = std::max(largest, std::abs(v));
  EXPECT_LE(largest, 0.05f);
  EXPECT_GT(largest, 0.049f);
}

TEST(NnEmbedding, FrozenTableGetsNoGradient) {
  nn::ParameterStore store;
  nn::Embedding emb = small_embedding(store, true, /*trainable=*/false);
  EXPECT_FALSE(emb.table().trainable());
  EXPECT_TRUE(store.trainable_parameters().empty());
  Tape tape;
  TapeScope scope(tape);
  Var scale = tape.variable(Tensor::full({1, 3}, 2.0f));
  Var looked_up = emb(int_tensor({2}, {1, 2}));
  EXPECT_FALSE(looked_up.requires_grad());
  tape.backward(sum(looked_up * scale));
  EXPECT_EQ(emb.table().grad().to_float_vector(), std::vector<float>(12, 0.0f));
  EXPECT_EQ(scale.grad().to_float_vector(), (std::vector<float>{30, 32, 34}));  // 10+20, ...
}

TEST(NnEmbedding, PretrainedVectorsBySettingTheValue) {
  nn::ParameterStore store;
  nn::Embedding emb(store, "glove", 3, 2, {.trainable = false});
  emb.table().value() = Tensor::from_vector({3, 2}, std::vector<float>{1, 2, 3, 4, 5, 6});
  Tape tape;
  Var ids = tape.constant(int_tensor({2}, {2, 0}));
  EXPECT_EQ(values_of(emb(ids)), (std::vector<float>{5, 6, 1, 2}));
  emb.set_table(Tensor::from_vector({3, 2}, std::vector<float>{7, 8, 9, 10, 11, 12}));
  tape.clear();
  EXPECT_EQ(values_of(emb(tape.constant(int_tensor({2}, {2, 0})))),
            (std::vector<float>{11, 12, 7, 8}));
  expect_error(
      [&] {
        emb.set_table(Tensor::zeros({2, 3}));
      },
      {"[Embedding 'glove'] vectors float32 [2, 3] do not fit the table float32 [3, 2]"});
}

TEST(NnEmbedding, BatchedRowsEqualSingleRows) {
  nn::ParameterStore store(5);
  nn::Embedding emb(store, "emb", 7, 4);
  Tape tape;
  TapeScope scope(tape);
  const std::vector<std::int32_t> ids = {3, 0, 6, 3, 12};
  const auto batch = values_of(emb(int_tensor({5}, ids)));
  for (std::size_t r = 0; r < ids.size(); ++r) {
    const auto row = values_of(emb(int_tensor({1}, {ids[r]})));
    for (std::size_t c = 0; c < 4; ++c) EXPECT_EQ(row[c], batch[r * 4 + c]);
  }
}

}  // namespace
}  // namespace weft::testing
