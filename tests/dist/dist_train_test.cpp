// Data-parallel training against one process, run by ctest under `mpirun -np 2`: every rank
// trains the same model both ways (alone, through a single-process communicator, and together,
// through MPI's world) and checks that the losses step by step and the parameters afterwards
// agree within float tolerance (the summation order differs), for the calculator and a slice of
// SST; that sharded evaluation equals whole evaluation (RMSE included); that a run resumed with
// another number of processes continues the same run; and that ranks disagreeing on the model
// are stopped at the start with the rank named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "io_test_util.h"
#include "weft/core/error.h"
#include "weft/dist/communicator.h"
#include "weft/io/molecule_graph.h"
#include "weft/models/registry.h"

namespace weft {
namespace {

using models::OptionValues;
using ::testing::HasSubstr;

#define WEFT_REQUIRE_RANKS()                                                               \
  do {                                                                                     \
    if (dist::world().size() < 2)                                                          \
      GTEST_SKIP() << "one process: run under mpirun -np 2 (ctest does) to compare ranks"; \
  } while (0)

struct TrainedRun {
  std::vector<double> losses;  // per step
  std::vector<std::vector<float>> parameters;
  train::MetricSet test;
  std::int64_t all_reduce_steps = 0;  // summed over the epochs
};

TrainedRun train_with(const OptionValues& options, train::TrainerOptions recipe,
                      dist::Communicator* comm) {
  std::unique_ptr<models::Model> model = models::create_model(options);
  TrainedRun run;
  recipe.set("progress", "off");
  recipe.communicator = comm;
  recipe.on_step = [&](std::int64_t, double loss, double) { run.losses.push_back(loss); };
  train::Trainer trainer(recipe);
  for (const train::EpochRecord& epoch : trainer.fit(*model).epochs) {
    run.all_reduce_steps += epoch.all_reduce_steps;
    if (epoch.all_reduce_steps > 0) {
      EXPECT_LE(epoch.all_reduce_seconds, epoch.seconds);
    }
  }
  for (const Parameter& p : model->parameters())
    run.parameters.push_back(p.value().to_float_vector());
  run.test = trainer.evaluate(*model, train::Split::kTest);
  return run;
}

void expect_same_run(const TrainedRun& alone, const TrainedRun& together, double tolerance) {
  ASSERT_EQ(alone.losses.size(), together.losses.size());
  for (std::size_t s = 0; s < alone.losses.size(); ++s) {
    EXPECT_NEAR(alone.losses[s], together.losses[s], tolerance * (1 + std::abs(alone.losses[s])))
        << "step " << s + 1;
  }
  ASSERT_EQ(alone.parameters.size(), together.parameters.size());
  for (std::size_t k = 0; k < alone.parameters.size(); ++k) {
    ASSERT_EQ(alone.parameters[k].size(), together.parameters[k].size());
    for (std::size_t i = 0; i < alone.parameters[k].size(); ++i) {
      ASSERT_NEAR(alone.parameters[k][i], together.parameters[k][i], tolerance) << k << "/" << i;
    }
  }
  EXPECT_EQ(alone.test.names(), together.test.names());
  for (const std::string& name : alone.test.names()) {
    EXPECT_NEAR(alone.test.value(name), together.test.value(name), tolerance) << name;
  }
}

OptionValues calculator_options() {
  OptionValues o = models::find_model("calculator").default_options();
  o.update({{"hidden", 12}, {"max_train", 150}, {"max_eval", 40}, {"weave_threads", 1}}, "test");
  return o;
}

train::TrainerOptions recipe_of(const OptionValues& o, int epochs, std::size_t batch) {
  train::TrainerOptions t = models::find_model(o.owner()).training_options(o);
  t.set("epochs", epochs);
  t.set("batch_size", batch);
  t.set("seed", 11);
  return t;
}

TEST(DataParallel, CalculatorMatchesOneProcess) {
  WEFT_REQUIRE_RANKS();
  const OptionValues o = calculator_options();
  // 150 examples in batches of 16: the last batch (6) leaves a shard of 3 per rank.
  const train::TrainerOptions recipe = recipe_of(o, 2, 16);
  const auto alone = dist::single_process();
  const TrainedRun one = train_with(o, recipe, alone.get());
  const TrainedRun two = train_with(o, recipe, &dist::world());
  expect_same_run(one, two, 2e-5);
  // Only the run with company spends time reducing, once per step.
  EXPECT_EQ(one.all_reduce_steps, 0);
  EXPECT_EQ(two.all_reduce_steps, std::int64_t(two.losses.size()));
}

TEST(DataParallel, SentimentSliceMatchesOneProcess) {
  WEFT_REQUIRE_RANKS();
  WEFT_REQUIRE_DATA("sst/dev.txt");
  OptionValues o = models::find_model("sentiment").default_options();
  o.update({{"data_dir", weft::testing::io_data_path("")},
            {"no_embeddings", true},
            {"embedding_dim", 8},
            {"hidden", 8},
            {"dropout", 0},  // dropout masks are drawn per rank
            {"recurrent_dropout", 0},
            {"max_train", 60},
            {"max_eval", 20},
            {"weave_threads", 1}},
           "test");
  const train::TrainerOptions recipe = recipe_of(o, 1, 10);
  const auto alone = dist::single_process();
  const TrainedRun one = train_with(o, recipe, alone.get());
  const TrainedRun two = train_with(o, recipe, &dist::world());
  expect_same_run(one, two, 2e-5);
  // Only the run with company spends time reducing, once per step.
  EXPECT_EQ(one.all_reduce_steps, 0);
  EXPECT_EQ(two.all_reduce_steps, std::int64_t(two.losses.size()));
}

TEST(DataParallel, ShardedSplitFiguresEqualWholeOnes) {
  WEFT_REQUIRE_RANKS();
  if (!io::smiles_parser_available()) GTEST_SKIP() << "built without RDKit";
  WEFT_REQUIRE_DATA("molecules/delaney-processed.csv");
  OptionValues o = models::find_model("molecules").default_options();
  o.update({{"data_dir", weft::testing::io_data_path("")},
            {"hidden", 8},
            {"pair_hidden", 4},
            {"graph_hidden", 8},
            {"max_train", 40},
            {"max_eval", 25},
            {"weave_threads", 1}},
           "test");
  std::unique_ptr<models::Model> model = models::create_model(o);
  train::TrainerOptions t;
  t.set("progress", "off");
  t.set("batch_size", 4);
  const double whole = train::Trainer(t).evaluate(*model, train::Split::kDev).value("rmse");
  t.communicator = &dist::world();
  const double sharded = train::Trainer(t).evaluate(*model, train::Split::kDev).value("rmse");
  EXPECT_GT(whole, 0);
  // Equal up to float32 rounding: a shard's batches have other row counts, whose products
  // may go to another GEMM provider (gemm_selection.h), which rounds differently.
  EXPECT_NEAR(whole, sharded, 1e-6 * whole);
}

TEST(DataParallel, ResumingWithAnotherNumberOfProcessesContinuesTheRun) {
  WEFT_REQUIRE_RANKS();
  dist::Communicator& world = dist::world();
  const OptionValues o = calculator_options();
  const std::string dir = (std::filesystem::temp_directory_path() / "weft_dist_resume").string();
  if (world.is_root()) std::filesystem::create_directories(dir);
  world.barrier();
  const std::string checkpoint = dir + "/epoch1.safetensors";
  const auto alone = dist::single_process();

  // Epoch 1 on every rank together (rank 0 writes the checkpoint)...
  train::TrainerOptions first = recipe_of(o, 1, 16);
  first.set("checkpoint", checkpoint);
  train_with(o, first, &world);
  world.barrier();
  // ... epoch 2 in one process, against both epochs in one process.
  train::TrainerOptions second = recipe_of(o, 2, 16);
  second.set("resume", checkpoint);
  TrainedRun resumed = train_with(o, second, alone.get());
  TrainedRun whole = train_with(o, recipe_of(o, 2, 16), alone.get());
  whole.losses.erase(
      whole.losses.begin(),
      whole.losses.begin() + std::ptrdiff_t(whole.losses.size() - resumed.losses.size()));
  expect_same_run(whole, resumed, 2e-5);
  world.barrier();
  if (world.is_root()) std::filesystem::remove_all(dir);
}

TEST(DataParallel, RanksThatDisagreeAreStoppedAtTheStart) {
  WEFT_REQUIRE_RANKS();
  dist::Communicator& world = dist::world();
  OptionValues o = calculator_options();
  o.set("hidden", world.rank() == 0 ? 12 : 13, "test");
  // The message names the option and both values, then what follows from it (the shapes).
  EXPECT_THAT([&] { train_with(o, recipe_of(o, 1, 16), &world); },
              ::testing::ThrowsMessage<Error>(HasSubstr(
                  "rank 1 differs from rank 0: config.options.hidden: 12 on rank 0, 13 on rank 1; "
                  "parameters[")));
  // A trainer option alike.
  train::TrainerOptions options = recipe_of(calculator_options(), 1, 16);
  options.set("seed", world.rank() == 0 ? 5 : 6);
  EXPECT_THAT([&] { train_with(calculator_options(), options, &world); },
              ::testing::ThrowsMessage<Error>(HasSubstr("trainer.seed: 5 on rank 0, 6 on rank 1")));
}

TEST(DataParallel, CollectivesSumGatherAndBroadcast) {
  WEFT_REQUIRE_RANKS();
  dist::Communicator& world = dist::world();
  const int k = world.size();
  EXPECT_EQ(world.local_size(), k);  // ctest starts every rank on this machine
  EXPECT_EQ(dist::single_process()->local_size(), 1);
  std::vector<float> values{float(world.rank()), 1.f};
  world.all_reduce_sum(std::span<float>(values));
  EXPECT_EQ(values[0], float(k * (k - 1) / 2));
  EXPECT_EQ(values[1], float(k));
  const std::vector<std::string> all =
      world.all_gather(std::string(std::size_t(world.rank()), 'x'));
  ASSERT_EQ(all.size(), std::size_t(k));
  for (int r = 0; r < k; ++r) EXPECT_EQ(all[std::size_t(r)], std::string(std::size_t(r), 'x'));
  // Buckets smaller than a buffer, and buffers of every size.
  std::vector<std::vector<float>> buffers{{1, 2, 3}, {4}, std::vector<float>(1000, 0.5f)};
  std::vector<std::span<float>> views(buffers.begin(), buffers.end());
  dist::all_reduce_buckets(world, views, 8);
  EXPECT_EQ(buffers[0][2], 3.f * float(k));
  EXPECT_EQ(buffers[2][999], 0.5f * float(k));
  std::int64_t token = world.rank() == 0 ? 42 : -1;
  world.broadcast(std::as_writable_bytes(std::span(&token, 1)), 0);
  EXPECT_EQ(token, 42);
}

// A table nonzero in a few rows on each rank (different rows per rank, some shared) sums to what
// the dense all-reduce gives, sending only the union of the rows; a mostly dense table goes whole.
TEST(DataParallel, SparseRowSumEqualsTheDenseSum) {
  WEFT_REQUIRE_RANKS();
  dist::Communicator& world = dist::world();
  const std::size_t rows = 40, cols = 3;
  const float scale = 0.25f * float(world.rank() + 1);
  std::vector<float> table(rows * cols, 0.f);
  for (std::size_t r :
       {std::size_t(world.rank()) * 7 + 1, std::size_t(5), rows - 1 - std::size_t(world.rank())}) {
    for (std::size_t c = 0; c < cols; ++c)
      table[r * cols + c] = float(r) + 0.5f * float(c) + float(world.rank());
  }
  std::vector<float> dense = table;
  for (float& x : dense) x *= scale;
  world.all_reduce_sum(std::span<float>(dense));
  const std::size_t sent = dist::all_reduce_sparse_rows(world, table, cols, scale);
  EXPECT_LT(sent, rows / 2);
  EXPECT_GE(sent, 3u);
  EXPECT_EQ(table, dense);

  std::vector<float> full(rows * cols, 1.f + float(world.rank()));
  dense = full;
  world.all_reduce_sum(std::span<float>(dense));
  EXPECT_EQ(dist::all_reduce_sparse_rows(world, full, cols), rows);
  EXPECT_EQ(full, dense);
  EXPECT_THAT([&] { dist::all_reduce_sparse_rows(world, full, 7); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("are not rows of 7")));
}

}  // namespace
}  // namespace weft
