// `weft train`, `weft eval` and `weft infer`: the researcher's loop from the command line.
// train fits a model with the Trainer and ends with its test figures, its throughput and the
// speedup of dynamic batching over one call per node on the same model; eval prints a JSON
// object of metrics; infer prints one JSON line of predictions per example line.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "model_factory.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/models/calculator.h"
#include "weft/train/checkpoint.h"

namespace weft::tool {
namespace {

void add_model_options(CLI::App& cmd, ModelOptions& m) {
  cmd.add_option("model", m.name, "calculator, sentiment, attention, langid or molecules")
      ->required();
  cmd.add_option("--data-dir", m.data_dir, "Folder with sst/, glove-sst/ and tatoeba-langid/")
      ->capture_default_str();
  cmd.add_option("--embeddings", m.embeddings,
                 "Word vectors, 'word v1 ... vd' per line (sentiment; default: "
                 "<data-dir>/glove-sst/glove.6B.100d.sst.txt)");
  cmd.add_flag("--no-embeddings", m.no_embeddings, "Random, trainable word vectors (sentiment)");
  cmd.add_flag("--freeze-embeddings", m.freeze_embeddings,
               "Keep the pretrained word vectors fixed (sentiment; default: fine-tune them)");
  cmd.add_option("--hidden", m.hidden, "Hidden size (0: the model's default)")
      ->check(CLI::Range(std::int64_t(0), std::int64_t(1) << 16));
  cmd.add_option("--dropout", m.dropout,
                 "Drop probability on word vectors and before the softmax (sentiment)")
      ->check(CLI::Range(0.0, 0.95));
  cmd.add_option("--recurrent-dropout", m.recurrent_dropout,
                 "Drop probability on the Tree-LSTM candidate (sentiment)")
      ->check(CLI::Range(0.0, 0.95));
  cmd.add_option("--seed", m.seed, "Seed of the data order, weights and dropout")
      ->capture_default_str();
  cmd.add_option("--max-train", m.max_train, "Use at most this many training examples (0: all)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--max-eval", m.max_eval, "Use at most this many dev / test examples (0: all)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--task", m.task,
                 "molecules: esol (solubility, RMSE) or tox21 (12 assays, mean ROC-AUC); "
                 "--bad-records also covers molecules (an unparsable SMILES, no labels)")
      ->capture_default_str()
      ->check(CLI::IsMember({"esol", "tox21"}));
  cmd.add_option("--weave-threads", m.weave_threads, "Weaving threads (0: all cores)")
      ->check(CLI::Range(0, 1024));
  cmd.add_option("--bad-records", m.bad_records,
                 "attention, langid: skip (and list on stderr) or reject (stop at) a bad record, "
                 "e.g. an empty sentence")
      ->capture_default_str()
      ->check(CLI::IsMember({"skip", "reject"}));
}

train::Split parse_split(const std::string& name) {
  if (name == "train") return train::Split::kTrain;
  if (name == "dev") return train::Split::kDev;
  if (name == "test") return train::Split::kTest;
  fail("weft", "unknown split '", name, "' (expected train, dev or test)");
}

// Dynamic batching against one call per node, inference on the same test examples.
void report_batching_speedup(models::Model& model, std::size_t batch_size) {
  const std::span<const nlohmann::json> all = model.examples(train::Split::kTest);
  const auto examples = all.subspan(0, std::min<std::size_t>(all.size(), 1024));
  if (examples.empty()) return;
  const double batched =
      models::inference_rate(model.root_block(), examples, loom::Strategy::kByDepth, batch_size);
  const double unbatched =
      models::inference_rate(model.root_block(), examples, loom::Strategy::kNone, batch_size);
  fmt::print(
      "dynamic batching: {:.0f} examples/s, one call per node: {:.0f} examples/s, speedup "
      "{:.1f}x (inference, {} test examples, batch {})\n",
      batched, unbatched, batched / unbatched, examples.size(), batch_size);
}

}  // namespace

CLI::App* add_train(CLI::App& app, TrainOptions& o) {
  CLI::App* cmd =
      app.add_subcommand("train",
                         "Train a model (calculator: the built-in demo; "
                         "sentiment: the Tree-LSTM on SST; attention: feed-forward "
                         "attention on SST; langid: the hierarchical RNN on Tatoeba; "
                         "molecules: Weave-style graph convolutions, --task esol|tox21)");
  add_model_options(*cmd, o.model);
  cmd->add_option("--epochs", o.epochs, "Passes over the training set (0: model default)")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--batch-size", o.batch_size, "Examples per update (0: model default)")
      ->check(CLI::Range(std::int64_t(0), std::int64_t(1) << 20));
  cmd->add_option("--optimizer", o.optimizer, "sgd, adagrad or adam (default: the model's)");
  cmd->add_option("--learning-rate", o.learning_rate, "Step size (0: the model's default)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--momentum", o.momentum, "SGD momentum")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--weight-decay", o.weight_decay, "Weight decay (default: the model's)");
  cmd->add_option("--weight-decay-mode", o.weight_decay_mode, "l2 or decoupled")
      ->capture_default_str();
  cmd->add_option("--schedule", o.schedule,
                  "constant, step, exponential or cosine (default: the model's)");
  cmd->add_option("--warmup-steps", o.warmup_steps, "Linear warm-up updates")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--clip-norm", o.clip_norm,
                  "Clip the global gradient norm (0: off; default: the model's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--embedding-lr-scale", o.embedding_learning_rate_scale,
                  "Learning rate of word vectors relative to the rest (default: the model's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--checkpoint", o.checkpoint, "Write a checkpoint here after every epoch");
  cmd->add_option("--best-checkpoint", o.best_checkpoint,
                  "Write the best model (by dev figure) here");
  cmd->add_option("--resume", o.resume, "Continue training from this checkpoint")
      ->check(CLI::ExistingFile);
  cmd->add_option("--log", o.log, "Append one JSON line per epoch to this file");
  cmd->add_option("--progress", o.progress, "auto, bar, lines or off")->capture_default_str();
  cmd->add_option("--threads", o.threads, "GEMM threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_flag("!--no-compare", o.compare_unbatched,
                "Skip measuring dynamic batching against one call per node");
  return cmd;
}

int run_train(const TrainOptions& options) {
  train::TrainerOptions recipe = training_recipe(options);
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<models::Model> model = make_model(options.model);
  if (recipe.schedule.kind == train::ScheduleKind::kCosine) {
    const std::size_t batches =
        (model->num_examples(train::Split::kTrain) + recipe.batch_size - 1) / recipe.batch_size;
    recipe.schedule.total_steps = std::int64_t(batches) * recipe.epochs;
  }
  fmt::print("weft train {}: {} training, {} dev, {} test examples; {} epochs, batch {}, {}, {}\n",
             model->name(), model->num_examples(train::Split::kTrain),
             model->num_examples(train::Split::kDev), model->num_examples(train::Split::kTest),
             recipe.epochs, recipe.batch_size, recipe.optimizer.describe(),
             recipe.schedule.describe());
  std::fflush(stdout);
  train::Trainer trainer(recipe);
  const train::TrainResult result = trainer.fit(*model);
  double examples_per_second = 0;
  for (const train::EpochRecord& epoch : result.epochs) {
    examples_per_second = std::max(examples_per_second, epoch.examples_per_second);
  }
  const train::MetricSet test = trainer.evaluate(*model, train::Split::kTest);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("test: {}\n", test.to_json());
  if (auto* calculator = dynamic_cast<models::CalculatorModel*>(model.get())) {
    fmt::print("test majority class: {:.3f} (the accuracy of always guessing it)\n",
               calculator->majority_rate(train::Split::kTest));
  }
  fmt::print("training: {:.0f} examples/s (best epoch), {:.1f} s in all\n", examples_per_second,
             seconds);
  if (options.compare_unbatched) report_batching_speedup(*model, 256);
  return 0;
}

CLI::App* add_eval(CLI::App& app, EvalOptions& o) {
  CLI::App* cmd = app.add_subcommand("eval", "Evaluate a checkpoint; prints a JSON object");
  add_model_options(*cmd, o.model);
  cmd->add_option("--checkpoint", o.checkpoint, "A checkpoint written by weft train")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--splits", o.splits, "Splits to evaluate")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--batch-size", o.batch_size, "Examples per batch")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 20));
  cmd->add_option("--threads", o.threads, "GEMM threads")->check(CLI::Range(1, 1024));
  return cmd;
}

int run_eval(const EvalOptions& options) {
  set_num_threads(options.threads);
  std::unique_ptr<models::Model> model =
      make_model(with_checkpoint_config(options.model, options.checkpoint));
  train::load_checkpoint(options.checkpoint, model->parameters());
  train::TrainerOptions recipe;
  recipe.batch_size = std::size_t(options.batch_size);
  recipe.progress = train::ProgressMode::kOff;
  train::Trainer trainer(recipe);
  nlohmann::json out = nlohmann::json::object();
  for (const std::string& split : options.splits) {
    out[split] = nlohmann::json::parse(trainer.evaluate(*model, parse_split(split)).to_json());
  }
  std::cout << out.dump() << "\n";
  return 0;
}

CLI::App* add_infer(CLI::App& app, InferOptions& o) {
  CLI::App* cmd = app.add_subcommand(
      "infer", "Predict: one example per input line, one JSON line of predictions per example");
  add_model_options(*cmd, o.model);
  cmd->add_option("--checkpoint", o.checkpoint, "A checkpoint written by weft train")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--input", o.input, "Examples, one per line (- for standard input)")
      ->capture_default_str();
  cmd->add_option("--batch-size", o.batch_size, "Examples per batch")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 20));
  cmd->add_option("--threads", o.threads, "GEMM threads")->check(CLI::Range(1, 1024));
  return cmd;
}

int run_infer(const InferOptions& options) {
  set_num_threads(options.threads);
  std::unique_ptr<models::Model> model =
      make_model(with_checkpoint_config(options.model, options.checkpoint));
  train::load_checkpoint(options.checkpoint, model->parameters());
  std::ifstream file;
  std::istream* in = &std::cin;
  const std::string name = options.input == "-" ? "<stdin>" : options.input;
  if (options.input != "-") {
    file.open(options.input);
    if (!file) fail("weft infer", "cannot read '", options.input, "'");
    in = &file;
  }
  std::vector<nlohmann::json> batch;
  auto flush = [&] {
    for (const nlohmann::json& prediction : model->predict(batch)) {
      std::cout << prediction.dump() << "\n";
    }
    batch.clear();
  };
  std::string line;
  for (std::int64_t number = 1; std::getline(*in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    batch.push_back(model->parse_example(line, fmt::format("{}:{}", name, number)));
    if (std::int64_t(batch.size()) == options.batch_size) flush();
  }
  if (!batch.empty()) flush();
  return 0;
}

}  // namespace weft::tool
