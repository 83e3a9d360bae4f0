// Ensembles of checkpoints (models/ensemble.h): an ensemble of one checkpoint is that model, an
// ensemble of two predicts the average of both models' probabilities and evaluates to the
// figures of that average, and checkpoints of another model, with other assets, or of a model
// that cannot be ensembled are refused with one line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "io_test_util.h"
#include "weft/core/error.h"
#include "weft/models/ensemble.h"
#include "weft/models/registry.h"
#include "weft/models/saved_model.h"

namespace weft::models {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

class Ensembles : public weft::testing::IoTempDir {
 protected:
  // A small calculator (no data needed) with `seed`, saved; untrained, so seeds differ.
  std::string calculator(int seed, int hidden = 8) {
    OptionValues o = find_model("calculator").default_options();
    o.update({{"hidden", hidden}, {"max_train", 16}, {"max_eval", 40}, {"seed", seed}}, "test");
    std::unique_ptr<Model> model = create_model(o);
    const std::string path = (dir_ / ("calc" + std::to_string(seed) + ".safetensors")).string();
    save_model(path, *model);
    return path;
  }

  static json evaluate(Model& model) {
    train::TrainerOptions recipe;
    recipe.set("progress", "off");
    recipe.set("batch_size", 7);  // several batches, the last one short
    return json::parse(train::Trainer(recipe).evaluate(model, train::Split::kDev).to_json());
  }

  static std::vector<std::vector<double>> probabilities(Model& model,
                                                        std::span<const json> examples) {
    std::vector<std::vector<double>> out;
    for (const json& p : model.predict(examples))
      out.push_back(p.at("probabilities").get<std::vector<double>>());
    return out;
  }
};

TEST(EnsembleAverage, IsTheLogOfTheMeanProbability) {
  const Tensor a = Tensor::from_vector({2, 2}, std::vector<float>{0, 0, 1, 3});
  const Tensor b = Tensor::from_vector({2, 2}, std::vector<float>{std::log(3.f), 0, 0, 0});
  const std::vector<float> avg = average_softmax(std::vector{a, b}).to_float_vector();
  const double p13 = 1 / (1 + std::exp(2.0));  // softmax([1, 3])[0]
  EXPECT_NEAR(std::exp(avg[0]), (0.5 + 0.75) / 2, 1e-6);
  EXPECT_NEAR(std::exp(avg[1]), (0.5 + 0.25) / 2, 1e-6);
  EXPECT_NEAR(std::exp(avg[2]), (p13 + 0.5) / 2, 1e-6);
  EXPECT_NEAR(std::exp(avg[3]), (1 - p13 + 0.5) / 2, 1e-6);
  EXPECT_THAT(
      [&] {
        average_softmax(std::vector{a, Tensor::zeros({2, 3})});
      },
      ThrowsMessage<Error>(HasSubstr("differ in shape")));
}

TEST_F(Ensembles, OfOneCheckpointIsThatModel) {
  const std::string a = calculator(1);
  std::unique_ptr<Model> single = load_model(a, ModelUse::kEvaluate);
  const std::vector<std::string> one{a};
  std::unique_ptr<Model> ensemble = load_ensemble(one, ModelUse::kEvaluate);
  EXPECT_EQ(evaluate(*ensemble), evaluate(*single));
  // The same checkpoint twice: the average of equal probabilities is those probabilities.
  const std::vector<std::string> twice{a, a};
  std::unique_ptr<Model> doubled = load_ensemble(twice, ModelUse::kEvaluate);
  EXPECT_EQ(doubled->ensemble_size(), 2u);
  const json single_figures = evaluate(*single), doubled_figures = evaluate(*doubled);
  EXPECT_EQ(doubled_figures.at("accuracy"), single_figures.at("accuracy"));
  EXPECT_NEAR(doubled_figures.at("loss").get<double>(), single_figures.at("loss").get<double>(),
              1e-5);
  const auto examples = single->examples(train::Split::kDev);
  const auto p1 = probabilities(*single, examples), p2 = probabilities(*doubled, examples);
  ASSERT_EQ(p1.size(), p2.size());
  for (std::size_t i = 0; i < p1.size(); ++i)
    for (std::size_t k = 0; k < p1[i].size(); ++k) EXPECT_NEAR(p1[i][k], p2[i][k], 2e-6);
}

TEST_F(Ensembles, OfTwoAveragesTheirProbabilities) {
  const std::string a = calculator(1), b = calculator(2, 12);  // sizes may differ
  std::unique_ptr<Model> ma = load_model(a, ModelUse::kEvaluate);
  std::unique_ptr<Model> mb = load_model(b, ModelUse::kEvaluate);
  const std::vector<std::string> both{a, b};
  std::unique_ptr<Model> ensemble = load_ensemble(both, ModelUse::kEvaluate);
  const auto examples = ma->examples(train::Split::kDev);
  const auto pa = probabilities(*ma, examples), pb = probabilities(*mb, examples);
  const auto pe = probabilities(*ensemble, examples);
  ASSERT_EQ(pe.size(), examples.size());
  bool models_differ = false;
  std::int64_t hits = 0;
  for (std::size_t i = 0; i < pe.size(); ++i) {
    std::size_t best = 0;
    for (std::size_t k = 0; k < pe[i].size(); ++k) {
      EXPECT_NEAR(pe[i][k], (pa[i][k] + pb[i][k]) / 2, 2e-6) << "example " << i;
      models_differ |= std::abs(pa[i][k] - pb[i][k]) > 1e-3;
      if (pa[i][k] + pb[i][k] > pa[i][best] + pb[i][best]) best = k;
    }
    hits += examples[i].at("sign").get<std::size_t>() == best;  // the class of the sign
  }
  EXPECT_TRUE(models_differ) << "two seeds should give two different models";
  // Evaluation reports the figures of the averaged probabilities: the accuracy of their argmax.
  EXPECT_NEAR(evaluate(*ensemble).at("accuracy").get<double>(), double(hits) / double(pe.size()),
              1e-9);
}

TEST_F(Ensembles, RefuseMixedModelsAssetsAndModelsWithoutClassScores) {
  const std::string a = calculator(1);
  const std::filesystem::path data = weft::testing::io_data_dir();
  if (!std::filesystem::exists(data / "sst/dev.txt")) GTEST_SKIP() << "no SST data";
  auto sst = [&](const std::string& name, int max_train) {
    OptionValues o = find_model(name).default_options();
    o.update({{"data_dir", data.string()},
              {"max_train", max_train},
              {"max_eval", 8},
              {"hidden", 8},
              {"no_embeddings", true},
              {"embedding_dim", 6}},
             "test");
    const std::string path = (dir_ / (name + std::to_string(max_train) + ".safetensors")).string();
    save_model(path, *create_model(o));
    return path;
  };
  const std::string s24 = sst("sentiment", 24), s40 = sst("sentiment", 40);
  const std::vector<std::string> mixed{a, s24};
  EXPECT_THAT([&] { load_ensemble(mixed, ModelUse::kInfer); },
              ThrowsMessage<Error>(
                  HasSubstr("holds model 'sentiment' but '" + a + "' holds 'calculator'")));
  const std::vector<std::string> vocabularies{s24, s40};
  EXPECT_THAT([&] { load_ensemble(vocabularies, ModelUse::kInfer); },
              ThrowsMessage<Error>(HasSubstr("assets (vocabulary, label names) differ")));
  const std::string att = sst("attention", 24);
  const std::vector<std::string> attention{att, att};
  EXPECT_THAT([&] { load_ensemble(attention, ModelUse::kInfer); },
              ThrowsMessage<Error>(HasSubstr("cannot be ensembled")));
  // The same vocabulary (the same data) but another seed: accepted.
  const std::vector<std::string> same{s24, s24};
  EXPECT_NO_THROW(load_ensemble(same, ModelUse::kInfer));
}

}  // namespace
}  // namespace weft::models
