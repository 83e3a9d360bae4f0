// Checkpoints: the round trip of parameters, optimizer state, training state and metadata;
// resuming equals not stopping (bitwise); a failed save keeps the previous file; truncated,
// foreign and mismatched files are rejected with messages naming what differs. The test
// WritesAFileForPython is driven by tests/check_checkpoint.py (a ctest), which reads the file
// with the standard library and NumPy.
#include "weft/train/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "op_test_util.h"
#include "weft/io/safetensors.h"
#include "weft/train/schedule.h"

namespace weft::testing {
namespace {

namespace fs = std::filesystem;
using train::Checkpoint;
using train::OptimizerKind;
using train::OptimizerSpec;
using train::TrainingState;

class TrainCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("weft_checkpoint_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::size_t files_in_dir() const {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir_)) ++n;
    return n;
  }

  fs::path dir_;
};

// y = x·W + b fitted by least squares on 16 fixed rows, 4 rows drawn by the Rng per step.
struct Regression {
  Parameter w, b, frozen;
  explicit Regression(std::uint64_t seed)
      : w("reg/w", random_tensor({3, 2}, seed)),
        b("reg/b", random_tensor({2}, seed + 1)),
        frozen("reg/scale", Tensor::full({1}, 2.0f), /*trainable=*/false) {}
  std::vector<Parameter> parameters() const { return {w, b, frozen}; }
};

OptimizerSpec adam_spec() {
  OptimizerSpec spec;
  spec.kind = OptimizerKind::kAdam;
  spec.weight_decay = 0.01;
  spec.weight_decay_mode = train::WeightDecayMode::kDecoupled;
  return spec;
}

train::LrSchedule cosine_schedule() {
  train::LrSchedule s;
  s.kind = train::ScheduleKind::kCosine;
  s.learning_rate = 0.05;
  s.warmup_steps = 2;
  s.total_steps = 12;
  return s;
}

void train_steps(Regression& model, train::Optimizer& optimizer, Rng& rng, std::int64_t from,
                 std::int64_t to) {
  const std::vector<float> xs = random_tensor({16, 3}, 7).to_float_vector();
  const std::vector<float> ys = random_tensor({16, 2}, 8).to_float_vector();
  Tape tape;
  for (std::int64_t step = from; step < to; ++step) {
    std::vector<float> xb, yb;
    for (int i = 0; i < 4; ++i) {
      const std::size_t row = std::size_t(rng.below(16));
      xb.insert(xb.end(), xs.begin() + std::ptrdiff_t(3 * row),
                xs.begin() + std::ptrdiff_t(3 * row + 3));
      yb.insert(yb.end(), ys.begin() + std::ptrdiff_t(2 * row),
                ys.begin() + std::ptrdiff_t(2 * row + 2));
    }
    tape.clear();
    TapeScope scope(tape);
    optimizer.zero_grad();
    Var pred = linear(tape.constant(Tensor::from_vector({4, 3}, xb)), model.w, model.b);
    Var loss = l2_loss(pred - tape.constant(Tensor::from_vector({4, 2}, yb))) / 4.0f;
    tape.backward(loss);
    optimizer.step(cosine_schedule().at(step));
  }
}

TEST_F(TrainCheckpoint, RoundTripRestoresEverything) {
  Regression model(1);
  auto optimizer = train::make_optimizer(adam_spec(), model.parameters());
  Rng rng(3);
  train_steps(model, *optimizer, rng, 0, 3);
  const TrainingState state{2, 3, rng.state(), 0.875, 1, 0.25};
  const io::TensorMap extra{{"best/reg/w", Tensor::full({3, 2}, 1.5f)}};
  train::save_checkpoint(path("c.safetensors"), model.parameters(), optimizer.get(), state,
                         {"regression", R"({"hidden": 3})"}, extra);
  EXPECT_EQ(files_in_dir(), 1u);

  Regression fresh(100);
  fresh.frozen.value() = Tensor::full({1}, -1.0f);
  auto fresh_optimizer = train::make_optimizer(adam_spec(), fresh.parameters());
  const Checkpoint c =
      train::load_checkpoint(path("c.safetensors"), fresh.parameters(), fresh_optimizer.get());
  EXPECT_EQ(fresh.w.value().to_float_vector(), model.w.value().to_float_vector());
  EXPECT_EQ(fresh.b.value().to_float_vector(), model.b.value().to_float_vector());
  EXPECT_EQ(fresh.frozen.value().to_float_vector(), std::vector<float>{2.0f});  // non-trainable too
  EXPECT_EQ(fresh_optimizer->steps(), 3);
  for (const auto& [name, tensor] : optimizer->state())
    EXPECT_EQ(fresh_optimizer->state().at(name).shape(), tensor.shape()) << name;
  EXPECT_EQ(fresh_optimizer->state().at("adam/v/reg/w").to_float_vector(),
            optimizer->state().at("adam/v/reg/w").to_float_vector());
  EXPECT_EQ(c.state, state);
  EXPECT_EQ(c.info.model_name, "regression");
  EXPECT_EQ(c.info.config_json, R"({"hidden": 3})");
  EXPECT_EQ(c.format_version, train::kCheckpointFormatVersion);
  EXPECT_TRUE(c.has_optimizer);
  EXPECT_EQ(c.optimizer_description,
            "adam beta1=0.9 beta2=0.999 eps=1e-08 weight_decay=0.01 "
            "(decoupled)");
  ASSERT_EQ(c.extra.size(), 1u);
  EXPECT_EQ(c.extra.at("best/reg/w").to_float_vector(), std::vector<float>(6, 1.5f));
  // A model-only load ignores the optimizer state; read_checkpoint_info needs no model.
  Regression eval(200);
  train::load_checkpoint(path("c.safetensors"), eval.parameters());
  EXPECT_EQ(eval.w.value().to_float_vector(), model.w.value().to_float_vector());
  EXPECT_EQ(train::read_checkpoint_info(path("c.safetensors")).state.step, 3);
  // No best figure round-trips as none, and the full 64 bits of the RNG words survive.
  TrainingState plain;
  plain.rng = {~0ull, 1, 2, 0x8000000000000000ull};
  train::save_checkpoint(path("d.safetensors"), model.parameters(), nullptr, plain, {"m"});
  EXPECT_EQ(train::read_checkpoint_info(path("d.safetensors")).state, plain);
  EXPECT_FALSE(train::read_checkpoint_info(path("d.safetensors")).has_optimizer);
}

TEST_F(TrainCheckpoint, ResumeEqualsUninterrupted) {
  Regression straight(1);
  auto straight_optimizer = train::make_optimizer(adam_spec(), straight.parameters());
  Rng straight_rng(42);
  train_steps(straight, *straight_optimizer, straight_rng, 0, 10);

  {
    Regression first(1);
    auto optimizer = train::make_optimizer(adam_spec(), first.parameters());
    Rng rng(42);
    train_steps(first, *optimizer, rng, 0, 5);
    train::save_checkpoint(path("half.safetensors"), first.parameters(), optimizer.get(),
                           {0, 5, rng.state(), std::nullopt, 0, std::nullopt}, {"regression"});
  }
  Regression resumed(77);  // different initial values: the load must overwrite them
  auto optimizer = train::make_optimizer(adam_spec(), resumed.parameters());
  Rng rng(999);
  const Checkpoint c =
      train::load_checkpoint(path("half.safetensors"), resumed.parameters(), optimizer.get());
  rng.set_state(c.state.rng);
  train_steps(resumed, *optimizer, rng, c.state.step, 10);

  EXPECT_EQ(resumed.w.value().to_float_vector(), straight.w.value().to_float_vector());
  EXPECT_EQ(resumed.b.value().to_float_vector(), straight.b.value().to_float_vector());
  EXPECT_EQ(rng.state(), straight_rng.state());
  EXPECT_NE(straight.w.value().to_float_vector(), Regression(1).w.value().to_float_vector());
}

TEST_F(TrainCheckpoint, FailedSaveKeepsThePreviousCheckpoint) {
  Regression model(1);
  const std::vector<float> saved = model.w.value().to_float_vector();
  // A file name so long that the temporary beside it (name + ".tmp-<pid>-XXXXXX") cannot be
  // created: the previous checkpoint, moved there, must survive the failed save intact.
  const std::string long_path = path(std::string(250, 'c'));
  train::save_checkpoint(path("short"), model.parameters(), nullptr, {}, {"m"});
  fs::rename(path("short"), long_path);
  model.w.value() = Tensor::full({3, 2}, 9.0f);
  expect_error([&] { train::save_checkpoint(long_path, model.parameters(), nullptr, {}, {"m"}); },
               {"[safetensors] cannot save '", "': creating a temporary file beside it failed"});
  expect_error(
      [&] {
        train::save_checkpoint(long_path, model.parameters(), nullptr, {}, {"m", "{not json"});
      },
      {"[checkpoint] cannot save '", "': the config is not valid JSON: {not json"});
  expect_error(
      [&] {
        train::save_checkpoint(path("no/such/dir/c"), model.parameters(), nullptr, {}, {"m"});
      },
      {"cannot save '", "no/such/dir/c': creating a temporary file beside it failed"});
  EXPECT_EQ(files_in_dir(), 1u);  // no temporary left behind
  Regression back(5);
  train::load_checkpoint(long_path, back.parameters());
  EXPECT_EQ(back.w.value().to_float_vector(), saved);
}

TEST_F(TrainCheckpoint, TruncatedAndForeignFilesAreRejected) {
  Regression model(1);
  train::save_checkpoint(path("c"), model.parameters(), nullptr, {}, {"m"});
  const auto size = fs::file_size(path("c"));
  fs::resize_file(path("c"), size - 10);
  Regression other(2);
  const std::vector<float> before = other.w.value().to_float_vector();
  expect_error([&] { train::load_checkpoint(path("c"), other.parameters()); },
               {"[checkpoint] cannot load '", "[safetensors] '", "runs past the end of the data",
                "is the file truncated?"});
  fs::resize_file(path("c"), 5);
  expect_error([&] { train::load_checkpoint(path("c"), other.parameters()); },
               {"[checkpoint] cannot load '", "is truncated: 5 bytes"});
  expect_error([&] { train::load_checkpoint(path("missing"), other.parameters()); },
               {"[checkpoint] cannot load '", "missing'", "cannot open"});
  io::save_safetensors(path("plain"), {{"reg/w", Tensor::zeros({3, 2})}});
  expect_error([&] { train::load_checkpoint(path("plain"), other.parameters()); },
               {"plain' is not a Weft checkpoint (its metadata has no format "
                "\"weft-checkpoint\")"});
  io::save_safetensors(path("future"), {},
                       {{"format", "weft-checkpoint"}, {"format_version", "7"}});
  expect_error([&] { train::load_checkpoint(path("future"), other.parameters()); },
               {"future' has format version 7; this Weft reads version 1"});
  io::save_safetensors(path("badstate"), {},
                       {{"format", "weft-checkpoint"},
                        {"format_version", "1"},
                        {"model_name", "m"},
                        {"config", "{}"},
                        {"training_state", R"({"epoch":1,"step":2,"best_epoch":0,"rng":[1,2]})"}});
  expect_error([&] { train::read_checkpoint_info(path("badstate")); },
               {"training_state 'rng' must be 4 unsigned integers, got [1,2]"});
  EXPECT_EQ(other.w.value().to_float_vector(), before);  // untouched by every failure
}

TEST_F(TrainCheckpoint, MismatchesAreAllNamed) {
  Parameter weight("tree_lstm/fc/weight", Tensor::zeros({300, 150}));
  Parameter bias("tree_lstm/fc/bias", Tensor::zeros({300}));
  Parameter old("tree_lstm/old", Tensor::zeros({2}));
  train::save_checkpoint(path("c"), std::vector<Parameter>{weight, bias, old}, nullptr, {}, {"m"});
  Parameter new_weight("tree_lstm/fc/weight", Tensor::full({300, 100}, 1.0f));
  Parameter new_bias("tree_lstm/fc/bias", Tensor::full({300}, 1.0f));
  Parameter added("tree_lstm/new", Tensor::zeros({4}));
  const std::vector<Parameter> model{new_weight, new_bias, added};
  expect_error([&] { train::load_checkpoint(path("c"), model); },
               {"[checkpoint] '",
                "c': parameter 'tree_lstm/fc/weight' has shape [300, 150] "
                "in the file but [300, 100] in the model",
                "missing parameters (in the model, not in the file): 'tree_lstm/new'",
                "unexpected parameters (in the file, not in the model): 'tree_lstm/old'"});
  EXPECT_EQ(new_bias.value().to_float_vector(), std::vector<float>(300, 1.0f));  // all or nothing
  auto optimizer = train::make_optimizer({}, std::vector<Parameter>{weight, bias, old});
  expect_error(
      [&] {
        train::load_checkpoint(path("c"), std::vector<Parameter>{weight, bias, old},
                               optimizer.get());
      },
      {"the file has no optimizer state (it was saved without an optimizer)"});
  auto adam = train::make_optimizer(adam_spec(), std::vector<Parameter>{bias});
  train::save_checkpoint(path("adam"), std::vector<Parameter>{bias}, adam.get(), {}, {"m"});
  OptimizerSpec momentum;
  momentum.momentum = 0.9;
  auto sgd = train::make_optimizer(momentum, std::vector<Parameter>{bias});
  expect_error(
      [&] { train::load_checkpoint(path("adam"), std::vector<Parameter>{bias}, sgd.get()); },
      {"the file holds the state of 'adam beta1=0.9",
       "but the optimizer is 'sgd "
       "momentum=0.9'"});
  expect_error(
      [&] {
        train::save_checkpoint(path("x"), std::vector<Parameter>{bias}, nullptr, {}, {"m"},
                               {{"model/extra", Tensor::zeros({1})}});
      },
      {"extra tensor 'model/extra' uses a reserved prefix"});
}

TEST(TrainRng, StateRoundTripContinuesTheStream) {
  Rng a(123);
  for (int i = 0; i < 5; ++i) a.next_u64();
  Rng b(0);
  b.set_state(a.state());
  EXPECT_EQ(b.state(), a.state());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(b.next_u64(), a.next_u64());
  EXPECT_NE(Rng(1).state(), Rng(2).state());
  expect_error([&] { b.set_state({0, 0, 0, 0}); }, {"[rng] the all-zero state is invalid"});
  EXPECT_EQ(b.next_u64(), a.next_u64());  // unchanged by the rejected state
}

// Writes a checkpoint with known contents for tests/check_checkpoint.py, which runs this test
// with WEFT_CHECKPOINT_FOR_PYTHON=<path> and checks the file with NumPy.
TEST_F(TrainCheckpoint, WritesAFileForPython) {
  const char* target = std::getenv("WEFT_CHECKPOINT_FOR_PYTHON");
  if (target == nullptr) GTEST_SKIP() << "run by tests/check_checkpoint.py (ctest)";
  Parameter w("fc/weight", Tensor::from_vector({2, 3}, std::vector<float>{1, 2, 3, 4, 5, -6.5f}));
  Parameter b("fc/bias", Tensor::from_vector({3}, std::vector<float>{0.25f, 0, -1}));
  OptimizerSpec spec;
  spec.momentum = 0.5;
  auto optimizer = train::make_optimizer(spec, std::vector<Parameter>{w, b});
  w.grad() = Tensor::full({2, 3}, 1.0f);  // one step at lr 0.5: velocity 1, value - 0.5
  b.grad() = Tensor::full({3}, 2.0f);
  optimizer->step(0.5);
  const TrainingState state{.epoch = 3,
                            .step = 1,
                            .rng = {1, 2, 0xFFFFFFFFFFFFFFFFull, 12345678901234567ull},
                            .best_dev = 0.75,
                            .best_epoch = 2,
                            .best_dev_loss = 1.5};
  train::save_checkpoint(target, std::vector<Parameter>{w, b}, optimizer.get(), state,
                         {"python-check", R"({"hidden": 3, "cell": "fc"})"});
}

}  // namespace
}  // namespace weft::testing

namespace weft::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// Optimizer state a run could not have produced (a negative Adam second moment, a NaN first
// moment) is refused on resume, naming the tensor, instead of resuming into NaN.
TEST_F(TrainCheckpoint, ImpossibleOptimizerStateIsRefused) {
  Regression model(1);
  auto optimizer = train::make_optimizer(adam_spec(), model.parameters());
  Rng rng(3);
  train_steps(model, *optimizer, rng, 0, 2);
  const std::string good = path("good.safetensors");
  train::save_checkpoint(good, model.parameters(), optimizer.get(), {}, {"regression", "{}"});
  auto forge = [&](const std::string& name, const std::string& tensor, float value) {
    io::SafetensorsContents contents = io::load_safetensors(good);
    std::vector<float> values = contents.tensors.at(tensor).to_float_vector();
    values[1] = value;
    contents.tensors[tensor] = Tensor::from_vector(contents.tensors.at(tensor).shape(), values);
    io::save_safetensors(path(name), contents.tensors, contents.metadata);
    return path(name);
  };
  Regression fresh(7);
  auto fresh_optimizer = train::make_optimizer(adam_spec(), fresh.parameters());
  EXPECT_THAT(
      [&] {
        train::load_checkpoint(forge("v.safetensors", "optimizer/adam/v/reg/w", -1.0f),
                               fresh.parameters(), fresh_optimizer.get());
      },
      ThrowsMessage<Error>(HasSubstr("optimizer state 'adam/v/reg/w' holds -1 at element 1")));
  EXPECT_THAT(
      [&] {
        train::load_checkpoint(forge("m.safetensors", "optimizer/adam/m/reg/b", NAN),
                               fresh.parameters(), fresh_optimizer.get());
      },
      ThrowsMessage<Error>(HasSubstr("optimizer state 'adam/m/reg/b' holds nan")));
  // Refused before anything is copied: the fresh model keeps its own values.
  EXPECT_EQ(fresh.w.value().to_float_vector(), Regression(7).w.value().to_float_vector());
  EXPECT_NO_THROW(train::load_checkpoint(good, fresh.parameters(), fresh_optimizer.get()));
}

}  // namespace
}  // namespace weft::testing
