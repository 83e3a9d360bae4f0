// The Trainer's options are declared once: an option added to the schema here, in this file
// only, shows in the command line's flags and --help (the binding `weft train` uses), is taken
// as a Python keyword (TrainerOptions::update, which weft.train.Trainer and Model.fit call), is
// set by a model's recipe and is recorded in the Trainer's checkpoints. Bad values fail with the
// same message whichever way they come in.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "../tools/weft/option_flags.h"
#include "weft/core/error.h"
#include "weft/models/registry.h"
#include "weft/train/checkpoint.h"
#include "weft/train/trainer.h"

namespace weft {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// The Trainer's schema and one option more, which nothing in the library knows.
OptionValues extended_options() {
  std::vector<OptionSpec> schema = train::trainer_option_schema();
  schema.push_back({.name = "label_smoothing",
                    .kind = OptionKind::kFloat,
                    .default_value = 0.0,
                    .help = "Mix this much of the uniform distribution into the targets",
                    .role = OptionRole::kTraining,
                    .min = 0,
                    .max = 0.5});
  return OptionValues("trainer", std::move(schema));
}

// What a bad label_smoothing says, after "[trainer] <source>: ".
constexpr const char* kTooLarge = "option 'label_smoothing' must be a finite number in [0, 0.5]";

TEST(TrainerOptionSchema, ANewOptionIsAFlagWithItsHelpAndItsValueIsChecked) {
  CLI::App app("weft train toy");
  tool::OptionFlags flags;
  flags.bind(app, train::TrainerOptions(extended_options()).values);
  const std::string help = app.help();
  EXPECT_THAT(help, HasSubstr("--label-smoothing"));
  EXPECT_THAT(help, HasSubstr("Mix this much of the uniform distribution into the targets"));
  EXPECT_THAT(help, HasSubstr("--average-weights"));  // and every option of the Trainer's
  for (const OptionSpec& spec : train::trainer_option_schema())
    EXPECT_THAT(help, HasSubstr(tool::flag_name(spec.name))) << spec.name;

  app.parse("--label-smoothing 0.25 --epochs 3", false);
  EXPECT_EQ(flags.given(), (json{{"label_smoothing", 0.25}, {"epochs", 3}}));
  app.clear();
  app.parse("--label-smoothing 0.75", false);
  EXPECT_THAT([&] { flags.given(); },
              ThrowsMessage<Error>(HasSubstr(std::string("--label-smoothing: ") + kTooLarge)));
}

TEST(TrainerOptionSchema, ANewOptionIsAKeywordCheckedAsTheFlagIs) {
  train::TrainerOptions options(extended_options());
  options.update({{"label_smoothing", 0.125}, {"epochs", 2}}, "weft.train.Trainer");
  EXPECT_EQ(options.values.number("label_smoothing"), 0.125);
  EXPECT_THAT(
      [&] {
        options.update({{"label_smoothing", 0.75}}, "weft.train.Trainer");
      },
      ThrowsMessage<Error>(HasSubstr(std::string("weft.train.Trainer: ") + kTooLarge)));
  EXPECT_THAT(
      [&] {
        options.update({{"label_smothing", 0.1}}, "weft.train.Trainer");
      },
      ThrowsMessage<Error>(HasSubstr("no option 'label_smothing' (known: epochs")));
  // An unknown progress mode fails from a keyword as from the flag (it once became "auto").
  EXPECT_THAT(
      [&] {
        options.update({{"progress", "sometimes"}}, "weft.train.Trainer");
      },
      ThrowsMessage<Error>(HasSubstr("option 'progress' must be one of auto, bar, lines, "
                                     "off, got \"sometimes\"")));
  CLI::App app;
  tool::OptionFlags flags;
  flags.bind(app, options.values);
  app.parse("--progress sometimes", false);
  EXPECT_THAT([&] { flags.given(); },
              ThrowsMessage<Error>(HasSubstr("option 'progress' must be one of auto, bar, lines, "
                                             "off, got \"sometimes\"")));
}

models::ModelEntry toy_entry(json recipe) {
  models::ModelEntry entry;
  entry.name = "toy";
  entry.recipe = [recipe](const OptionValues&) { return recipe; };
  return entry;
}

TEST(TrainerOptionSchema, ARecipeSetsANewOption) {
  const models::ModelEntry entry = toy_entry({{"label_smoothing", 0.3}, {"epochs", 2}});
  const train::TrainerOptions options =
      entry.training_options(entry.default_options(), train::TrainerOptions(extended_options()));
  EXPECT_EQ(options.values.number("label_smoothing"), 0.3);
  EXPECT_EQ(options.values.integer("epochs"), 2);
  EXPECT_EQ(options.values.integer("seed"), 1);  // the model's seed
  const models::ModelEntry bad = toy_entry({{"label_smoothing", 0.75}});
  EXPECT_THAT(
      [&] {
        bad.training_options(bad.default_options(), train::TrainerOptions(extended_options()));
      },
      ThrowsMessage<Error>(HasSubstr(std::string("the recipe of model 'toy': ") + kTooLarge)));
}

// One parameter, pushed by a constant gradient: a model for the Trainer to checkpoint.
class Pushed : public train::TrainableModel {
 public:
  std::vector<Parameter> parameters() override { return {p_}; }
  std::size_t num_examples(train::Split split) const override {
    return split == train::Split::kTrain ? 4 : 0;
  }
  train::BatchFigures train_batch(const train::Batch& batch, Rng&) override {
    p_.grad() = Tensor::full({1}, -1.0f);
    return {1.0, std::int64_t(batch.example_ids.size()), {}};
  }
  train::BatchFigures eval_batch(const train::Batch& batch) override {
    return {0.0, std::int64_t(batch.example_ids.size()), {}};
  }

 private:
  Parameter p_{"p", Tensor::zeros({1})};
};

TEST(TrainerOptionSchema, CheckpointsRecordANewOption) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("weft_option_schema_" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  train::TrainerOptions options(extended_options());
  options.update({{"label_smoothing", 0.375}, {"epochs", 1}, {"progress", "off"}}, "test");
  options.set("checkpoint", path);
  Pushed model;
  train::Trainer(options).fit(model);
  const json config = json::parse(train::read_checkpoint_info(path).info.config_json);
  std::filesystem::remove(path);
  EXPECT_EQ(config["trainer"]["label_smoothing"], 0.375);
  EXPECT_EQ(config["trainer"]["epochs"], 1);
  EXPECT_EQ(config["trainer"], options.recorded());
  // Every training option is recorded; where this process writes and how it reports are not.
  for (const OptionSpec& spec : train::trainer_option_schema())
    EXPECT_EQ(config["trainer"].contains(spec.name), spec.role != OptionRole::kRuntime)
        << spec.name;
}

}  // namespace
}  // namespace weft
