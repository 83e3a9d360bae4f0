// Batch invariance of every registered model (set_batch_invariant, weft/backend/cpu.h), a seeded
// property: in the mode, an example's predictions (values, classes, decoded tokens and scores)
// are bit-identical alone and at a random position among up to 256 random companions, on 1 and
// 2 threads; the decoding models so for greedy and beam search alike. And evaluation's figures
// (loss included) are bit-identical at any batch size.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "io_test_util.h"
#include "op_test_util.h"
#include "weft/backend/cpu.h"
#include "weft/core/rng.h"
#include "weft/io/molecule_graph.h"
#include "weft/models/decoding.h"
#include "weft/models/registry.h"
#include "weft/train/trainer.h"

namespace weft::models {
namespace {

using nlohmann::json;

// Small options of a built-in model, or nothing when its data is absent here.
std::optional<OptionValues> small_model(const ModelEntry& entry) {
  const std::filesystem::path data = weft::testing::io_data_dir();
  const std::map<std::string, std::pair<std::string, json>> small = {
      {"calculator", {"", {{"hidden", 8}}}},
      {"sentiment",
       {"sst/dev.txt", {{"hidden", 8}, {"no_embeddings", true}, {"embedding_dim", 6}}}},
      {"attention",
       {"sst/dev.txt", {{"hidden", 8}, {"no_embeddings", true}, {"embedding_dim", 6}}}},
      {"langid",
       {"tatoeba-langid/testset.csv", {{"hidden", 8}, {"char_hidden", 8}, {"char_embedding", 4}}}},
      {"molecules",
       {"molecules/delaney-processed.csv",
        {{"hidden", 8}, {"pair_hidden", 4}, {"graph_hidden", 8}, {"task", "esol"}}}},
      {"tree2seq", {"", {{"hidden", 6}, {"max_depth", 3}}}},
      {"seq2tree", {"", {{"hidden", 6}, {"max_depth", 3}}}},
  };
  const auto found = small.find(entry.name);
  if (found == small.end()) return std::nullopt;  // a model a test registered
  const auto& [needs, values] = found->second;
  if (!needs.empty() && !std::filesystem::exists(data / needs)) return std::nullopt;
  if (entry.name == "molecules" && !io::smiles_parser_available()) return std::nullopt;
  OptionValues o = entry.default_options();
  o.update({{"data_dir", data.string()}, {"max_train", 40}, {"max_eval", 40}, {"seed", 5}}, "test");
  o.update(values, "test");
  return o;
}

// Weights of a larger scale than the initialisers', so that every path carries values that
// vary and a decoder's choices differ from example to example.
void scramble(Model& model) {
  std::uint64_t seed = 300;
  for (Parameter p : model.parameters())
    p.value() = weft::testing::random_tensor(p.value().shape(), seed++, -0.8f, 0.8f);
}

// What the model answers for its examples: predict(), or each decoding of `beams`.
using Answer = std::function<std::vector<json>(std::span<const json>)>;

std::vector<std::pair<std::string, Answer>> answers(Model& model) {
  std::vector<std::pair<std::string, Answer>> out;
  DecodingModel* decoder = model.decoding();
  if (!decoder) {
    out.emplace_back("predict", [&model](std::span<const json> x) { return model.predict(x); });
    return out;
  }
  for (int beam : {0, 3}) {
    DecodeSettings settings = decoder->decode_settings();
    settings.beam = beam;
    out.emplace_back(beam == 0 ? "greedy" : "beam 3", [decoder, settings](std::span<const json> x) {
      return decoder->decode(x, settings);
    });
  }
  return out;
}

// check(model) for each registered model small_model can build here, scrambled, under its name;
// returns how many.
template <typename Check>
int for_each_small_model(Check check) {
  int checked = 0;
  for (const ModelEntry* entry : registered_models()) {
    const std::optional<OptionValues> options = small_model(*entry);
    if (!options) continue;
    SCOPED_TRACE(entry->name);
    std::unique_ptr<Model> model = create_model(*options);
    scramble(*model);
    check(*model);
    ++checked;
  }
  return checked;
}

class BatchInvariantModels : public ::testing::Test {
 protected:
  void SetUp() override {
    threads_ = num_threads();
    invariant_ = batch_invariant();
    set_batch_invariant(true);
  }
  void TearDown() override {
    set_batch_invariant(invariant_);
    set_num_threads(threads_);
  }
  int threads_ = 1;
  bool invariant_ = false;
};

TEST_F(BatchInvariantModels, EveryModelAnswersAnExampleAloneAsInAnyBatch) {
  const int models_checked = for_each_small_model([](Model& model) {
    std::vector<json> pool;
    for (train::Split split : {train::Split::kTrain, train::Split::kTest})
      for (const json& e : model.examples(split)) pool.push_back(e);
    ASSERT_GT(pool.size(), 4u);
    Rng rng(17);
    for (const auto& [how, answer] : answers(model)) {
      SCOPED_TRACE(how);
      for (int trial = 0; trial < 3; ++trial) {
        const json& example = pool[rng.next_u64() % pool.size()];
        set_num_threads(1);
        const json alone = answer(std::span(&example, 1)).at(0);
        const std::size_t companions = 1 + rng.next_u64() % 256;
        std::vector<json> batch;
        for (std::size_t i = 0; i < companions; ++i)
          batch.push_back(pool[rng.next_u64() % pool.size()]);
        const std::size_t position = rng.next_u64() % (companions + 1);
        batch.insert(batch.begin() + std::ptrdiff_t(position), example);
        for (int threads : {1, 2}) {
          set_num_threads(threads);
          EXPECT_EQ(answer(batch).at(position), alone)
              << "position " << position << " of " << batch.size() << ", " << threads
              << " thread(s); example " << example.dump();
        }
      }
    }
  });
  EXPECT_GE(models_checked, 3);  // calculator, tree2seq and seq2tree need no data
}

// Every figure of `split` evaluated in batches of `batch_size`, by name.
std::map<std::string, double> evaluated(Model& model, train::Split split, int batch_size) {
  train::TrainerOptions options;
  options.set("batch_size", batch_size);
  options.set("progress", "off");
  train::Trainer trainer(options);
  const train::MetricSet figures = trainer.evaluate(model, split);
  std::map<std::string, double> out;
  for (const std::string& name : figures.names()) out[name] = figures.value(name);
  return out;
}

TEST_F(BatchInvariantModels, EveryModelEvaluatesToTheSameFiguresAtAnyBatchSize) {
  const int models_checked = for_each_small_model([](Model& model) {
    const train::Split split = train::Split::kTest;
    ASSERT_GT(model.examples(split).size(), 7u);
    const std::map<std::string, double> alone = evaluated(model, split, 1);
    ASSERT_TRUE(alone.contains("loss"));
    for (int batch_size : {7, 64}) {
      const std::map<std::string, double> batched = evaluated(model, split, batch_size);
      ASSERT_EQ(batched.size(), alone.size());
      for (const auto& [name, value] : alone)  // exact: the same bits
        EXPECT_EQ(batched.at(name), value) << name << " in batches of " << batch_size;
    }
  });
  EXPECT_GE(models_checked, 3);
}

}  // namespace
}  // namespace weft::models
