// The model contract: option schemas check every value (from a user or a file), the registry
// builds models by name and takes a program's own model with one register_model call (the toy
// model below lives only in this file), and checkpoints are self-contained: every built-in
// model predicts the same after a save and a load with no data folder, and a checkpoint of
// another model, or missing a piece, is refused with one line naming what is wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>

#include "io_test_util.h"
#include "weft/autodiff/ops.h"
#include "weft/backend/cuda.h"
#include "weft/core/error.h"
#include "weft/io/molecule_graph.h"
#include "weft/models/block_model.h"
#include "weft/models/classification.h"
#include "weft/models/registry.h"
#include "weft/models/saved_model.h"
#include "weft/nn/fc.h"
#include "weft/train/checkpoint.h"

namespace weft::models {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(ModelOptions, ValuesAreCheckedAgainstTheSchema) {
  OptionValues o = find_model("sentiment").default_options();
  EXPECT_EQ(o.integer("hidden"), 150);
  EXPECT_EQ(o.text("device"), "cpu");
  o.set_text("hidden", "64", "--hidden");
  EXPECT_EQ(o.integer("hidden"), 64);
  o.set("dropout", 0, "test");  // an integer is a float
  EXPECT_EQ(o.number("dropout"), 0.0);
  EXPECT_THAT([&] { o.set("hidden", -5, "checkpoint 'x'"); },
              ThrowsMessage<Error>(HasSubstr("checkpoint 'x': option 'hidden' must be an integer "
                                             "in [1, 65536], got -5")));
  EXPECT_THAT([&] { o.set("hidden", 1e12, "f"); },
              ThrowsMessage<Error>(HasSubstr("in [1, 65536]")));
  EXPECT_THAT([&] { o.set("hidden", 2.5, "f"); }, ThrowsMessage<Error>(HasSubstr("an integer")));
  EXPECT_THAT([&] { o.set("dropout", "high", "f"); },
              ThrowsMessage<Error>(HasSubstr("must be a number")));
  EXPECT_THAT([&] { o.set_text("dropout", "0.5x", "--dropout"); },
              ThrowsMessage<Error>(HasSubstr("--dropout: option 'dropout' must be a number")));
  EXPECT_THAT([&] { o.set("device", "tpu", "--device"); },
              ThrowsMessage<Error>(HasSubstr("must be one of cpu, cuda")));
  EXPECT_THAT([&] { o.set("no_embeddings", 1, "f"); },
              ThrowsMessage<Error>(HasSubstr("true or false")));
  EXPECT_THAT([&] { o.set("hiden", 3, "--hiden"); },
              ThrowsMessage<Error>(HasSubstr("no option 'hiden' (known: seed, data_dir")));
  EXPECT_EQ(o.integer("hidden"), 64);  // failed sets changed nothing
}

TEST(ModelRegistry, ListsTheBuiltInModelsWithTheirSchemaAndRecipe) {
  const std::vector<std::string> names = model_names();
  for (const char* name : {"calculator", "sentiment", "attention", "langid", "molecules"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
    const json description = find_model(name).to_json();
    EXPECT_FALSE(description["summary"].get<std::string>().empty());
    EXPECT_FALSE(description["input"].get<std::string>().empty());
    EXPECT_EQ(description["options"][0]["name"], "seed");
    EXPECT_GT(description["recipe"]["epochs"].get<int>(), 0);
  }
  EXPECT_EQ(find_model("molecules").recipe(find_model("molecules").default_options())["best_mode"],
            "min");  // ESOL: RMSE
  EXPECT_THAT([] { find_model("nope"); },
              ThrowsMessage<Error>(HasSubstr("unknown model 'nope' (known: calculator")));
  ModelEntry incomplete;
  incomplete.name = "incomplete";
  EXPECT_THAT([&] { register_model(incomplete); }, ThrowsMessage<Error>(HasSubstr("no factory")));
  ModelEntry taken = find_model("calculator");
  EXPECT_THAT([&] { register_model(taken); }, ThrowsMessage<Error>(HasSubstr("exists")));
}

// A model of this file only: the mean of a list of numbers through one FC layer, classified
// as below or above zero. Registered once, then used like the built-in ones.
class ToyModel : public BlockModel {
 public:
  ToyModel(const OptionValues& options, const ModelInit& init) : BlockModel(options, init) {
    const std::int64_t n = options.integer("width");
    for (int s = 0; s < 3 && init.use != ModelUse::kInfer; ++s) {
      Rng rng(std::uint64_t(s + 7));
      for (int i = 0; i < 64; ++i) {
        json values = json::array();
        double total = 0;
        for (std::uint64_t k = 0, len = 1 + rng.below(4); k < len; ++k) {
          const double v = double(rng.below(200)) / 100.0 - 1.0;
          values.push_back(v);
          total += v;
        }
        split_examples(train::Split(s)).push_back({{"values", values}, {"label", total > 0}});
      }
    }
    fc_ = std::make_unique<nn::FC>(store(), "fc", 1, n);
    out_ = std::make_unique<nn::FC>(store(), "out", n, 2,
                                    nn::FCOptions{.activation = nn::Activation::kNone});
    using namespace blocks;
    nn::FC* fc = fc_.get();
    nn::FC* out = out_.get();
    Function up("up", {Type::vector(1)}, [fc](std::span<const Var> x) { return (*fc)(x[0]); });
    Function logits("logits", {Type::vector(n)},
                    [out](std::span<const Var> x) { return (*out)(x[0]); });
    Composition g("toy");
    auto l = g.add(GetItem("values") >>
                       Map(InputTransform([](const Input& v) { return Input::array({v}); }) >>
                           Vector(1) >> up) >>
                       Mean() >> logits,
                   g.input());
    g.add(Metric("label"), {l, g.add(GetItem("label") >> InputTransform([](const Input& b) {
                                       return Input(b.get<bool>() ? 1 : 0);
                                     }),
                                     g.input())});
    g.set_output(l);
    compile(g);
  }
  json parse_example(std::string_view line, std::string_view where) const override {
    const json values = json::parse(line, nullptr, false);
    if (!values.is_array()) fail("toy", where, ": expected a JSON array of numbers");
    return {{"values", values}, {"label", false}};
  }

 private:
  train::BatchFigures figures(const blocks::BatchResult& result, const train::Batch&,
                              bool training) override {
    return classify_examples(result.metric("label"), training);
  }
  std::vector<json> predictions(const blocks::BatchResult& result, std::size_t count) override {
    const std::vector<float> logits = result.output(0).value().to_float_vector();
    std::vector<json> out;
    for (std::size_t i = 0; i < count; ++i) {
      out.push_back({{"probabilities", probabilities_json(std::span(logits).subspan(2 * i, 2))}});
    }
    return out;
  }
  std::unique_ptr<nn::FC> fc_, out_;
};

void register_toy_once() {
  static const bool registered = [] {
    ModelEntry entry;
    entry.name = "toy_mean_sign";
    entry.summary = "the sign of a list's mean (a test's model)";
    entry.input = "a JSON array of numbers";
    entry.options = {{.name = "width", .default_value = 8, .help = "Hidden size", .min = 1}};
    entry.recipe = [](const OptionValues&) {
      return json{{"epochs", 12},
                  {"batch_size", 16},
                  {"optimizer", "adam"},
                  {"learning_rate", 0.05},
                  {"best_metric", "accuracy"}};
    };
    entry.create = [](const OptionValues& o, const ModelInit& init) {
      return std::make_unique<ToyModel>(o, init);
    };
    register_model(std::move(entry));
    return true;
  }();
  (void)registered;
}

class SavedModels : public weft::testing::IoTempDir {};

TEST_F(SavedModels, AToyModelTrainsSavesAndLoadsThroughTheRegistry) {
  register_toy_once();
  const ModelEntry& entry = find_model("toy_mean_sign");
  OptionValues options = entry.default_options();
  options.set("width", 6, "test");
  std::unique_ptr<Model> model = create_model(options);
  train::TrainerOptions recipe = entry.training_options(options);
  recipe.set("progress", "off");
  // The model ends with the best epoch's parameters, which the best checkpoint holds.
  recipe.set("best_checkpoint", (dir_ / "toy.safetensors").string());
  train::Trainer trainer(recipe);
  const train::TrainResult result = trainer.fit(*model);
  EXPECT_LT(result.epochs.back().train.value("loss"), result.epochs.front().train.value("loss"));
  EXPECT_GT(trainer.evaluate(*model, train::Split::kTest).value("accuracy"), 0.8);

  std::unique_ptr<Model> loaded =
      load_model(recipe.values.text("best_checkpoint"), ModelUse::kInfer);
  EXPECT_EQ(loaded->name(), "toy_mean_sign");
  EXPECT_EQ(loaded->options().integer("width"), 6);
  const std::vector<json> examples{loaded->parse_example("[0.5, -0.25]", "t:1"),
                                   loaded->parse_example("[-0.75]", "t:2")};
  EXPECT_EQ(loaded->predict(examples), model->predict(examples));
}

// Small options of each built-in model, or nothing when its data is absent.
std::optional<OptionValues> small_options(const std::string& name) {
  const std::filesystem::path data = weft::testing::io_data_dir();
  OptionValues o = find_model(name).default_options();
  o.update({{"data_dir", data.string()}, {"max_train", 24}, {"max_eval", 8}, {"seed", 3}}, "test");
  if (name == "calculator") {
    o.set("hidden", 8, "test");
  } else if (name == "sentiment" || name == "attention") {
    if (!std::filesystem::exists(data / "sst/dev.txt")) return std::nullopt;
    o.update({{"hidden", 8}, {"no_embeddings", true}, {"embedding_dim", 6}}, "test");
  } else if (name == "langid") {
    if (!std::filesystem::exists(data / "tatoeba-langid/testset.csv")) return std::nullopt;
    o.update({{"hidden", 8}, {"char_hidden", 8}, {"char_embedding", 4}}, "test");
  } else if (name == "molecules") {
    if (!io::smiles_parser_available() ||
        !std::filesystem::exists(data / "molecules/delaney-processed.csv")) {
      return std::nullopt;
    }
    o.update({{"hidden", 8}, {"pair_hidden", 4}, {"graph_hidden", 8}, {"task", "esol"}}, "test");
  }
  return o;
}

// Lines `weft infer <name>` reads, for each built-in model.
std::vector<std::string> infer_lines(const std::string& name) {
  if (name == "calculator")
    return {R"({"op": "*", "left": {"number": 3}, "right": {"number": 4}})"};
  if (name == "sentiment" || name == "attention") {
    return {"(3 (2 a) (4 (3 lovely) (2 film)))", "(1 (2 not) (1 good))"};
  }
  if (name == "langid") return {"Bonjour tout le monde", "1\teng\tGood morning"};
  return {"CCO", R"({"smiles": "c1ccccc1O"})"};
}

TEST_F(SavedModels, EveryBuiltInModelPredictsTheSameFromItsCheckpointAlone) {
  for (const char* name : {"calculator", "sentiment", "attention", "langid", "molecules"}) {
    SCOPED_TRACE(name);
    const std::optional<OptionValues> options = small_options(name);
    if (!options) continue;  // its data is absent here
    std::unique_ptr<Model> trained = create_model(*options);
    // Different weights than a fresh model's: one step of training.
    train::TrainerOptions recipe = find_model(name).training_options(*options);
    recipe.set("epochs", 1);
    recipe.set("batch_size", 8);
    recipe.set("progress", "off");
    train::Trainer(recipe).fit(*trained);
    const std::string path = (dir_ / (std::string(name) + ".safetensors")).string();
    save_model(path, *trained);

    // No data folder: a path that does not exist.
    std::unique_ptr<Model> loaded =
        load_model(path, ModelUse::kInfer, {{"data_dir", (dir_ / "no-data").string()}}, name);
    EXPECT_EQ(loaded->num_examples(train::Split::kTest), 0u);
    EXPECT_EQ(loaded->assets(), trained->assets());
    std::vector<json> examples, reference;
    for (const std::string& line : infer_lines(name)) {
      examples.push_back(loaded->parse_example(line, "t:1"));
      reference.push_back(trained->parse_example(line, "t:1"));
    }
    EXPECT_EQ(examples, reference);
    EXPECT_EQ(loaded->predict(examples), trained->predict(reference));
  }
}

// Numbers equal to float32 rounding, everything else exactly (predictions from two devices).
void expect_near_json(const json& a, const json& b, const std::string& where);

// inference_rate runs the schedule its compiler options ask for: one call per node makes the
// most calls, by depth more than sinks last (which runs the root classifier once), none below
// the bound; cutting steps to 2 rows makes more calls again, against the same bound.
TEST_F(SavedModels, InferenceRateTimesTheScheduleItIsGiven) {
  const std::unique_ptr<Model> model = create_model(*small_options("calculator"));
  const std::span<const json> examples = model->examples(train::Split::kTest);
  ASSERT_EQ(examples.size(), 8u);
  const auto rate = [&](loom::Strategy strategy, std::uint32_t max_step_rows) {
    return inference_rate(
        model->root_block(), examples,
        blocks::CompilerOptions{.strategy = strategy, .max_step_rows = max_step_rows}, 4);
  };
  const InferenceRate unbatched = rate(loom::Strategy::kNone, 0);
  const InferenceRate by_depth = rate(loom::Strategy::kByDepth, 0);
  const InferenceRate sinks_last = rate(loom::Strategy::kSinksLast, 0);
  const InferenceRate cut = rate(loom::Strategy::kByDepth, 2);
  EXPECT_GT(unbatched.batched_calls, by_depth.batched_calls);
  EXPECT_GT(by_depth.batched_calls, sinks_last.batched_calls);
  EXPECT_GE(sinks_last.batched_calls, sinks_last.min_batched_calls);
  EXPECT_EQ(by_depth.min_batched_calls, sinks_last.min_batched_calls);
  EXPECT_GE(by_depth.batched_calls, by_depth.min_batched_calls);
  EXPECT_GT(cut.batched_calls, by_depth.batched_calls);
  EXPECT_EQ(cut.min_batched_calls, by_depth.min_batched_calls);
  for (const InferenceRate& r : {unbatched, by_depth, sinks_last, cut})
    EXPECT_GT(r.examples_per_second, 0.0);
}

// loom_strategy auto is the model's choice (agenda where by_depth runs operations at every
// depth they occur at: attention, langid, molecules; sinks_last where a head on every node or
// on roots at every depth does: sentiment, calculator); by_depth, sinks_last and agenda can be
// forced, and every schedule, and steps cut to 2 rows (max_step_rows), give the same predictions;
// another strategy is refused with the choices.
TEST_F(SavedModels, EveryBuiltInModelSchedulesByItsChoiceOrTheOption) {
  const std::map<std::string, loom::Strategy> choice = {{"calculator", loom::Strategy::kSinksLast},
                                                        {"sentiment", loom::Strategy::kSinksLast},
                                                        {"attention", loom::Strategy::kAgenda},
                                                        {"langid", loom::Strategy::kAgenda},
                                                        {"molecules", loom::Strategy::kAgenda}};
  for (const auto& [name, expected] : choice) {
    SCOPED_TRACE(name);
    std::optional<OptionValues> options = small_options(name);
    if (!options) continue;  // its data is absent here
    std::unique_ptr<Model> by_choice = create_model(*options);
    EXPECT_EQ(by_choice->loom_strategy(), expected);
    std::vector<json> examples;
    for (const std::string& line : infer_lines(name))
      examples.push_back(by_choice->parse_example(line, "t:1"));
    const std::vector<json> reference = by_choice->predict(examples);
    for (const char* forced : {"by_depth", "sinks_last", "agenda", "steps of 2 rows"}) {
      OptionValues o = *options;
      const bool cut = std::string(forced) == "steps of 2 rows";
      if (cut)
        o.update({{"max_step_rows", 2}}, "test");
      else
        o.update({{"loom_strategy", forced}}, "test");
      std::unique_ptr<Model> model = create_model(o);
      if (!cut) {
        EXPECT_EQ(loom::strategy_name(model->loom_strategy()), forced);
      }
      const std::vector<json> predictions = model->predict(examples);
      ASSERT_EQ(predictions.size(), reference.size());
      for (std::size_t i = 0; i < reference.size(); ++i)
        expect_near_json(predictions[i], reference[i],
                         std::string(forced) + ", example " + std::to_string(i));
    }
  }
  OptionValues o = find_model("calculator").default_options();
  EXPECT_THAT(
      [&] {
        o.update({{"loom_strategy", "fastest"}}, "test");
      },
      ThrowsMessage<Error>(HasSubstr("loom_strategy")));
}

// Numbers equal to float32 rounding, everything else exactly (predictions from two devices).
void expect_near_json(const json& a, const json& b, const std::string& where) {
  if (a.is_number() && b.is_number()) {
    EXPECT_NEAR(a.get<double>(), b.get<double>(), 1e-4 * (1 + std::abs(a.get<double>()))) << where;
  } else if (a.is_structured() && b.is_structured() && a.size() == b.size() &&
             a.type() == b.type()) {
    if (a.is_array()) {
      for (std::size_t i = 0; i < a.size(); ++i) {
        expect_near_json(a[i], b[i], where + "[" + std::to_string(i) + "]");
      }
    } else {
      for (auto it = a.begin(); it != a.end(); ++it) {
        ASSERT_TRUE(b.contains(it.key())) << where << "." << it.key();
        expect_near_json(it.value(), b[it.key()], where + "." + it.key());
      }
    }
  } else {
    EXPECT_EQ(a, b) << where;
  }
}

// The device option places every built-in model: without a usable GPU, asking for one fails in
// one line saying why; with one, the model predicts there what it predicts on the CPU.
TEST_F(SavedModels, TheDeviceOptionPlacesEveryBuiltInModel) {
  for (const char* name : {"calculator", "sentiment", "attention", "langid", "molecules"}) {
    SCOPED_TRACE(name);
    std::optional<OptionValues> options = small_options(name);
    if (!options) continue;  // its data is absent here
    OptionValues on_gpu = *options;
    on_gpu.set("device", "cuda", "--device");
    if (!cuda_available()) {
      EXPECT_THAT([&] { create_model(on_gpu); },
                  ThrowsMessage<Error>(HasSubstr("CUDA cannot be used")));
      continue;
    }
    std::unique_ptr<Model> cpu = create_model(*options);
    std::unique_ptr<Model> gpu = create_model(on_gpu);
    std::vector<json> examples;
    for (const std::string& line : infer_lines(name)) {
      examples.push_back(cpu->parse_example(line, "t:1"));
    }
    expect_near_json(gpu->predict(examples), cpu->predict(examples), name);
  }
}

TEST_F(SavedModels, EvaluationEncodesTheDataWithTheCheckpointsVocabulary) {
  const std::optional<OptionValues> options = small_options("sentiment");
  if (!options) GTEST_SKIP() << "no SST data";
  std::unique_ptr<Model> trained = create_model(*options);
  const std::string path = (dir_ / "sst.safetensors").string();
  save_model(path, *trained);
  // More training trees would give another vocabulary; the checkpoint's is used.
  std::unique_ptr<Model> evaluated =
      load_model(path, ModelUse::kEvaluate, {{"max_train", 200}}, "sentiment");
  EXPECT_EQ(evaluated->num_examples(train::Split::kTrain), 0u);
  ASSERT_EQ(evaluated->num_examples(train::Split::kDev), trained->num_examples(train::Split::kDev));
  EXPECT_EQ(json(evaluated->examples(train::Split::kDev)),
            json(trained->examples(train::Split::kDev)));
  train::TrainerOptions recipe;
  recipe.set("progress", "off");
  train::Trainer trainer(recipe);
  EXPECT_EQ(trainer.evaluate(*evaluated, train::Split::kDev).to_json(),
            trainer.evaluate(*trained, train::Split::kDev).to_json());
}

TEST_F(SavedModels, BadCheckpointsAreRefusedWithOneLine) {
  OptionValues options = find_model("calculator").default_options();
  options.update({{"hidden", 4}, {"max_train", 8}, {"max_eval", 4}}, "test");
  std::unique_ptr<Model> model = create_model(options);
  const std::string good = (dir_ / "calc.safetensors").string();
  save_model(good, *model);
  EXPECT_THAT([&] { load_model(good, ModelUse::kInfer, json::object(), "sentiment"); },
              ThrowsMessage<Error>(HasSubstr("holds a 'calculator' model, not 'sentiment'")));
  EXPECT_THAT(
      [&] {
        load_model(good, ModelUse::kInfer, {{"hidden", 5}});
      },
      ThrowsMessage<Error>(HasSubstr("trained with hidden=4; hidden=5 would not fit")));

  // The same parameters under hand-written descriptions.
  const std::vector<Parameter> parameters = model->parameters();
  auto write = [&](const std::string& file, const std::string& model_name, const json& config) {
    const std::string path = (dir_ / file).string();
    train::save_checkpoint(path, parameters, nullptr, {}, {model_name, config.dump()});
    return path;
  };
  json stored = json::parse(model->config_json());
  EXPECT_THAT([&] { load_model(write("a", "calculator", json::object()), ModelUse::kInfer); },
              ThrowsMessage<Error>(HasSubstr("holds no model options")));
  EXPECT_THAT(
      [&] {
        load_model(write("b", "nope", {{"model", stored}}), ModelUse::kInfer);
      },
      ThrowsMessage<Error>(HasSubstr("holds a 'nope' model, which is not registered")));
  json huge = stored;
  huge["options"]["hidden"] = std::int64_t(1) << 40;
  EXPECT_THAT(
      [&] {
        load_model(write("c", "calculator", {{"model", huge}}), ModelUse::kInfer);
      },
      ThrowsMessage<Error>(HasSubstr("option 'hidden' must be an integer in [1, 65536]")));
  json missing = stored;
  missing["options"].erase("hidden");
  EXPECT_THAT(
      [&] {
        load_model(write("d", "calculator", {{"model", missing}}), ModelUse::kInfer);
      },
      ThrowsMessage<Error>(HasSubstr("the stored options lack 'hidden'")));
  json unknown = stored;
  unknown["options"]["colour"] = "red";
  EXPECT_THAT(
      [&] {
        load_model(write("e", "calculator", {{"model", unknown}}), ModelUse::kInfer);
      },
      ThrowsMessage<Error>(HasSubstr("have 'colour', which 'calculator' does not know")));
}

TEST_F(SavedModels, AMissingOrBrokenAssetIsNamed) {
  const std::optional<OptionValues> options = small_options("sentiment");
  if (!options) GTEST_SKIP() << "no SST data";
  std::unique_ptr<Model> model = create_model(*options);
  const std::vector<Parameter> parameters = model->parameters();
  json stored = json::parse(model->config_json());
  stored["assets"].erase("vocabulary");
  const std::string path = (dir_ / "s").string();
  train::save_checkpoint(path, parameters, nullptr, {},
                         {"sentiment", json{{"model", stored}}.dump()});
  EXPECT_THAT([&] { load_model(path, ModelUse::kInfer); },
              ThrowsMessage<Error>(HasSubstr("the assets hold no vocabulary")));
}

}  // namespace
}  // namespace weft::models
