// The Trainer on models written here: logistic regression on synthetic data (with dropout,
// so the RNG matters, and a prepare_batch hook run on a background thread) and a scripted
// one-parameter model whose dev figures are chosen per epoch. Checks: the loss falls; the
// same seed gives the same numbers (with and without preparing ahead); resuming from a
// checkpoint equals never stopping; the best epoch's parameters are restored and saved; weight
// averaging against an average computed here; the
// JSON-lines log and the console output; and the errors a misbehaving model gets.
#include "weft/train/trainer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "op_test_util.h"
#include "weft/core/error.h"
#include "weft/train/losses.h"

namespace weft::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using train::BatchFigures;
using train::Split;

// Two-class logistic regression (softmax over 2 logits) on 2-D points labelled by a line.
class Logistic : public train::TrainableModel {
 public:
  explicit Logistic(std::uint64_t init_seed, std::size_t train_size = 240,
                    std::size_t dev_size = 120)
      : w_("logistic/w", random_tensor({2, 2}, init_seed)), b_("logistic/b", Tensor::zeros({2})) {
    Rng rng(11);
    for (std::size_t i = 0; i < train_size + dev_size; ++i) {
      const float x0 = rng.normal(), x1 = rng.normal();
      auto& split = i < train_size ? train_ : dev_;
      split.x.insert(split.x.end(), {x0, x1});
      split.y.push_back(x0 + 2 * x1 + 0.3f * rng.normal() > 0 ? 1 : 0);
    }
  }

  std::string name() const override { return "logistic"; }
  std::string config_json() const override { return R"({"features": 2, "classes": 2})"; }
  std::vector<Parameter> parameters() override { return {w_, b_}; }
  std::size_t num_examples(Split split) const override {
    return split == Split::kTrain ? train_.y.size() : split == Split::kDev ? dev_.y.size() : 0;
  }

  struct Inputs : train::PreparedBatch {
    Tensor x, y;
    std::thread::id thread;
  };

  std::unique_ptr<train::PreparedBatch> prepare_batch(Split split,
                                                      std::span<const std::size_t> ids) override {
    ++prepared_;
    return make_inputs(split, ids);
  }

  BatchFigures train_batch(const train::Batch& batch, Rng& rng) override {
    std::unique_ptr<Inputs> own;
    const Inputs& in = inputs_of(batch, own);
    if (in.thread != std::this_thread::get_id()) ++prepared_elsewhere_;
    tape_.clear();
    TapeScope scope(tape_);
    Var logits = linear(dropout(tape_.constant(in.x), 0.1f, rng), w_, b_);
    train::ClassificationLoss loss = train::classification_loss(logits, in.y);
    tape_.backward(loss.loss);
    return std::move(loss.figures);
  }

  BatchFigures eval_batch(const train::Batch& batch) override {
    std::unique_ptr<Inputs> own;
    const Inputs& in = inputs_of(batch, own);
    Tape tape;
    tape.set_grad_enabled(false);
    TapeScope scope(tape);
    return train::classification_loss(linear(tape.constant(in.x), w_, b_), in.y).figures;
  }

  Parameter w_, b_;
  std::atomic<int> prepared_{0};
  std::atomic<int> prepared_elsewhere_{0};

 private:
  struct Data {
    std::vector<float> x;
    std::vector<std::int32_t> y;
  };

  std::unique_ptr<Inputs> make_inputs(Split split, std::span<const std::size_t> ids) const {
    const Data& data = split == Split::kTrain ? train_ : dev_;
    std::vector<float> x;
    std::vector<std::int32_t> y;
    for (std::size_t id : ids) {
      x.insert(x.end(), {data.x[2 * id], data.x[2 * id + 1]});
      y.push_back(data.y[id]);
    }
    auto in = std::make_unique<Inputs>();
    in->x = Tensor::from_vector({std::int64_t(ids.size()), 2}, x);
    in->y = Tensor::from_vector({std::int64_t(ids.size())}, y);
    in->thread = std::this_thread::get_id();
    return in;
  }

  const Inputs& inputs_of(const train::Batch& batch, std::unique_ptr<Inputs>& own) const {
    if (batch.prepared != nullptr) return static_cast<const Inputs&>(*batch.prepared);
    own = make_inputs(batch.split, batch.example_ids);
    return *own;
  }

  Data train_, dev_;
  Tape tape_;
};

class TrainTrainer : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("weft_trainer_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  static train::TrainerOptions options(int epochs) {
    train::TrainerOptions o;
    o.set("epochs", epochs);
    o.set("batch_size", 16);
    o.set("seed", 5);
    o.set("momentum", 0.9);
    o.set("schedule", "cosine");
    o.set("learning_rate", 0.2);
    o.set("warmup_steps", 5);
    o.set("total_steps", 15 * epochs);
    o.set("clip_norm", 5.0);
    o.set("best_metric", "accuracy");
    o.set("progress", "off");
    return o;
  }

  fs::path dir_;
};

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The log line without the wall-clock fields.
nlohmann::json without_times(const std::string& line) {
  nlohmann::json j = nlohmann::json::parse(line);
  j.erase("seconds");
  j.erase("examples_per_second");
  return j;
}

void expect_same_records(const train::EpochRecord& a, const train::EpochRecord& b) {
  EXPECT_EQ(without_times(a.to_json()), without_times(b.to_json()));
}

// The first `epochs` of the run `o` describes, on a fresh model (writing its checkpoints);
// returns how many epochs ran.
std::size_t train_first_epochs(train::TrainerOptions o, int epochs) {
  Logistic first(1);
  o.set("epochs", epochs);
  return train::Trainer(o).fit(first).epochs.size();
}

TEST_F(TrainTrainer, LossFallsAndDevAccuracyRises) {
  Logistic model(1);
  train::Trainer trainer(options(6));
  const train::TrainResult result = trainer.fit(model);
  ASSERT_EQ(result.epochs.size(), 6u);
  EXPECT_LT(result.epochs.back().train.value("loss"), 0.6 * result.epochs[0].train.value("loss"));
  EXPECT_GT(trainer.evaluate(model, Split::kDev).value("accuracy"), 0.9);
  EXPECT_EQ(result.state.step, 6 * 15);  // 240 examples in batches of 16
  EXPECT_EQ(result.state.epoch, 6);
  EXPECT_EQ(result.epochs[0].examples, 240);
  EXPECT_GT(model.prepared_.load(), 0);
  EXPECT_EQ(model.prepared_elsewhere_.load(), 6 * 15);  // every batch prepared ahead
}

// A model whose preparation or training step fails at a given batch (0: never).
class FailingLogistic : public Logistic {
 public:
  FailingLogistic(int fail_prepare_at, int fail_train_at)
      : Logistic(1), fail_prepare_at_(fail_prepare_at), fail_train_at_(fail_train_at) {}
  std::unique_ptr<train::PreparedBatch> prepare_batch(Split split,
                                                      std::span<const std::size_t> ids) override {
    if (prepared_.load() + 1 == fail_prepare_at_) fail("test", "preparation failed");
    return Logistic::prepare_batch(split, ids);
  }
  BatchFigures train_batch(const train::Batch& batch, Rng& rng) override {
    if (++trained_ == fail_train_at_) fail("test", "step failed");
    return Logistic::train_batch(batch, rng);
  }
  int trained_ = 0;

 private:
  int fail_prepare_at_, fail_train_at_;
};

// A failure while a batch is prepared ahead is the run's, raised where the batch is needed; a
// step that fails while the next batch is prepared leaves nothing running once fit has thrown
// (the model is destroyed right after: under ASan a preparation still running would be a
// use after free), whether the batches are prepared ahead or not.
TEST_F(TrainTrainer, AFailedPreparationOrStepEndsTheRunWithItsError) {
  for (bool ahead : {true, false}) {
    train::TrainerOptions o = options(1);
    o.set("prepare_ahead", ahead);
    {
      FailingLogistic model(4, 0);
      EXPECT_THAT([&] { train::Trainer(o).fit(model); },
                  ThrowsMessage<Error>(HasSubstr("preparation failed")));
      EXPECT_EQ(model.trained_, 3) << "the three batches before it were trained";
    }
    {
      FailingLogistic model(0, 2);
      EXPECT_THAT([&] { train::Trainer(o).fit(model); },
                  ThrowsMessage<Error>(HasSubstr("step failed")));
      EXPECT_LE(model.prepared_.load(), 3) << "at most the next batch was prepared";
    }
  }
}

TEST_F(TrainTrainer, SameSeedSameNumbers) {
  std::vector<train::TrainResult> results;
  std::vector<std::vector<float>> weights;
  for (bool ahead : {true, true, false}) {
    Logistic model(1);
    train::TrainerOptions o = options(3);
    o.set("prepare_ahead", ahead);
    results.push_back(train::Trainer(o).fit(model));
    weights.push_back(model.w_.value().to_float_vector());
    if (!ahead) {
      EXPECT_EQ(model.prepared_elsewhere_.load(), 0);
    }
  }
  for (std::size_t r = 1; r < results.size(); ++r) {
    EXPECT_EQ(weights[r], weights[0]);
    EXPECT_EQ(results[r].state, results[0].state);
    for (std::size_t e = 0; e < 3; ++e)
      expect_same_records(results[r].epochs[e], results[0].epochs[e]);
  }
  Logistic other(1);
  train::TrainerOptions o = options(3);
  o.set("seed", 6);  // another shuffle and dropout stream: other numbers
  train::Trainer(o).fit(other);
  EXPECT_NE(other.w_.value().to_float_vector(), weights[0]);
}

TEST_F(TrainTrainer, ResumeEqualsUninterrupted) {
  Logistic straight(1);
  train::TrainerOptions o = options(6);
  o.set("log", path("straight.jsonl"));
  const train::TrainResult full = train::Trainer(o).fit(straight);

  o.set("log", path("resumed.jsonl"));
  o.set("checkpoint", path("last.ckpt"));
  EXPECT_EQ(train_first_epochs(o, 3), 3u);
  const train::Checkpoint saved = train::read_checkpoint_info(path("last.ckpt"));
  EXPECT_EQ(saved.state.epoch, 3);
  EXPECT_EQ(saved.state.step, 45);
  EXPECT_EQ(saved.extra.count("best/logistic/w"), 1u);
  EXPECT_EQ(nlohmann::json::parse(saved.info.config_json)["model"]["features"], 2);

  Logistic resumed(99);  // other initial values: the checkpoint must replace them
  o.set("resume", path("last.ckpt"));
  const train::TrainResult rest = train::Trainer(o).fit(resumed);
  ASSERT_EQ(rest.epochs.size(), 3u);
  EXPECT_EQ(rest.epochs[0].epoch, 4);
  for (std::size_t e = 0; e < 3; ++e) expect_same_records(rest.epochs[e], full.epochs[e + 3]);
  EXPECT_EQ(rest.state, full.state);
  EXPECT_EQ(resumed.w_.value().to_float_vector(), straight.w_.value().to_float_vector());
  EXPECT_EQ(resumed.b_.value().to_float_vector(), straight.b_.value().to_float_vector());
  const std::vector<std::string> a = read_lines(path("straight.jsonl"));
  const std::vector<std::string> b = read_lines(path("resumed.jsonl"));  // appended on resume
  ASSERT_EQ(a.size(), 6u);
  ASSERT_EQ(b.size(), 6u);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(without_times(a[i]), without_times(b[i]));
}

// The exponential moving average the trainer should keep, computed here from every update's
// live values: per the formula of the average_weights option (trainer.h).
struct ExpectedAverage {
  std::vector<double> average;
  std::vector<std::vector<double>> at_epoch_end;  // index e: after epoch e + 1

  void update(std::int64_t step, std::span<const float> live, const train::TrainerOptions& o) {
    const std::int64_t every = o.values.integer("average_every");
    if (step % every != 0) return;
    const double n = double(step / every - 1);
    const double d =
        std::min(std::pow(o.values.number("average_weights"), every), (1 + n) / (10 + n));
    for (std::size_t i = 0; i < live.size(); ++i)
      average[i] = d * average[i] + (1 - d) * double(live[i]);
  }
};

void expect_near_all(std::span<const float> got, std::span<const double> want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << "element " << i;
}

std::vector<float> values_of(Logistic& model) {
  std::vector<float> all = model.w_.value().to_float_vector();
  for (float b : model.b_.value().to_float_vector()) all.push_back(b);
  return all;
}

TEST_F(TrainTrainer, WeightAveragingEvaluatesKeepsAndReturnsTheAverage) {
  Logistic model(1);
  train::TrainerOptions o = options(5);
  o.set("average_weights", 0.8);
  o.set("average_every", 2);
  o.set("best_checkpoint", path("best.ckpt"));
  ExpectedAverage expected;
  for (float v : values_of(model)) expected.average.push_back(v);  // the initial values
  std::vector<float> last_live;
  o.on_step = [&](std::int64_t step, double, double) {
    last_live = values_of(model);  // on_step sees the live values, not the average
    expected.update(step, last_live, o);
    if (step % 15 == 0) expected.at_epoch_end.push_back(expected.average);  // 15 batches an epoch
  };
  train::Trainer trainer(o);
  const train::TrainResult result = trainer.fit(model);
  ASSERT_EQ(expected.at_epoch_end.size(), 5u);
  const std::size_t best = std::size_t(result.state.best_epoch);
  ASSERT_GE(best, 1u);
  // What the run returns, what it wrote as the best and what it evaluated on dev is the average
  // at the best epoch, not the live values.
  expect_near_all(values_of(model), expected.at_epoch_end[best - 1]);
  Logistic loaded(99);
  train::load_checkpoint(path("best.ckpt"), loaded.parameters());
  EXPECT_EQ(values_of(loaded), values_of(model));
  const train::MetricSet dev = trainer.evaluate(model, Split::kDev);
  EXPECT_DOUBLE_EQ(dev.value("loss"), result.epochs[best - 1].dev.value("loss"));
  double furthest = 0;  // from the live values at the end: the average must lag behind them
  for (std::size_t i = 0; i < last_live.size(); ++i)
    furthest = std::max(furthest, std::abs(double(last_live[i]) - expected.average[i]));
  EXPECT_GT(furthest, 1e-3);

  Logistic without_best(1);
  o.set("best_metric", "");
  o.set("best_checkpoint", "");
  expected.average.clear();
  for (float v : values_of(without_best)) expected.average.push_back(v);
  o.on_step = [&](std::int64_t step, double, double) {
    expected.update(step, values_of(without_best), o);
  };
  train::Trainer(o).fit(without_best);
  expect_near_all(values_of(without_best), expected.average);  // the last average
}

TEST_F(TrainTrainer, WeightAveragingResumesExactly) {
  train::TrainerOptions o = options(4);
  o.set("average_weights", 0.9);
  Logistic straight(1);
  const train::TrainResult full = train::Trainer(o).fit(straight);
  o.set("checkpoint", path("last.ckpt"));
  o.set("best_checkpoint", path("best.ckpt"));
  EXPECT_EQ(train_first_epochs(o, 2), 2u);
  const train::Checkpoint saved = train::read_checkpoint_info(path("last.ckpt"));
  EXPECT_EQ(saved.extra.count("average/logistic/w"), 1u);  // the epoch checkpoint: both
  EXPECT_EQ(train::read_checkpoint_info(path("best.ckpt")).extra.count("average/logistic/w"), 0u);
  Logistic resumed(99);
  o.set("resume", path("last.ckpt"));
  const train::TrainResult rest = train::Trainer(o).fit(resumed);
  ASSERT_EQ(rest.epochs.size(), 2u);
  for (std::size_t e = 0; e < 2; ++e) expect_same_records(rest.epochs[e], full.epochs[e + 2]);
  EXPECT_EQ(values_of(resumed), values_of(straight));

  expect_error([&] { o.set("average_weights", 1.0); },
               {"[trainer] TrainerOptions: option 'average_weights' must be a finite number in "
                "[0, 0.999999], got 1.0"});
  expect_error([&] { o.set("average_every", 0); },
               {"[trainer] TrainerOptions: option 'average_every' must be an integer in [1, "
                "1000000], got 0"});
}

// One parameter p, pushed up by exactly 1 per epoch (one batch, gradient -1, lr 1), whose dev
// "score" is scripted by epoch; the dev loss follows the score too, unless scripted apart.
class Scripted : public train::TrainableModel {
 public:
  explicit Scripted(std::vector<double> scores, std::vector<double> losses = {})
      : scores_(std::move(scores)), losses_(std::move(losses)) {}
  std::vector<Parameter> parameters() override { return {p_}; }
  std::size_t num_examples(Split split) const override { return split == Split::kTest ? 0 : 4; }
  BatchFigures train_batch(const train::Batch& batch, Rng&) override {
    p_.grad() = Tensor::full({1}, -1.0f);
    return {double(batch.example_ids.size()), std::int64_t(batch.example_ids.size()), {}};
  }
  BatchFigures eval_batch(const train::Batch& batch) override {
    const auto epoch = std::size_t(p_.value().item()) - 1;
    const double score = scores_.empty() ? 0.0 : scores_.at(epoch);
    const double loss = losses_.empty() ? score : losses_.at(epoch);
    const auto n = std::int64_t(batch.example_ids.size());
    BatchFigures f{loss * double(n), n, {}};
    f.metrics.add_mean("score", score, double(n));
    if (report_loss_) f.metrics.add_mean("loss", 0.0);
    return f;
  }
  Parameter p_{"p", Tensor::zeros({1})};
  bool report_loss_ = false;

 private:
  std::vector<double> scores_;
  std::vector<double> losses_;
};

train::TrainerOptions scripted_options(int epochs) {
  train::TrainerOptions o;
  o.set("epochs", epochs);
  o.set("batch_size", 4);
  o.set("learning_rate", 1.0);
  o.set("best_metric", "score");
  o.set("progress", "off");
  return o;
}

TEST_F(TrainTrainer, KeepsAndRestoresTheBestEpoch) {
  Scripted model({0.5, 0.9, 0.7, 0.8});
  train::TrainerOptions o = scripted_options(4);
  o.set("best_checkpoint", path("best.ckpt"));
  o.set("log", path("log.jsonl"));
  const train::TrainResult result = train::Trainer(o).fit(model);
  EXPECT_EQ(model.p_.value().item(), 2.0f);  // the parameters of epoch 2, the best score
  EXPECT_EQ(result.state.best_epoch, 2);
  EXPECT_EQ(result.state.best_dev, 0.9);
  std::vector<bool> best;
  for (const auto& record : result.epochs) best.push_back(record.best);
  EXPECT_EQ(best, (std::vector<bool>{true, true, false, false}));
  Scripted loaded({});
  const train::Checkpoint c = train::load_checkpoint(path("best.ckpt"), loaded.parameters());
  EXPECT_EQ(loaded.p_.value().item(), 2.0f);
  EXPECT_EQ(c.state.epoch, 2);
  EXPECT_EQ(c.state.best_dev, 0.9);

  Scripted by_loss({0.5, 0.9, 0.7, 0.3, 0.6});  // minimise the dev loss: epoch 4
  o = scripted_options(5);
  o.set("best_metric", "loss");
  o.set("best_mode", "min");
  EXPECT_EQ(train::Trainer(o).fit(by_loss).state.best_epoch, 4);
  EXPECT_EQ(by_loss.p_.value().item(), 4.0f);
  Scripted from_file({0.5, 0.9, 0.7});  // the best restored from its checkpoint file
  o = scripted_options(3);
  o.set("keep_best_in_memory", false);
  o.set("best_checkpoint", path("best2.ckpt"));
  EXPECT_EQ(train::Trainer(o).fit(from_file).state.best_epoch, 2);
  EXPECT_EQ(from_file.p_.value().item(), 2.0f);
  o.set("best_checkpoint", "");
  expect_error(
      [&] { train::Trainer{o}; },
      {"restore_best without keep_best_in_memory needs a best_checkpoint to restore from"});
  Scripted last({0.5, 0.9, 0.7});
  o = scripted_options(3);
  o.set("restore_best", false);
  train::Trainer(o).fit(last);
  EXPECT_EQ(last.p_.value().item(), 3.0f);
}

// The epoch with the best score, ties going to the lower loss (1-based, as Trainer counts).
std::int64_t best_by_score_then_loss(const std::vector<double>& scores,
                                     const std::vector<double>& losses) {
  std::size_t best = 0;
  for (std::size_t e = 1; e < scores.size(); ++e)
    if (scores[e] > scores[best] || (scores[e] == scores[best] && losses[e] < losses[best]))
      best = e;
  return std::int64_t(best) + 1;
}

TEST_F(TrainTrainer, EpochsThatTieOnTheBestMetricGoToTheLowerDevLoss) {
  // A short run ties at 0% exact match: the best epoch is the one whose loss fell furthest, not
  // the first (issue 44), also when the run is resumed between the tied epochs.
  const std::vector<double> scores{0, 0, 0, 0, 0}, losses{3, 1.5, 2, 1, 4};
  Scripted tied(scores, losses);
  train::TrainerOptions o = scripted_options(5);
  const train::TrainResult result = train::Trainer(o).fit(tied);
  const std::int64_t expected = best_by_score_then_loss(scores, losses);
  EXPECT_EQ(result.state.best_epoch, expected);
  EXPECT_EQ(result.state.best_dev_loss, losses[std::size_t(expected) - 1]);
  EXPECT_EQ(tied.p_.value().item(), float(expected));  // restored
  std::vector<bool> best;
  for (const auto& record : result.epochs) best.push_back(record.best);
  EXPECT_EQ(best, (std::vector<bool>{true, true, false, true, false}));

  // A better score still wins over a lower loss; equal losses keep the earlier epoch.
  const std::vector<double> mixed_scores{0.5, 0.5, 0.9, 0.9, 0.9}, mixed_losses{2, 1, 3, 3, 2.5};
  Scripted mixed(mixed_scores, mixed_losses);
  EXPECT_EQ(train::Trainer(scripted_options(5)).fit(mixed).state.best_epoch,
            best_by_score_then_loss(mixed_scores, mixed_losses));

  // Resumed after epoch 2: the checkpoint carries the best epoch's loss, so epoch 3 (loss 2,
  // above epoch 2's 1.5) does not take its place.
  Scripted first(scores, losses);
  o = scripted_options(2);
  o.set("checkpoint", path("tied.ckpt"));
  train::Trainer(o).fit(first);
  Scripted resumed(scores, losses);
  o = scripted_options(5);
  o.set("resume", path("tied.ckpt"));
  const train::TrainResult rest = train::Trainer(o).fit(resumed);
  EXPECT_EQ(rest.state.best_epoch, expected);
  best.clear();
  for (const auto& record : rest.epochs) best.push_back(record.best);
  EXPECT_EQ(best, (std::vector<bool>{false, true, false}));  // epochs 3, 4, 5
}

TEST_F(TrainTrainer, ClipsGradientsBeforeEachUpdate) {
  // The gradient is -1 each step (one step per epoch, lr 1): p grows by the clipped size.
  Scripted by_value({});
  train::TrainerOptions o = scripted_options(2);
  o.set("best_metric", "");
  o.set("clip_value", 0.25);
  train::Trainer(o).fit(by_value);
  EXPECT_EQ(by_value.p_.value().item(), 0.5f);
  Scripted by_norm({});
  o.set("clip_value", 0);
  o.set("clip_norm", 0.125);
  train::Trainer(o).fit(by_norm);
  EXPECT_EQ(by_norm.p_.value().item(), 0.25f);
}

TEST_F(TrainTrainer, JsonLinesLog) {
  Logistic model(1);
  train::TrainerOptions o = options(3);
  o.set("log", path("log.jsonl"));
  o.set("total_steps", 0);  // the whole run: 3 epochs of 15 batches
  train::Trainer trainer(o);
  const train::TrainResult result = trainer.fit(model);
  EXPECT_EQ(trainer.schedule().total_steps, 45);
  const std::vector<std::string> lines = read_lines(path("log.jsonl"));
  ASSERT_EQ(lines.size(), 3u);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const nlohmann::json j = nlohmann::json::parse(lines[i]);
    EXPECT_EQ(j["epoch"], i + 1);
    EXPECT_EQ(j["step"], 15 * (i + 1));
    EXPECT_EQ(j["examples"], 240);
    EXPECT_DOUBLE_EQ(j["learning_rate"].get<double>(),
                     trainer.schedule().at(std::int64_t(15 * (i + 1) - 1)));
    EXPECT_DOUBLE_EQ(j["train"]["loss"].get<double>(), result.epochs[i].train.value("loss"));
    EXPECT_GT(j["train"]["accuracy"].get<double>(), 0.0);
    EXPECT_DOUBLE_EQ(j["dev"]["accuracy"].get<double>(), result.epochs[i].dev.value("accuracy"));
    EXPECT_TRUE(j["dev"].contains("loss"));
    EXPECT_GT(j["examples_per_second"].get<double>(), 0.0);
    EXPECT_GT(j["seconds"].get<double>(), 0.0);
    EXPECT_EQ(j["best"], result.epochs[i].best);
  }
}

std::string run_with_progress(const std::string& mode) {
  std::FILE* out = std::tmpfile();
  Scripted model({0.5, 0.9});
  train::TrainerOptions o = scripted_options(2);
  o.set("progress", mode);
  o.progress_stream = out;
  train::Trainer(o).fit(model);
  std::rewind(out);
  std::string text;
  for (int c; (c = std::fgetc(out)) != EOF;) text += char(c);
  std::fclose(out);
  return text;
}

TEST_F(TrainTrainer, ConsoleOutput) {
  const std::string lines = run_with_progress("auto");  // not a terminal
  EXPECT_EQ(lines.find('\r'), std::string::npos);
  EXPECT_NE(lines.find("epoch 1/2  train loss 1.0000 | dev loss 0.5000 score 0.5000 | "),
            std::string::npos)
      << lines;
  EXPECT_NE(lines.find("epoch 2/2  train loss 1.0000 | dev loss 0.9000 score 0.9000 | "),
            std::string::npos)
      << lines;
  EXPECT_NE(lines.find("lr 1 (best)\n"), std::string::npos) << lines;
  const std::string bar = run_with_progress("bar");
  EXPECT_NE(bar.find("\repoch 1/2 [========================] 4/4"), std::string::npos) << bar;
  EXPECT_NE(bar.find("ETA 0:00"), std::string::npos) << bar;
  EXPECT_TRUE(run_with_progress("off").empty());
}

TEST_F(TrainTrainer, Errors) {
  Scripted model({0.5, 0.9});
  train::TrainerOptions o = scripted_options(2);
  o.set("best_metric", "f1");
  expect_error([&] { train::Trainer(o).fit(model); },
               {"[trainer] best_metric 'f1' is not among the dev figures: {\"loss\":0.5,"
                "\"score\":0.5}"});
  Scripted reports_loss({0.5});
  reports_loss.report_loss_ = true;
  expect_error([&] { train::Trainer(scripted_options(1)).fit(reports_loss); },
               {"the model reported a metric named 'loss' for a dev batch; that name is reserved"});
  o = scripted_options(1);
  expect_error([&] { o.set("batch_size", 0); },
               {"[trainer] TrainerOptions: option 'batch_size' must be an integer in [1, "
                "1048576], got 0"});
  o = scripted_options(1);
  o.set("resume", path("missing.ckpt"));
  expect_error([&] { train::Trainer(o).fit(model); },
               {"[checkpoint] cannot load '", "missing.ckpt'"});
  Logistic diverging(1);
  o = options(2);
  o.set("schedule", "constant");
  o.set("learning_rate", 1e38);
  o.set("clip_norm", 0);
  expect_error([&] { train::Trainer(o).fit(diverging); },
               {"[trainer] the train loss is", "lower the learning rate or clip gradients"});
}

}  // namespace
}  // namespace weft::testing
