// The Weave-style molecule model: molecules as the model sees them (atom and pair counts of
// known SMILES), the duplicate-aware split, ROC-AUC and RMSE against hand-computed values, bad
// records skipped or rejected with file and line, and short ESOL / Tox21 runs whose loss falls.
// Tests that parse SMILES skip in builds without RDKit; those reading data skip without it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "io_test_util.h"
#include "weft/core/error.h"
#include "weft/io/molecule_graph.h"
#include "weft/models/molecule_data.h"
#include "weft/models/molecules.h"
#include "weft/models/registry.h"

namespace weft::models {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

#define WEFT_REQUIRE_RDKIT()                                                               \
  do {                                                                                     \
    if (!io::smiles_parser_available())                                                    \
      GTEST_SKIP() << "built without RDKit (WEFT_WITH_RDKIT); SMILES parsing unavailable"; \
  } while (0)

OptionValues small_options(MoleculeTask task) {
  OptionValues o = find_model("molecules").default_options();
  o.update({{"data_dir", weft::testing::io_data_path("")},
            {"task", std::string(molecule_task_name(task))},
            {"hidden", 16},
            {"pair_hidden", 8},
            {"graph_hidden", 16},
            {"max_train", 96},
            {"max_eval", 32},
            {"seed", 2},
            {"weave_threads", 1}},
           "test");
  return o;
}

train::TrainerOptions quick_recipe(int epochs) {
  train::TrainerOptions t;
  t.set("epochs", epochs);
  t.set("batch_size", 16);
  t.set("seed", 4);
  t.set("optimizer", "adam");
  t.set("learning_rate", 0.003);
  t.set("progress", "off");
  return t;
}

json graph_of(const char* smiles) { return molecule_example(io::parse_smiles(smiles)); }

TEST(MoleculeGraphInput, EthanolAsTheModelSeesIt) {
  WEFT_REQUIRE_RDKIT();
  const json g = graph_of("CCO");
  EXPECT_EQ(g["atoms"].size(), 3u);
  EXPECT_EQ(g["pairs"].size(), 2u);
  EXPECT_EQ(g["atoms"][0].size(), std::size_t(io::kAtomFeatureSize));
  EXPECT_EQ(g["pairs"][0].size(), std::size_t(io::kBondFeatureSize));
  EXPECT_EQ(g["pair_atoms"], json::parse("[[0, 1], [1, 2]]"));
  // Each bond is a pair of both its atoms: the middle carbon has both.
  EXPECT_EQ(g["atom_pairs"], json::parse("[[0], [0, 1], [1]]"));
  EXPECT_EQ(g["pairs"][0], json::parse("[1, 0, 0, 0, 0, 0]"));  // single, not conjugated
}

TEST(MoleculeGraphInput, CountsOfKnownMolecules) {
  WEFT_REQUIRE_RDKIT();
  struct Known {
    const char* smiles;
    std::size_t atoms, pairs;
  };
  for (const Known& k : {Known{"c1ccccc1", 6, 6}, Known{"CC(=O)Oc1ccccc1C(=O)O", 13, 13},
                         Known{"C1CC2CCC1C2", 7, 8}, Known{"[Na+].[Cl-]", 2, 0}}) {
    const json g = graph_of(k.smiles);
    EXPECT_EQ(g["atoms"].size(), k.atoms) << k.smiles;
    EXPECT_EQ(g["pairs"].size(), k.pairs) << k.smiles;
    std::size_t ends = 0;
    for (const json& pairs : g["atom_pairs"]) ends += pairs.size();
    EXPECT_EQ(ends, 2 * k.pairs) << k.smiles;
  }
  // Benzene: every atom is in two aromatic ring bonds.
  const json benzene = graph_of("c1ccccc1");
  for (const json& pairs : benzene["atom_pairs"]) EXPECT_EQ(pairs.size(), 2u);
  EXPECT_EQ(benzene["pairs"][0], json::parse("[0, 0, 0, 1, 1, 1]"));
}

TEST(MoleculeMetrics, RocAucByHand) {
  // Positives 0.35, 0.8 against negatives 0.1, 0.4: 3 of 4 pairs ordered right.
  EXPECT_DOUBLE_EQ(
      roc_auc(std::vector<double>{0.1, 0.4, 0.35, 0.8}, std::vector<std::uint8_t>{0, 0, 1, 1}),
      0.75);
  // A tie between a positive and a negative counts one half: (0.5 + 1 + 1 + 1) / 4.
  EXPECT_DOUBLE_EQ(
      roc_auc(std::vector<double>{0.5, 0.5, 0.2, 0.9}, std::vector<std::uint8_t>{1, 0, 0, 1}),
      0.875);
  EXPECT_DOUBLE_EQ(roc_auc(std::vector<double>{3, 2, 1}, std::vector<std::uint8_t>{1, 0, 0}), 1);
  EXPECT_TRUE(std::isnan(roc_auc(std::vector<double>{1, 2}, std::vector<std::uint8_t>{1, 1})));
  EXPECT_THAT([] { roc_auc(std::vector<double>{1}, std::vector<std::uint8_t>{}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("1 scores but 0 labels")));
}

TEST(MoleculeMetrics, RmseByHand) {
  EXPECT_DOUBLE_EQ(rmse(std::vector<double>{1, 2, 3}, std::vector<double>{1, 2, 5}),
                   std::sqrt(4.0 / 3.0));
  EXPECT_DOUBLE_EQ(rmse(std::vector<double>{-1, 1}, std::vector<double>{1, -1}), 2.0);
}

TEST(MoleculeMetrics, MeanRocAucSkipsMissingLabelsAndOneClassTasks) {
  MoleculeScores scores(2);
  auto record = [](float a, bool a_present, float b) {
    io::MoleculeRecord r;
    r.targets = {a, b};
    r.present = {std::uint8_t(a_present), 1};
    return r;
  };
  // Task 0: labelled 1, 0, 1 (the third example's label is missing) -> scores 0.9 | 0.2, 0.3.
  scores.add(std::vector<double>{0.9, 0.5}, record(1, true, 0));
  scores.add(std::vector<double>{0.3, 0.5}, record(0, true, 0));
  scores.add(std::vector<double>{0.1, 0.5}, record(1, false, 0));
  scores.add(std::vector<double>{0.2, 0.5}, record(1, true, 0));
  EXPECT_EQ(scores.size(), 4u);
  // Task 0: positives 0.9, 0.2 against the negative 0.3 -> 1/2. Task 1 has one class: left out.
  EXPECT_DOUBLE_EQ(scores.mean_roc_auc(), 0.5);
}

TEST(MoleculeSplit, DuplicatesStayTogetherAndSharesAreEightyTenTen) {
  std::vector<io::MoleculeRecord> records(1000);
  for (std::size_t i = 0; i < records.size(); ++i) {
    records[i].smiles = "C" + std::to_string(i % 900);  // 100 SMILES appear twice
  }
  const auto splits = split_by_smiles(records, 7);
  ASSERT_EQ(splits.size(), 3u);
  EXPECT_NEAR(double(splits[0].size()), 800, 2);
  EXPECT_NEAR(double(splits[1].size()), 100, 2);
  EXPECT_EQ(splits[0].size() + splits[1].size() + splits[2].size(), 1000u);
  std::vector<int> where(900, -1);
  for (int s = 0; s < 3; ++s) {
    for (std::size_t id : splits[std::size_t(s)]) {
      int& seen = where[id % 900];
      EXPECT_TRUE(seen == -1 || seen == s) << records[id].smiles << " is in two splits";
      seen = s;
    }
  }
  EXPECT_EQ(split_by_smiles(records, 7), splits);
  EXPECT_NE(split_by_smiles(records, 8)[2], splits[2]);
}

TEST(MoleculeModelTest, ShortEsolRunLossFalls) {
  WEFT_REQUIRE_RDKIT();
  WEFT_REQUIRE_DATA("molecules/delaney-processed.csv");
  MoleculeModel model(small_options(MoleculeTask::kEsol));
  EXPECT_EQ(model.num_examples(train::Split::kTrain), 96u);
  EXPECT_EQ(model.task_names().size(), 1u);
  EXPECT_TRUE(model.skipped_records().empty());
  train::Trainer trainer(quick_recipe(6));
  const train::TrainResult result = trainer.fit(model);
  ASSERT_EQ(result.epochs.size(), 6u);
  EXPECT_LT(result.epochs.back().train.value("loss"),
            0.7 * result.epochs.front().train.value("loss"));
  const train::MetricSet dev = trainer.evaluate(model, train::Split::kDev);
  EXPECT_GT(dev.value("rmse"), 0.1);
  EXPECT_LT(dev.value("rmse"), 3.0);  // the targets' own deviation is about 2.1
}

TEST(MoleculeModelTest, Tox21MaskedLossAndRocAuc) {
  WEFT_REQUIRE_RDKIT();
  WEFT_REQUIRE_DATA("molecules/tox21.csv");
  MoleculeModel model(small_options(MoleculeTask::kTox21));
  ASSERT_EQ(model.task_names().size(), 12u);
  train::Trainer trainer(quick_recipe(2));
  const train::TrainResult result = trainer.fit(model);
  EXPECT_LT(result.epochs.back().train.value("loss"), result.epochs.front().train.value("loss"));
  const train::MetricSet test = trainer.evaluate(model, train::Split::kTest);
  EXPECT_GE(test.value("roc_auc"), 0.0);
  EXPECT_LE(test.value("roc_auc"), 1.0);
  const json p = model.predict(std::vector<json>{model.parse_example("CCO", "t:1")})[0];
  EXPECT_EQ(p.size(), 12u);
  EXPECT_GT(p["SR-p53"].get<double>(), 0.0);
  EXPECT_LT(p["SR-p53"].get<double>(), 1.0);
}

TEST(MoleculeModelTest, SplitFiguresDoNotDependOnHowTheSplitIsBatched) {
  WEFT_REQUIRE_RDKIT();
  WEFT_REQUIRE_DATA("molecules/delaney-processed.csv");
  MoleculeModel model(small_options(MoleculeTask::kEsol));
  double figures[3];
  const std::size_t batch_sizes[3] = {5, 32, 7};
  for (int k = 0; k < 3; ++k) {
    train::TrainerOptions t = quick_recipe(1);
    t.set("batch_size", batch_sizes[k]);
    t.set("prepare_ahead", k != 2);
    figures[k] = train::Trainer(t).evaluate(model, train::Split::kDev).value("rmse");
  }
  EXPECT_GT(figures[0], 0.0);
  // float32 sums group differently in batches of other sizes: equal up to rounding.
  EXPECT_NEAR(figures[0], figures[1], 1e-6 * figures[0]);
  EXPECT_NEAR(figures[0], figures[2], 1e-6 * figures[0]);
  // The scores of the whole split, in any order: the trainer sorts them by example.
  const auto& records = model.records(train::Split::kDev);
  std::vector<train::ExampleScores> scores;
  for (std::size_t i = records.size(); i-- > 0;) scores.push_back({i, {records[i].targets[0]}});
  std::sort(scores.begin(), scores.end(),
            [](const auto& a, const auto& b) { return a.example < b.example; });
  train::MetricSet perfect;
  model.finish_split(train::Split::kDev, scores, perfect);
  EXPECT_NEAR(perfect.value("rmse"), 0.0, 1e-9);
}

TEST(MoleculeModelTest, BatchedPredictionsEqualOneAtATime) {
  WEFT_REQUIRE_RDKIT();
  WEFT_REQUIRE_DATA("molecules/delaney-processed.csv");
  OptionValues o = small_options(MoleculeTask::kEsol);
  o.update({{"max_train", 16}, {"max_eval", 6}}, "test");
  MoleculeModel model(o);
  const auto examples = model.examples(train::Split::kTest);
  const std::vector<json> together = model.predict(examples);
  ASSERT_EQ(together.size(), examples.size());
  for (std::size_t i = 0; i < examples.size(); ++i) {
    const json alone = model.predict(examples.subspan(i, 1))[0];
    EXPECT_NEAR(alone["log_solubility"].get<double>(), together[i]["log_solubility"].get<double>(),
                1e-4);
  }
}

TEST(MoleculeModelTest, PairUpdateIgnoresTheOrderOfItsAtoms) {
  WEFT_REQUIRE_RDKIT();
  WEFT_REQUIRE_DATA("molecules/delaney-processed.csv");
  OptionValues o = small_options(MoleculeTask::kEsol);
  o.update({{"max_train", 8}, {"max_eval", 2}}, "test");
  MoleculeModel model(o);
  json forward = graph_of("CC(=O)Oc1ccccc1C(=O)O");
  json reversed = forward;
  for (json& ends : reversed["pair_atoms"]) ends = json::array({ends[1], ends[0]});
  ASSERT_NE(forward, reversed);
  const std::vector<json> p = model.predict(std::vector<json>{forward, reversed});
  EXPECT_NEAR(p[0]["log_solubility"].get<double>(), p[1]["log_solubility"].get<double>(), 1e-5);
  // Moving a bond to another atom does change the prediction.
  json moved = forward;
  moved["pair_atoms"][0] = json::array({0, 5});
  const json q = model.predict(std::vector<json>{moved})[0];
  EXPECT_GT(std::abs(q["log_solubility"].get<double>() - p[0]["log_solubility"].get<double>()),
            1e-6);
}

class MoleculeBadRecords : public weft::testing::IoTempDir {
 protected:
  OptionValues options(io::OnBadRow mode) {
    std::filesystem::create_directories(dir_ / "molecules");
    write_file("molecules/tox21.csv",
               "NR-AR,NR-AR-LBD,NR-AhR,NR-Aromatase,NR-ER,NR-ER-LBD,NR-PPAR-gamma,SR-ARE,"
               "SR-ATAD5,SR-HSE,SR-MMP,SR-p53,mol_id,smiles\n"
               "0,0,1,,,0,0,1,0,0,0,0,T1,CCO\n"
               "0,0,1,,,0,0,1,0,0,0,0,T2,C1CC\n"
               ",,,,,,,,,,,,T3,CCN\n"
               "1,0,1,,,0,0,1,0,0,0,0,T4,c1ccccc1\n");
    OptionValues o = small_options(MoleculeTask::kTox21);
    o.update({{"data_dir", dir_.string()},
              {"bad_records", mode == io::OnBadRow::kReject ? "reject" : "skip"}},
             "test");
    return o;
  }
};

TEST_F(MoleculeBadRecords, SkippedWithFileAndLine) {
  WEFT_REQUIRE_RDKIT();
  MoleculeModel model(options(io::OnBadRow::kSkip));
  const std::vector<std::string>& skipped = model.skipped_records();
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_THAT(skipped[0], HasSubstr("tox21.csv:3: [smiles] cannot parse 'C1CC'"));
  EXPECT_THAT(skipped[1], HasSubstr("tox21.csv:4: no labels"));
  EXPECT_EQ(model.num_examples(train::Split::kTrain) + model.num_examples(train::Split::kDev) +
                model.num_examples(train::Split::kTest),
            2u);
}

TEST_F(MoleculeBadRecords, RejectedWithFileAndLine) {
  WEFT_REQUIRE_RDKIT();
  EXPECT_THAT([&] { MoleculeModel model(options(io::OnBadRow::kReject)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("tox21.csv:3: [smiles] cannot parse")));
}

}  // namespace
}  // namespace weft::models
