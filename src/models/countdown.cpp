// The countdown decoder (models/countdown.h). The state is [c, 1, vector(w)]: one step takes c
// to c - 1 (a linear map) and scores the next token from tanh(4c - 2) (about +1 while words
// remain, -1 at zero), the word table and the seeded transition scores, so the argmax is the
// word w while c >= 1 and the end token at c = 0.
#include "weft/models/countdown.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "weft/autodiff/ops.h"
#include "weft/core/error.h"
#include "weft/core/rng.h"
#include "weft/models/decoding.h"
#include "weft/models/iterative_decoding.h"
#include "weft/models/registry.h"

namespace weft::models {
namespace {

using nlohmann::json;

class CountdownModel final : public Model, public DecodingModel {
 public:
  CountdownModel(const OptionValues& options, const ModelInit& init);

  std::string name() const override { return "countdown"; }
  const OptionValues& options() const override { return options_; }
  std::vector<Parameter> parameters() override {
    return {embed_, shift_, gate_, end_, table_, pair_};
  }
  std::size_t num_examples(train::Split) const override { return 0; }
  train::BatchFigures train_batch(const train::Batch&, Rng&) override { refuse_training(); }
  train::BatchFigures eval_batch(const train::Batch&) override { refuse_training(); }
  json parse_example(std::string_view line, std::string_view where) const override;
  std::vector<json> predict(std::span<const json> examples) override {
    return decode(examples, decode_settings());
  }
  const blocks::Block& root_block() const override { return no_block_; }
  std::span<const json> examples(train::Split) const override { return {}; }
  DecodingModel* decoding() override { return this; }

  const loom::Loom& decoding_loom() const override { return loom_; }
  Device decoding_device() const override { return Device::kCpu; }
  DecodeSettings decode_settings() const override {
    return {.beam = int(options_.integer("beam")),
            .max_steps = std::int32_t(options_.integer("max_steps")),
            .length_penalty = options_.number("length_penalty")};
  }
  std::int32_t max_decode_steps() const override { return decoder_.max_length; }
  std::vector<std::unique_ptr<DecodeJob>> encode(flow::Engine& engine,
                                                 std::span<const json> examples,
                                                 const DecodeSettings& settings) override;

 private:
  [[noreturn]] static void refuse_training() {
    fail("countdown", "its weights are set, not learned: it serves and infers, it does not train");
  }
  void set_weights(std::int64_t width, std::int64_t vocabulary);
  std::vector<float> word_vectors(std::int64_t width, std::int64_t vocabulary) const;
  void add_step_operation(std::int64_t dim, std::int64_t vocabulary);

  OptionValues options_;
  std::int64_t words_ = 0, max_count_ = 0;
  Parameter embed_, shift_, gate_, end_, table_, pair_;
  loom::Loom loom_;
  loom::TypeId state_ = 0, token_ = 0;
  loom::OpId step_ = 0;
  flow::Decoder decoder_;
  blocks::Block no_block_;  // no static weave: everything runs as flow programs
};

CountdownModel::CountdownModel(const OptionValues& options, const ModelInit& init)
    : options_(options) {
  words_ = options.integer("words");
  max_count_ = options.integer("max_count");
  const std::int64_t vocabulary = words_ + 1;
  const std::int64_t width = options.integer("width") > 0 ? options.integer("width") : vocabulary;
  const std::int64_t in = 2 + vocabulary, dim = 2 + width;
  if (init.max_parameter_elements > 0 &&
      in * dim + dim * dim + dim + vocabulary + dim * vocabulary + vocabulary * vocabulary >
          init.max_parameter_elements)
    fail("countdown", "words=", words_, " and width=", width, " ask for more parameters than ",
         init.parameter_budget_reason);
  set_weights(width, vocabulary);
  add_step_operation(dim, vocabulary);
  decoder_.step = [this](flow::Context& ctx, flow::Val state, std::int32_t previous) {
    if (previous != 0 && previous == options_.integer("fail_word"))
      fail("countdown", "fail_word: word ", previous, " fails this decoder (a test of isolation)");
    std::vector<float> onehot(std::size_t(words_ + 1), 0.0f);
    onehot[std::size_t(previous)] = 1;
    const auto outs = ctx.call(step_, {state, ctx.constant(token_, onehot)});
    return flow::DecoderStep{outs[0], outs[1]};
  };
  decoder_.start_token = 0;
  decoder_.end_token = 0;
  decoder_.max_length = std::int32_t(max_count_ + 1);
}

// Each word's vector: one-hot (width 0), or seeded random unit vectors, nearly orthogonal
// when wide (word 0, the end token, has none).
std::vector<float> CountdownModel::word_vectors(std::int64_t width, std::int64_t vocabulary) const {
  std::vector<float> vectors(std::size_t(vocabulary * width), 0.0f);
  const bool one_hot = options_.integer("width") == 0;
  Rng rng(std::uint64_t(options_.integer("seed")) + 1);
  for (std::int64_t w = 1; w < vocabulary; ++w) {
    float* v = vectors.data() + w * width;
    double norm = 0;
    for (std::int64_t k = 0; k < width; ++k) {
      v[k] = one_hot ? float(k == w) : rng.normal();
      norm += double(v[k]) * double(v[k]);
    }
    for (std::int64_t k = 0; k < width; ++k) v[k] = float(double(v[k]) / std::sqrt(norm));
  }
  return vectors;
}

// The counter, threshold and word table as described above; the transition scores seeded.
void CountdownModel::set_weights(std::int64_t width, std::int64_t vocabulary) {
  const std::int64_t in = 2 + vocabulary, dim = 2 + width;
  const std::vector<float> words = word_vectors(width, vocabulary);
  std::vector<float> embed(std::size_t(in * dim), 0.0f), shift(std::size_t(dim * dim), 0.0f);
  embed[0] = 1, embed[std::size_t(dim + 1)] = 1;  // c and 1 pass through
  for (std::int64_t w = 1; w < vocabulary; ++w)
    std::copy_n(words.data() + w * width, width, embed.data() + (2 + w) * dim + 2);
  for (std::int64_t i = 0; i < dim; ++i) shift[std::size_t(i * dim + i)] = 1;
  shift[std::size_t(1 * dim + 0)] = -1;  // c' = c - 1
  std::vector<float> gate(std::size_t(dim), 0.0f);
  gate[0] = 4, gate[1] = -2;  // tanh(4c - 2)
  std::vector<float> end(std::size_t(vocabulary), 3.0f);
  end[0] = -6;  // the end token when the gate is negative, words when it is positive
  std::vector<float> table(std::size_t(dim * vocabulary), 0.0f);
  for (std::int64_t w = 1; w < vocabulary; ++w)
    for (std::int64_t k = 0; k < width; ++k)
      table[std::size_t((2 + k) * vocabulary + w)] = 3 * words[std::size_t(w * width + k)];
  Rng rng(std::uint64_t(options_.integer("seed")));
  std::vector<float> pair(std::size_t(vocabulary * vocabulary));
  for (float& v : pair) v = rng.uniform(-0.5f, 0.5f);
  embed_ = Parameter("embed", Tensor::from_vector({in, dim}, embed));
  shift_ = Parameter("shift", Tensor::from_vector({dim, dim}, shift));
  gate_ = Parameter("gate", Tensor::from_vector({dim, 1}, gate));
  end_ = Parameter("end", Tensor::from_vector({1, vocabulary}, end));
  table_ = Parameter("table", Tensor::from_vector({dim, vocabulary}, table));
  pair_ = Parameter("pair", Tensor::from_vector({vocabulary, vocabulary}, pair));
}

void CountdownModel::add_step_operation(std::int64_t dim, std::int64_t vocabulary) {
  const loom::TypeShape state{DType::kFloat32, {dim}, "state"};
  const loom::TypeShape token{DType::kFloat32, {vocabulary}, "token"};
  const loom::TypeShape log_probs{DType::kFloat32, {vocabulary}, "log_probs"};
  // (state, previous token) -> (state·shift, log_softmax(tanh(state·gate)·end + state·table +
  // token·pair))
  step_ = loom_.add_operation("step", {state, token}, {state, log_probs}, [this](auto in) {
    Tape& t = Tape::current();
    const Var gate = tanh(matmul(in[0], t.parameter(gate_)));
    const Var scores = matmul(gate, t.parameter(end_)) + matmul(in[0], t.parameter(table_)) +
                       matmul(in[1], t.parameter(pair_));
    return std::vector<Var>{matmul(in[0], t.parameter(shift_)), log_softmax(scores)};
  });
  state_ = loom_.type_id(state);
  token_ = loom_.type_id(token);
}

json CountdownModel::parse_example(std::string_view line, std::string_view where) const {
  const json value = json::parse(line, nullptr, false);
  const auto bad = [&](const std::string& why) -> json {
    fail("countdown", where, ": ", why, R"( (an example is {"count": n, "word": w}))");
  };
  if (!value.is_object() || !value.contains("count")) return bad("not a JSON object with a count");
  const json& count = value["count"];
  if (!count.is_number_integer() || count.get<std::int64_t>() < 0 ||
      count.get<std::int64_t>() > max_count_)
    return bad(fmt::format("count must be an integer in [0, {}] (max_count), got {}", max_count_,
                           count.dump()));
  const json word = value.value("word", json(1));
  if (!word.is_number_integer() || word.get<std::int64_t>() < 1 ||
      word.get<std::int64_t>() > words_)
    return bad(fmt::format("word must be an integer in [1, {}], got {}", words_, word.dump()));
  return json{{"count", count}, {"word", word}};
}

// One example's search: the decoder bounded by the request, and what the search keeps.
class CountdownJob final : public DecodeJob {
 public:
  CountdownJob(const flow::Decoder& decoder, flow::Val initial, const DecodeSettings& settings)
      : decoder_(bounded_decoder(decoder, settings)), initial_(initial), settings_(settings) {}
  flow::Program program(flow::Context& ctx) override {
    return decode_program(ctx, decoder_, initial_, settings_, kept_);
  }
  json answer() const override {
    if (kept_.empty()) fail("countdown", "the answer was asked before the program was done");
    return hypotheses_json(kept_, settings_, decoder_.max_length);
  }

 private:
  flow::Decoder decoder_;
  flow::Val initial_;
  DecodeSettings settings_;
  std::vector<flow::Hypothesis> kept_;
};

std::vector<std::unique_ptr<DecodeJob>> CountdownModel::encode(flow::Engine& engine,
                                                               std::span<const json> examples,
                                                               const DecodeSettings& settings) {
  const std::int64_t in = 3 + words_;
  std::vector<float> rows(examples.size() * std::size_t(in), 0.0f);
  for (std::size_t e = 0; e < examples.size(); ++e) {
    float* row = rows.data() + e * std::size_t(in);
    row[0] = float(examples[e].at("count").get<std::int64_t>());
    row[1] = 1;
    row[2 + examples[e].at("word").get<std::int64_t>()] = 1;
  }
  Tape& tape = Tape::current();
  const Var input = tape.constant(Tensor::from_vector({std::int64_t(examples.size()), in}, rows));
  const std::vector<flow::Val> initial =
      engine.import(matmul(input, tape.parameter(embed_)), state_);
  std::vector<std::unique_ptr<DecodeJob>> jobs;
  for (const flow::Val v : initial)
    jobs.push_back(std::make_unique<CountdownJob>(decoder_, v, settings));
  return jobs;
}

ModelEntry countdown_entry() {
  ModelEntry entry;
  entry.name = "countdown";
  entry.summary = "a set-weight decoder writing a word `count` times (serving tests, benchmarks)";
  entry.input = R"({"count": 12, "word": 3})";
  const auto runtime = OptionRole::kRuntime;
  entry.options = {
      {"max_count", OptionKind::kInt, 64, "the largest count an example may ask for",
       OptionRole::kArchitecture, 0, 1e6},
      {"words", OptionKind::kInt, 8, "words in the vocabulary (the end token is one more)",
       OptionRole::kArchitecture, 1, 256},
      {"width", OptionKind::kInt, 0,
       "the state's word part: 0 one-hot, else random unit vectors this wide (a costlier step)",
       OptionRole::kArchitecture, 0, 4096},
      {"beam", OptionKind::kInt, 0, "predict()'s beam width (0: greedy decoding)", runtime, 0, 64},
      {"max_steps", OptionKind::kInt, 0, "predict()'s bound on steps (0: max_count + 1)", runtime,
       0, 1e7},
      {"length_penalty", OptionKind::kFloat, 0.0,
       "beam search ranks hypotheses by log_prob / length^this (0: the plain sum)", runtime, 0,
       kMaxLengthPenalty},
      {"fail_word", OptionKind::kInt, 0,
       "a word whose next step throws (0: none): a test of failure isolation", runtime, 0, 256},
  };
  entry.recipe = [](const OptionValues&) { return json::object(); };  // the Trainer's defaults
  entry.create = [](const OptionValues& options, const ModelInit& init) {
    return std::unique_ptr<Model>(new CountdownModel(options, init));
  };
  return entry;
}

}  // namespace

void register_countdown_model() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const std::string& name : model_names())
      if (name == "countdown") return;
    register_model(countdown_entry());
  });
}

}  // namespace weft::models
