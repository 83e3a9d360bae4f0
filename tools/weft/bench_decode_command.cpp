// `weft bench decode`: decoding sequences/s and training examples/s of the models that decode
// with flow programs (tree2seq, seq2tree), against the same examples one at a time and against
// Weft's own best case (batches whose outputs all have one length, matched to the mixed batch's
// lengths). Trains a small checkpoint per model from its seeded data unless given one, checks
// that batched and one-at-a-time decoding agree, times the arms in interleaved rounds
// (bench_decode_measure.cpp), and prints a table or writes CSV / JSON with the machine's
// description.
#include <fmt/format.h>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>

#include "bench_decode.h"
#include "bench_output.h"
#include "commands.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/models/registry.h"
#include "weft/models/saved_model.h"

namespace weft::tool {
namespace {

using nlohmann::json;
using namespace decode_bench;

constexpr const char* kCommand = "weft bench decode";
constexpr double kBatchOverOneTarget = 3.0, kBatchOverOneLengthTarget = 0.8;  // issue 32

constexpr const char* kFooter = R"(
Arms, all on the same held-out examples (the first --batch of the checkpoint's test split),
timed in turn in every round, after one warm-up round that no figure counts (as `weft bench
treelstm` warms up); the median of the rounds is reported, every round in the JSON:
  batch          the examples decoded together as one batch (mixed output lengths);
  one_at_a_time  the same examples, one decode call each;
  one_length     Weft's own best case, matched: for every output length L among the batch's
                 examples (L = engine steps its decoding takes: greedy one per token or
                 decision, beam until its search stops), a batch of --batch held-out examples
                 that all take L steps (the batch's own, then others of the dev and test
                 splits, repeated when those run short), each timed; the rate is that of
                 decoding the batch's length mix in such batches: sum of n_L over the sum of
                 (n_L / batch) x time(L), n_L the batch's examples of length L;
  train          teacher forcing on the same examples (forward, backward, clipping and the
                 recipe's optimizer step) in batches of --batch, and one example per step.
Before timing, the batch's answers (greedy and beam) must equal those of its examples decoded
one at a time, with the same number of steps, or the command fails. Targets (issue 32): batch /
one_at_a_time >= 3, batch / one_length >= 0.8. Arm (a) is one decode call per round while arm
(c) is one per length, back to back: without --warm the batch's call alone follows the other
arms' and training's work (bench/log/2026-11-29-decode-step-cost.md); with --warm every timed
call follows an untimed call of the same examples.
JSON: {benchmark, machine {cpu, logical_cpus, threads, backend, commit, load_average_before,
load_average_after}, options, targets, models: [{model, checkpoint, training (null for a given
checkpoint), held_out_examples, quality {<search>: exact_match, ended, min_steps, max_steps,
mean_steps}, decode {<search>: batch, one_at_a_time, one_length ({median, rounds, warmup}),
batch_over_one_at_a_time, batch_over_one_length, equality_check, one_length_batches [{steps,
examples_in_batch, distinct, off_length}]}, train {batch, one_at_a_time,
batch_over_one_at_a_time}}]}; <search> is greedy or beam<k>. With --profile, each search also
has profile_per_sequence {batch, one_length: {seconds, kinds {<kind>: {seconds, bytes}}}}.
CSV columns: model,phase,search,arm,examples,rate_median,rate_rounds,batch_over_arm,cpu,threads,
commit,load_before,load_after (rates in sequences or examples per second; rate_rounds joined
by ';'; batch_over_arm = the batch arm's median over this arm's; load: 1-minute averages).
commit, in both and in the table: the commit this binary was built from (`weft --version`), not
the current directory's checkout.)";

// The folder the checkpoints trained here go to; a temporary one is removed at the end.
class CheckpointFolder {
 public:
  explicit CheckpointFolder(const std::string& keep) : temporary_(keep.empty()) {
    path_ = temporary_ ? std::filesystem::temp_directory_path() /
                             fmt::format("weft_bench_decode_{}", ::getpid())
                       : std::filesystem::path(keep);
    std::error_code error;
    std::filesystem::create_directories(path_, error);
    if (error) fail(kCommand, "cannot make the folder '", path_.string(), "': ", error.message());
  }
  ~CheckpointFolder() {
    std::error_code ignored;
    if (temporary_) std::filesystem::remove_all(path_, ignored);
  }
  std::string file(const std::string& model) const {
    return (path_ / (model + ".safetensors")).string();
  }

 private:
  bool temporary_;
  std::filesystem::path path_;
};

void progress(const BenchDecodeOptions& o, const std::string& line) {
  if (!o.quiet) std::cerr << line << std::endl;
}

// A checkpoint of `name` trained here from its seeded data, written to `path`: what the output
// records of its training.
json train_checkpoint(const std::string& name, const BenchDecodeOptions& o,
                      const std::string& path) {
  const models::ModelEntry& entry = models::find_model(name);
  models::OptionValues values = entry.default_options();
  json given = {{"seed", o.seed}, {"max_train", o.train_examples}, {"max_eval", o.held_out}};
  if (o.hidden > 0) given["hidden"] = o.hidden;
  values.update(given, kCommand);
  progress(o, fmt::format("{}: training a checkpoint ({} epoch(s) of {} generated expressions)",
                          name, o.train_epochs, o.train_examples));
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<models::Model> model = models::create_model(values);
  train::TrainerOptions trainer = entry.training_options(values);
  trainer.set("epochs", o.train_epochs, "--train-epochs")
      .set("progress", "off", kCommand)
      .set("threads", o.threads, "--threads");
  const train::TrainResult result = train::Trainer(trainer).fit(*model);
  models::save_model(path, *model);
  double best_dev = 0;
  for (const train::EpochRecord& r : result.epochs)
    if (r.dev.contains("exact_match")) best_dev = std::max(best_dev, r.dev.value("exact_match"));
  return {
      {"epochs", o.train_epochs},
      {"train_examples", o.train_examples},
      {"hidden", values.integer("hidden")},
      {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()},
      {"best_dev_exact_match", best_dev}};
}

// The models to measure: --model, else the checkpoint's, else both.
std::vector<std::string> chosen_models(const BenchDecodeOptions& o) {
  if (o.checkpoint.empty())
    return o.models.empty() ? std::vector<std::string>{"tree2seq", "seq2tree"} : o.models;
  const std::string held = models::read_saved_model(o.checkpoint).name;
  if (held != "tree2seq" && held != "seq2tree")
    fail(kCommand, "'", o.checkpoint, "' holds a '", held,
         "' model; this benchmark measures tree2seq and seq2tree");
  if (!o.models.empty() && (o.models.size() != 1 || o.models[0] != held))
    fail(kCommand, "'", o.checkpoint, "' holds a '", held, "' model, not --model ",
         fmt::format("{}", fmt::join(o.models, ",")));
  return {held};
}

// What one model's run measured, and how its checkpoint came about.
struct ModelRun {
  std::string model, checkpoint;
  json training;  // null for a given checkpoint
  json quality;   // exact match and ending of (a)'s answers, per search
  std::size_t examples = 0;
  std::vector<Search> searches;
  Rates train_batch, train_one_at_a_time;
};

json quality_of(const Search& s, std::span<const json> examples, double exact_match) {
  std::int64_t ended_count = 0, total_steps = 0;
  for (const json& answer : s.answers) ended_count += ended(answer);
  for (std::int64_t steps : s.steps) total_steps += steps;
  const auto [shortest, longest] = std::minmax_element(s.steps.begin(), s.steps.end());
  return {{"exact_match", exact_match},
          {"ended", double(ended_count) / double(examples.size())},
          {"min_steps", *shortest},
          {"max_steps", *longest},
          {"mean_steps", double(total_steps) / double(examples.size())}};
}

// One round: every arm of every search, then training, timed in turn; recorded as round
// `round` of the rounds, or as the warm-up when `round` is 0 (counted by no figure).
void time_round(const BenchDecodeOptions& o, models::DecodingModel& decoder,
                std::span<const json> examples, TrainingArm& training, ModelRun& run, int round) {
  const std::size_t batch = std::size_t(o.batch);
  const bool counted = round > 0;
  std::string line = counted ? fmt::format("{}: round {}/{}:", run.model, round, o.rounds)
                             : fmt::format("{}: warm-up round (not counted):", run.model);
  for (Search& s : run.searches) {
    const double together = decode_rate(decoder, examples, batch, s.settings, o.warm);
    const double alone = decode_rate(decoder, examples, 1, s.settings, o.warm);
    const double one_length = one_length_rate(decoder, s.buckets, s.settings, o.warm);
    s.batch.record(together, counted);
    s.one_at_a_time.record(alone, counted);
    s.one_length.record(one_length, counted);
    line += fmt::format(" {} {:.1f} / {:.1f} / {:.1f},", s.name, together, alone, one_length);
  }
  const double train_together = training.rate(batch), train_alone = training.rate(1);
  run.train_batch.record(train_together, counted);
  run.train_one_at_a_time.record(train_alone, counted);
  progress(o, line + fmt::format(" train {:.1f} / {:.1f} (batch / one at a time / one length)",
                                 train_together, train_alone));
}

// The warm-up round, then the rounds.
void time_rounds(const BenchDecodeOptions& o, models::DecodingModel& decoder,
                 std::span<const json> examples, TrainingArm& training, ModelRun& run) {
  for (int round = 0; round <= o.rounds; ++round)
    time_round(o, decoder, examples, training, run, round);
}

// Checks, the one-length batches and the rounds, for the model a checkpoint holds.
ModelRun measure_model(const BenchDecodeOptions& o, const std::string& name,
                       const std::string& path, json training) {
  json overrides = {{"eval_beam", o.beam}};
  if (o.held_out > 0 && training.is_null()) overrides["max_eval"] = o.held_out;
  std::unique_ptr<models::Model> model =
      models::load_model(path, models::ModelUse::kEvaluate, overrides, name);
  std::unique_ptr<models::Model> trainee =
      models::load_model(path, models::ModelUse::kEvaluate, overrides, name);
  models::DecodingModel& decoder = *model->decoding();
  const std::span<const json> test = model->examples(train::Split::kTest);
  if (test.size() < std::size_t(o.batch))
    fail(kCommand, "'", path, "' gives ", test.size(),
         " held-out test examples, fewer than --batch ", o.batch, " (raise --held-out)");
  const std::span<const json> examples = test.first(std::size_t(o.batch));
  std::vector<json> pool(test.begin() + o.batch, test.end());
  for (const json& e : model->examples(train::Split::kDev)) pool.push_back(e);
  ModelRun run{name,
               training.is_null() ? path : "trained here",
               training,
               json::object(),
               examples.size(),
               {},
               {},
               {}};
  std::vector<std::size_t> ids(examples.size());
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = i;
  const train::BatchFigures figures = model->eval_batch({train::Split::kTest, ids});
  for (const models::DecodeSettings settings :
       {models::DecodeSettings{.beam = 0}, models::DecodeSettings{.beam = o.beam}}) {
    Search s;
    s.name = settings.beam == 0 ? "greedy" : fmt::format("beam{}", settings.beam);
    s.settings = settings;
    progress(o, fmt::format("{} {}: checking batched = one at a time on {} held-out examples, "
                            "then finding the one-length batches",
                            name, s.name, examples.size()));
    check_batched_equals_alone(decoder, name, examples, s);
    s.buckets = one_length_batches(decoder, examples, pool, std::size_t(o.batch), s);
    run.quality[s.name] =
        quality_of(s, examples,
                   figures.metrics.value(settings.beam == 0 ? "exact_match" : "exact_match_beam"));
    run.searches.push_back(std::move(s));
  }
  TrainingArm arm(*trainee, models::find_model(name).recipe(trainee->options()), ids);
  time_rounds(o, decoder, examples, arm, run);
  if (o.profile)
    for (Search& s : run.searches) profile_arms(decoder, examples, s);
  return run;
}

}  // namespace

namespace {

json rates_json(const Rates& r) {
  return {{"median", r.median()}, {"rounds", r.rounds}, {"warmup", r.warmup}};
}

double ratio(const Rates& a, const Rates& b) {
  return b.median() > 0 ? a.median() / b.median() : 0;
}

json buckets_json(const Search& s) {
  json out = json::array();
  for (const Bucket& b : s.buckets)
    out.push_back({{"steps", b.steps},
                   {"examples_in_batch", b.weight},
                   {"distinct", b.distinct},
                   {"off_length", b.off_length}});
  return out;
}

json profile_json(const ArmProfile& p) {
  json kinds = json::object();
  for (std::size_t k = 0; k < kWorkKinds; ++k)
    kinds[std::string(work_kind_name(WorkKind(k)))] = {{"seconds", p.kind_seconds[k]},
                                                       {"bytes", p.kind_bytes[k]}};
  return {{"seconds", p.seconds}, {"kinds", kinds}};
}

json model_json(const ModelRun& run, bool profiled) {
  json decode = json::object();
  for (const Search& s : run.searches) {
    decode[s.name] = {{"beam", s.settings.beam},
                      {"batch", rates_json(s.batch)},
                      {"one_at_a_time", rates_json(s.one_at_a_time)},
                      {"one_length", rates_json(s.one_length)},
                      {"batch_over_one_at_a_time", ratio(s.batch, s.one_at_a_time)},
                      {"batch_over_one_length", ratio(s.batch, s.one_length)},
                      {"equality_check", {{"examples", run.examples}, {"equal", true}}},
                      {"one_length_batches", buckets_json(s)}};
    if (profiled)
      decode[s.name]["profile_per_sequence"] = {{"batch", profile_json(s.batch_profile)},
                                                {"one_length", profile_json(s.one_length_profile)}};
  }
  return {{"model", run.model},
          {"checkpoint", run.checkpoint},
          {"training", run.training},
          {"held_out_examples", run.examples},
          {"quality", run.quality},
          {"decode", decode},
          {"train",
           {{"batch", rates_json(run.train_batch)},
            {"one_at_a_time", rates_json(run.train_one_at_a_time)},
            {"batch_over_one_at_a_time", ratio(run.train_batch, run.train_one_at_a_time)}}}};
}

json options_json(const BenchDecodeOptions& o) {
  return {{"batch", o.batch},
          {"beam", o.beam},
          {"rounds", o.rounds},
          {"warmup_rounds", 1},
          {"warm", o.warm},
          {"threads", o.threads},
          {"seed", o.seed},
          {"train_examples", o.train_examples},
          {"train_epochs", o.train_epochs},
          {"held_out", o.held_out},
          {"checkpoint", o.checkpoint}};
}

std::string render_json(const std::vector<ModelRun>& runs, const MachineInfo& machine,
                        const BenchDecodeOptions& o) {
  json doc = {{"benchmark", "decode"},
              {"machine", to_json(machine)},
              {"options", options_json(o)},
              {"targets",
               {{"batch_over_one_at_a_time", kBatchOverOneTarget},
                {"batch_over_one_length", kBatchOverOneLengthTarget}}},
              {"models", json::array()}};
  for (const ModelRun& run : runs) doc["models"].push_back(model_json(run, o.profile));
  return doc.dump(2) + "\n";
}

std::string render_csv(const std::vector<ModelRun>& runs, const MachineInfo& m) {
  std::string out =
      "model,phase,search,arm,examples,rate_median,rate_rounds,batch_over_arm,cpu,threads,commit,"
      "load_before,load_after\n";
  const std::string machine = fmt::format("\"{}\",{},{},{:.2f},{:.2f}", m.cpu, m.threads, m.commit,
                                          m.load_before[0], m.load_after[0]);
  auto row = [&](const ModelRun& run, const char* phase, const std::string& search, const char* arm,
                 const Rates& r, const Rates& batch) {
    out +=
        fmt::format("{},{},{},{},{},{:.2f},{:.2f},{:.3f},{}\n", run.model, phase, search, arm,
                    run.examples, r.median(), fmt::join(r.rounds, ";"), ratio(batch, r), machine);
  };
  for (const ModelRun& run : runs) {
    for (const Search& s : run.searches) {
      row(run, "decode", s.name, "batch", s.batch, s.batch);
      row(run, "decode", s.name, "one_at_a_time", s.one_at_a_time, s.batch);
      row(run, "decode", s.name, "one_length", s.one_length, s.batch);
    }
    row(run, "train", "teacher_forcing", "batch", run.train_batch, run.train_batch);
    row(run, "train", "teacher_forcing", "one_at_a_time", run.train_one_at_a_time, run.train_batch);
  }
  return out;
}

// How well the checkpoint decodes, and what the one-length batches are made of.
std::string model_notes(const ModelRun& run) {
  const json& t = run.training;
  std::string out =
      t.is_null() ? fmt::format("{}: checkpoint {}\n", run.model, run.checkpoint)
                  : fmt::format(
                        "{}: checkpoint trained here ({} epoch(s) of {} expressions, hidden {}, "
                        "{:.0f} s; best dev exact match {:.3f})\n",
                        run.model, t["epochs"].get<int>(), t["train_examples"].get<std::int64_t>(),
                        t["hidden"].get<std::int64_t>(), t["seconds"].get<double>(),
                        t["best_dev_exact_match"].get<double>());
  for (const Search& s : run.searches) {
    const json& q = run.quality[s.name];
    std::size_t distinct = 0, slots = 0;
    std::int64_t off = 0;
    for (const Bucket& b : s.buckets) {
      distinct += b.distinct;
      slots += b.examples.size();
      off += b.off_length;
    }
    out += fmt::format(
        "  {}: {} held-out examples, exact match {:.3f}, ended {:.3f}, {}-{} steps (mean {:.1f}); "
        "batched = one at a time; one-length batches: {} lengths, {} distinct examples in {} "
        "places, {} off length\n",
        s.name, run.examples, q["exact_match"].get<double>(), q["ended"].get<double>(),
        q["min_steps"].get<std::int64_t>(), q["max_steps"].get<std::int64_t>(),
        q["mean_steps"].get<double>(), s.buckets.size(), distinct, slots, off);
  }
  return out;
}

// --profile: per sequence, each arm's wall time and its kernels' time (and bytes written) by kind.
std::string profile_lines(const ModelRun& run) {
  std::string out;
  const auto arm = [](const char* name, const ArmProfile& p) {
    std::string line = fmt::format("    {:<10} wall {:7.1f} us", name, 1e6 * p.seconds);
    for (std::size_t k = 0; k < kWorkKinds; ++k)
      if (p.kind_seconds[k] > 0)
        line += fmt::format(", {} {:.1f} us / {:.1f} KB", work_kind_name(WorkKind(k)),
                            1e6 * p.kind_seconds[k], p.kind_bytes[k] / 1e3);
    return line + "\n";
  };
  for (const Search& s : run.searches)
    out += fmt::format("  {} {} profiled, per sequence (bytes: written by data-moving kernels):\n",
                       run.model, s.name) +
           arm("batch", s.batch_profile) + arm("one-length", s.one_length_profile);
  return out;
}

std::string verdict(double value, double target) {
  return fmt::format("{:.2f}x {}", value, value >= target ? "meets" : "misses");
}

// The rates, the ratios against the issue's targets, and what the figures rest on.
std::string render_table(const std::vector<ModelRun>& runs, const MachineInfo& m,
                         const BenchDecodeOptions& o) {
  std::string out = fmt::format(
      "weft bench decode: {} thread(s), batch {}, {} rounds, medians (decoding: sequences/s; "
      "training: examples/s)\n{:<9} {:<7} {:<8} {:>9} {:>13} {:>11}   {:<22} {}\n",
      o.threads, o.batch, o.rounds, "model", "phase", "search", "batch", "one-at-a-time",
      "one-length", "batch/one (>= 3x)", "batch/one-length (>= 0.8x)");
  for (const ModelRun& run : runs) {
    for (const Search& s : run.searches)
      out += fmt::format("{:<9} {:<7} {:<8} {:>9.1f} {:>13.1f} {:>11.1f}   {:<22} {}\n", run.model,
                         "decode", s.name, s.batch.median(), s.one_at_a_time.median(),
                         s.one_length.median(),
                         verdict(ratio(s.batch, s.one_at_a_time), kBatchOverOneTarget),
                         verdict(ratio(s.batch, s.one_length), kBatchOverOneLengthTarget));
    out +=
        fmt::format("{:<9} {:<7} {:<8} {:>9.1f} {:>13.1f} {:>11}   {:.2f}x\n", run.model, "train",
                    "teacher", run.train_batch.median(), run.train_one_at_a_time.median(), "-",
                    ratio(run.train_batch, run.train_one_at_a_time));
  }
  for (const ModelRun& run : runs) out += model_notes(run) + (o.profile ? profile_lines(run) : "");
  out += fmt::format(
      "machine: {} ({} logical CPUs), {}; commit {}; load average {:.2f} before, "
      "{:.2f} after\n",
      m.cpu, m.logical_cpus, m.backend, m.commit, m.load_before[0], m.load_after[0]);
  return out;
}

}  // namespace

CLI::App* add_bench_decode(CLI::App& bench, BenchDecodeOptions& o) {
  CLI::App* cmd = bench.add_subcommand(
      "decode",
      "Decoding sequences/s and training examples/s of tree2seq and seq2tree: a batch of\n"
      "held-out examples decoded together (greedy and beam), the same one at a time, and\n"
      "batches whose outputs all have one length, matched to the batch's lengths");
  cmd->footer(kFooter);
  cmd->add_option(
         "--model", o.models,
         "tree2seq, seq2tree or both, comma-separated (default: both, or the checkpoint's)")
      ->delimiter(',')
      ->check(CLI::IsMember({"tree2seq", "seq2tree"}));
  cmd->add_option("--checkpoint", o.checkpoint,
                  "A trained tree2seq or seq2tree checkpoint (default: train one per model here)");
  cmd->add_option("--batch", o.batch, "Examples per batch, and held-out examples measured")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--beam", o.beam, "Beam width of the beam rows")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_option("--rounds", o.rounds, "Interleaved rounds")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  cmd->add_option("--threads", o.threads, "GEMM threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--seed", o.seed, "Seed of the data and weights of the checkpoints trained here")
      ->capture_default_str();
  cmd->add_option("--train-examples", o.train_examples, "Training expressions (checkpoints here)")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t(1), std::int64_t(10000000)));
  cmd->add_option("--train-epochs", o.train_epochs, "Training epochs (checkpoints trained here)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--hidden", o.hidden, "Hidden size of the checkpoints trained here (0: default)")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t(0), std::int64_t(4096)));
  cmd->add_option("--held-out", o.held_out,
                  "Dev and test expressions each (0: the checkpoint's max_eval; 1000 here)")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t(0), std::int64_t(1000000)));
  cmd->add_option("--keep-checkpoints", o.keep_checkpoints,
                  "Keep the checkpoints trained here in this folder, as <model>.safetensors");
  cmd->add_option("--format", o.format, "table, csv or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "csv", "json"}));
  cmd->add_option("--out", o.out_file, "Write the results here (default: stdout)");
  cmd->add_flag("--quiet", o.quiet, "No progress lines on stderr");
  cmd->add_flag("--warm", o.warm,
                "Time each decode call right after an untimed call of the same examples, so "
                "no arm is timed on caches the other arms or training left cold");
  cmd->add_flag("--profile", o.profile,
                "After the rounds, decode the batch and the one-length batches once more with "
                "work profiling on: per sequence, kernel time and bytes moved by kind");
  return cmd;
}

int run_bench_decode(const BenchDecodeOptions& options) {
  BenchDecodeOptions o = options;
  if (o.checkpoint.empty() && o.held_out == 0) o.held_out = 1000;
  check_writable(o.out_file, "output");
  const std::vector<std::string> names = chosen_models(o);
  set_num_threads(o.threads);
  MachineInfo machine = machine_info(o.threads);
  const CheckpointFolder folder(o.keep_checkpoints);
  std::vector<ModelRun> runs;
  for (const std::string& name : names) {
    const bool given = !o.checkpoint.empty();
    const std::string path = given ? o.checkpoint : folder.file(name);
    json training = given ? json() : train_checkpoint(name, o, path);
    runs.push_back(measure_model(o, name, path, std::move(training)));
  }
  machine.load_after = load_average();
  const std::string table = render_table(runs, machine, o);
  const std::string text = o.format == "json"  ? render_json(runs, machine, o)
                           : o.format == "csv" ? render_csv(runs, machine)
                                               : table;
  if (o.format != "table" || !o.out_file.empty()) std::cerr << table << std::flush;
  if (o.out_file.empty())
    std::cout << text << std::flush;
  else
    write_text(o.out_file, text, "output");
  return 0;
}

}  // namespace weft::tool
