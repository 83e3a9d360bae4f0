// `weft train`, `weft eval` and `weft infer`: the researcher's loop from the command line, over
// the model registry (no model is special-cased here). train fits a model with the Trainer and
// ends with its test figures, its throughput and the speedup of dynamic batching over one call
// per node on the same model; eval prints a JSON object of metrics; infer prints one JSON line
// of predictions per example line. eval and infer rebuild the model from the checkpoint alone.
#include <fmt/core.h>

#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/dist/communicator.h"
#include "weft/io/input_limits.h"
#include "weft/io/json_lines.h"
#include "weft/models/ensemble.h"
#include "weft/models/registry.h"
#include "weft/models/saved_model.h"
#include "weft/models/streaming_inference.h"

namespace weft::tool {
namespace {

void print_notes(const std::vector<std::string>& notes, std::FILE* stream) {
  for (const std::string& line : notes) fmt::print(stream, "{}\n", line);
}

// The Trainer's options before the command line's own: the model's recipe, and one GEMM thread
// (the command line's default, for figures that do not depend on the machine's cores).
train::TrainerOptions command_line_defaults(const models::ModelEntry& entry,
                                            const models::OptionValues& values) {
  return entry.training_options(values).set("threads", 1, "weft train");
}

// The model's options before the command line's: its defaults, or when resuming the
// checkpoint's, with its assets (vocabularies) into `assets` (the command line's options go on
// top; an architecture option that differs fails on loading the parameters).
models::OptionValues model_options_of(const models::ModelEntry& entry, const std::string& resume,
                                      nlohmann::json& assets) {
  if (resume.empty()) return entry.default_options();
  models::SavedModel saved = models::read_saved_model(resume);
  if (saved.name != entry.name) {
    fail("weft train", "cannot resume a '", entry.name, "' run from '", resume, "': it holds a '",
         saved.name, "' model");
  }
  assets = std::move(saved.assets);
  return saved.options;
}

// The names of a model's options, which the model's flags bind (the Trainer's seed is the
// model's).
std::vector<std::string> option_names(const models::OptionValues& values) {
  std::vector<std::string> names;
  for (const models::OptionSpec& spec : values.schema()) names.push_back(spec.name);
  return names;
}

// Dynamic batching (by depth, sinks last and by agenda, each with its batched calls against
// the schedule's lower bound) against one call per node, inference on the same test examples,
// with the model's step-row limit and weaving threads. The schedules are timed in turn, three
// rounds, and each reports its median rate: on a shared machine a single pass of a few
// milliseconds says little.
void report_batching_speedup(models::Model& model, std::size_t batch_size) {
  const std::span<const nlohmann::json> all = model.examples(train::Split::kTest);
  const auto examples = all.subspan(0, std::min<std::size_t>(all.size(), 1024));
  if (examples.empty()) return;
  blocks::CompilerOptions compiler;
  compiler.max_step_rows = std::uint32_t(model.options().integer("max_step_rows"));
  compiler.threads = int(model.options().integer("weave_threads"));
  const loom::Strategy schedules[] = {loom::Strategy::kByDepth, loom::Strategy::kSinksLast,
                                      loom::Strategy::kAgenda, loom::Strategy::kNone};
  constexpr std::size_t kSchedules = std::size(schedules), kRounds = 3;
  std::array<models::InferenceRate, kSchedules> rates;
  std::array<std::vector<double>, kSchedules> per_round;
  for (std::size_t round = 0; round < kRounds; ++round) {
    for (std::size_t k = 0; k < kSchedules; ++k) {
      compiler.strategy = schedules[k];
      rates[k] = models::inference_rate(model.root_block(), examples, compiler, batch_size);
      per_round[k].push_back(rates[k].examples_per_second);
    }
  }
  for (std::size_t k = 0; k < kSchedules; ++k) {
    std::sort(per_round[k].begin(), per_round[k].end());
    rates[k].examples_per_second = per_round[k][kRounds / 2];
  }
  const auto above_bound = [](const models::InferenceRate& r) {
    return r.min_batched_calls > 0
               ? 100.0 * double(r.batched_calls - r.min_batched_calls) / double(r.min_batched_calls)
               : 0.0;
  };
  const std::size_t batched = kSchedules - 1;  // the last is one call per node
  // The model's schedule among the batched ones (by_depth for any other).
  const std::size_t chosen_index = std::size_t(
      std::find(std::begin(schedules), std::begin(schedules) + batched, model.loom_strategy()) -
      std::begin(schedules));
  const models::InferenceRate& chosen = rates[chosen_index < batched ? chosen_index : 0];
  const models::InferenceRate& unbatched = rates[batched];
  fmt::print(
      "dynamic batching ({}): {:.0f} examples/s, one call per node: {:.0f} examples/s, speedup "
      "{:.1f}x (inference, {} test examples, batch {}, median of {} rounds)\n",
      loom::strategy_name(model.loom_strategy()), chosen.examples_per_second,
      unbatched.examples_per_second, chosen.examples_per_second / unbatched.examples_per_second,
      examples.size(), batch_size, kRounds);
  std::string line = "schedules:";
  for (std::size_t k = 0; k < batched; ++k)
    line +=
        fmt::format("{} {} {} batched calls ({:.0f} examples/s, +{:.1f}% over the bound)",
                    k == 0 ? "" : ",", loom::strategy_name(schedules[k]), rates[k].batched_calls,
                    rates[k].examples_per_second, above_bound(rates[k]));
  fmt::print("{}; lower bound {}\n", line, rates[0].min_batched_calls);
}

void add_checkpoint_flags(CLI::App& cmd, std::vector<std::string>& checkpoints,
                          std::int64_t& batch_size, int& threads) {
  cmd.add_option("--checkpoint", checkpoints,
                 "A checkpoint written by weft train; several (repeated or a comma list) of one "
                 "model make an ensemble that averages their class probabilities")
      ->required()
      ->delimiter(',')
      ->check(CLI::ExistingFile);
  cmd.add_option("--batch-size", batch_size, "Examples per batch")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 20));
  cmd.add_option("--threads", threads, "GEMM threads")->check(CLI::Range(1, 1024));
}

// `weft train ... --procs K` on one machine: the same command under mpirun with K processes
// (as root, with the variables OpenMPI asks for), replacing this process.
int relaunch_under_mpirun(int procs, int argc, char** argv) {
  std::vector<std::string> args{"mpirun", "-np", std::to_string(procs), "--oversubscribe"};
  if (::geteuid() == 0) {
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  }
  args.push_back("/proc/self/exe");
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--procs") {
      ++i;  // and its value
    } else if (arg.rfind("--procs=", 0) != 0) {
      args.push_back(arg);
    }
  }
  char exe[4096] = {0};
  const ssize_t length = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (length <= 0) fail("weft train", "cannot find this program's path for mpirun");
  args[4] = std::string(exe, std::size_t(length));
  std::vector<char*> pointers;
  for (std::string& arg : args) pointers.push_back(arg.data());
  pointers.push_back(nullptr);
  std::fflush(stdout);
  ::execvp("mpirun", pointers.data());
  fail("weft train", "--procs ", procs,
       " needs mpirun (Debian's openmpi-bin), which could not "
       "be started: ",
       std::strerror(errno));
}

// The value of `field` in an input line that is a JSON object (weft infer --key).
nlohmann::json line_key(std::string_view line, const std::string& field, std::string_view where) {
  const nlohmann::json value = io::parse_json(line, where, "weft infer");
  if (!value.is_object() || !value.contains(field))
    fail("weft infer", where, ": --key ", field, " needs a JSON object with a '", field,
         "' field on every line");
  return value[field];
}

}  // namespace

CLI::App* add_train(CLI::App& app, TrainOptions& o, ModelFlags& models) {
  CLI::App* cmd = app.add_subcommand(
      "train", "Train a model: weft train <model> [flags]; weft train <model> --help lists them");
  models.bind(*cmd, [&o](CLI::App& model, const models::ModelEntry& entry) {
    auto flags = std::make_shared<OptionFlags>();
    const models::OptionValues defaults = entry.default_options();
    flags->bind(model, command_line_defaults(entry, defaults).values, option_names(defaults));
    o.trainer_flags[entry.name] = flags;
    model.add_flag("!--no-compare", o.compare_unbatched,
                   "Skip measuring dynamic batching against one call per node");
    model
        .add_option("--procs", o.procs,
                    "Data-parallel processes on this machine, started through mpirun "
                    "(--batch-size stays the global batch); mpirun -np K weft train ... "
                    "does the same across machines")
        ->check(CLI::Range(1, 4096));
  });
  return cmd;
}

int run_train(const TrainOptions& options, int argc, char** argv) {
  dist::Communicator& world = dist::world();
  if (options.procs > 1 && world.size() == 1)
    return relaunch_under_mpirun(options.procs, argc, argv);
  if (options.procs > 1 && world.size() != options.procs) {
    fail("weft train", "--procs ", options.procs, " under an mpirun of ", world.size(),
         " processes; give one or the other");
  }
  // Only rank 0 speaks; the others' progress, notes and figures would repeat it.
  if (!world.is_root() && std::freopen("/dev/null", "w", stdout) == nullptr) {
    fail("weft train", "cannot silence rank ", world.rank(), "'s output");
  }
  const auto start = std::chrono::steady_clock::now();
  const models::ModelEntry& entry = models::find_model(options.model.name);
  const nlohmann::json given = options.trainer_flags.at(entry.name)->given();
  const std::string resume = given.value("resume", "");
  nlohmann::json assets;
  models::OptionValues values = model_options_of(entry, resume, assets);
  models::ModelInit init;
  if (!resume.empty()) init.assets = &assets;
  values.update(options.model.options, "the command line");
  train::TrainerOptions recipe =
      command_line_defaults(entry, values).update(given, "the command line");
  if (world.size() > 1) recipe.communicator = &world;
  recipe.validate();
  std::unique_ptr<models::Model> model = entry.create(values, init);
  if (world.is_root()) print_notes(model->data_notes(), stderr);
  fmt::print("weft train {}: {} training, {} dev, {} test examples; {}{}\n", model->name(),
             model->num_examples(train::Split::kTrain), model->num_examples(train::Split::kDev),
             model->num_examples(train::Split::kTest), recipe.summary(),
             world.size() > 1 ? fmt::format("; {} processes", world.size()) : std::string());
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
  print_notes(model->split_notes(train::Split::kTest), stdout);
  fmt::print("training: {:.0f} examples/s (the fastest epoch), {:.1f} s in all\n",
             examples_per_second, seconds);
  // A decoding model is no single static weave: there is no one-call-per-node run to compare.
  if (options.compare_unbatched && world.is_root() && !model->decoding())
    report_batching_speedup(*model, 256);
  return 0;
}

CLI::App* add_eval(CLI::App& app, EvalOptions& o, ModelFlags& models) {
  CLI::App* cmd = app.add_subcommand(
      "eval", "Evaluate a checkpoint on its data; prints a JSON object (weft eval <model> ...)");
  models.bind(*cmd, [&o](CLI::App& model, const models::ModelEntry&) {
    add_checkpoint_flags(model, o.checkpoints, o.batch_size, o.threads);
    model.add_option("--splits", o.splits, "Splits to evaluate")
        ->delimiter(',')
        ->capture_default_str();
  });
  return cmd;
}

int run_eval(const EvalOptions& options) {
  set_num_threads(options.threads);
  std::vector<train::Split> splits;
  for (const std::string& split : options.splits) splits.push_back(train::parse_split(split));
  std::unique_ptr<models::Model> model = models::load_ensemble(
      options.checkpoints, models::ModelUse::kEvaluate, options.model.options, options.model.name);
  train::TrainerOptions recipe;
  recipe.set("batch_size", options.batch_size, "--batch-size").set("progress", "off");
  train::Trainer trainer(recipe);
  if (options.checkpoints.size() > 1)
    fmt::print(stderr, "{}: an ensemble of {} checkpoints (their probabilities averaged)\n",
               model->name(), options.checkpoints.size());
  // How many examples each figure covers: max_eval is a data option, so a checkpoint trained
  // with --max-eval N evaluates N examples unless --max-eval says otherwise.
  std::string counts;
  for (train::Split split : splits)
    counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", model->examples(split).size(),
                          train::split_name(split));
  const std::int64_t max_eval = model->options().integer("max_eval");
  fmt::print(stderr, "{}: evaluating {} examples{}\n", model->name(), counts,
             max_eval > 0 ? fmt::format(" (max_eval {} from the checkpoint or the command line; "
                                        "--max-eval 0 for every example)",
                                        max_eval)
                          : "");
  nlohmann::json out = nlohmann::json::object();
  for (train::Split split : splits) {
    out[std::string(train::split_name(split))] =
        nlohmann::json::parse(trainer.evaluate(*model, split).to_json());
  }
  std::cout << out.dump() << "\n";
  return 0;
}

CLI::App* add_infer(CLI::App& app, InferOptions& o, ModelFlags& models) {
  CLI::App* cmd = app.add_subcommand(
      "infer",
      "Predict with a checkpoint alone: one example per input line, one JSON line of "
      "predictions per example (weft infer <model> ...)");
  models.bind(*cmd, [&o](CLI::App& model, const models::ModelEntry&) {
    add_checkpoint_flags(model, o.checkpoints, o.batch_size, o.threads);
    model.add_option("--input", o.input, "Examples, one per line (- for standard input)")
        ->capture_default_str();
    model
        .add_option("--batches-ahead", o.batches_ahead,
                    "Batches woven ahead, each on a worker thread, while one runs (0: none)")
        ->capture_default_str()
        ->check(CLI::Range(0, 64));
    model.add_option("--key", o.key,
                     "A field of each (JSON-object) input line, copied into its prediction as "
                     "\"key\"");
  });
  return cmd;
}

int run_infer(const InferOptions& options) {
  set_num_threads(options.threads);
  std::unique_ptr<models::Model> model = models::load_ensemble(
      options.checkpoints, models::ModelUse::kInfer, options.model.options, options.model.name);
  std::ifstream file;
  std::istream* in = &std::cin;
  const std::string name = options.input == "-" ? "<stdin>" : options.input;
  if (options.input != "-") {
    file.open(options.input);
    if (!file) fail("weft infer", "cannot read '", options.input, "'");
    in = &file;
  }
  // One example per line, each at most max_example_bytes: a longer line is skipped unread
  // and refused, so no input can make infer buffer more than that, and the driver holds at
  // most (batches ahead + 1) batches: memory does not grow with the input.
  const std::size_t max_bytes = std::size_t(io::input_limits().max_example_bytes);
  std::string line;
  bool too_long = false;
  std::int64_t number = 0;
  const models::ExampleSource source = [&](models::StreamExample& next) {
    for (;;) {
      if (!io::read_bounded_line(*in, line, max_bytes, too_long)) return false;
      ++number;
      if (too_long)
        fail("weft infer", name, ":", number, ": an example longer than ", max_bytes, " bytes ",
             io::limit_hint("max_example_bytes"));
      if (line.find_first_not_of(" \t\r") != std::string::npos) break;
    }
    const std::string where = fmt::format("{}:{}", name, number);
    next.example = model->parse_example(line, where);
    if (!options.key.empty()) next.key = line_key(line, options.key, where);
    return true;
  };
  const models::PredictionSink sink = [&](models::StreamedPrediction& out) {
    if (!options.key.empty()) out.prediction["key"] = std::move(out.key);
    std::cout << out.prediction.dump() << "\n";
  };
  models::StreamingOptions streaming;
  streaming.batch_size = options.batch_size;
  streaming.batches_ahead = options.batches_ahead;
  models::predict_stream(*model, source, sink, streaming);
  return 0;
}

}  // namespace weft::tool
