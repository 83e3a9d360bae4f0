// The models that decode with flow programs (tree2seq, seq2tree): their gradients, through the
// decoder's steps and the encoder's static weave, against finite differences; a batch decoded
// together equals its examples decoded one at a time (greedy and beam), and so do the engine
// steps each example's decoding takes (decode's steps); beam width 1 gives
// greedy's answers; a short training run beats always answering the most frequent expression;
// malformed input is named with what and where.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>

#include "models/attention_decoder.h"
#include "op_test_util.h"
#include "weft/core/error.h"
#include "weft/models/flow_model.h"
#include "weft/models/registry.h"
#include "weft/nn/mode.h"

namespace weft::models {
namespace {

using weft::testing::expect_error;

std::unique_ptr<Model> tiny(const std::string& name,
                            nlohmann::json overrides = nlohmann::json::object()) {
  OptionValues options = find_model(name).default_options();
  nlohmann::json values = {
      {"hidden", 4}, {"max_depth", 2}, {"max_train", 6}, {"max_eval", 12}, {"seed", 11}};
  values.update(overrides);
  options.update(values, "test");
  return create_model(options);
}

class DecodingModels : public ::testing::TestWithParam<std::string> {};

// Random weights of a larger scale than the initialisers', so every path carries gradient and
// an untrained model's decisions vary (trees of many shapes, texts of many lengths).
void scramble(Model& model) {
  std::uint64_t seed = 100;
  for (Parameter p : model.parameters()) {
    p.value() = weft::testing::random_tensor(p.value().shape(), seed++, -0.8f, 0.8f);
    p.zero_grad();
  }
  // seq2tree's operators (decisions 10-12) a little more likely, so its trees grow.
  if (model.name() == "seq2tree")
    for (Parameter p : model.parameters())
      if (p.name() == "decoder/scores/bias")
        for (int op = 10; op < 13; ++op) p.value().data<float>()[op] += 3.5f;
}

// The mean teacher-forced loss of a batch, as train_batch backpropagates it.
double mean_loss(Model& model, std::span<const std::size_t> ids) {
  const train::BatchFigures f = model.eval_batch(train::Batch{train::Split::kTrain, ids});
  return f.loss_sum / double(f.examples);
}

TEST_P(DecodingModels, GradientsMatchFiniteDifferences) {
  std::unique_ptr<Model> model = tiny(GetParam());
  const std::vector<std::size_t> ids{0, 1, 2, 3, 4, 5};
  scramble(*model);
  Rng rng(1);
  model->train_batch(train::Batch{train::Split::kTrain, ids}, rng);
  int checked = 0, encoder_nonzero = 0;
  for (Parameter p : model->parameters()) {
    const std::vector<float> grad = p.grad().to_float_vector();
    const std::size_t stride = std::max<std::size_t>(1, grad.size() / 5);
    weft::testing::check_finite_differences(
        GetParam() + " " + p.name(), std::span<float>(p.value().data<float>(), grad.size()), grad,
        [&] { return mean_loss(*model, ids); }, /*step=*/1e-2, /*abs_tol=*/3e-3,
        /*rel_tol=*/3e-2, stride);
    for (std::size_t i = 0; i < grad.size(); i += stride) {
      ++checked;
      if (p.name().starts_with("encoder/") && std::abs(grad[i]) > 1e-6f) ++encoder_nonzero;
    }
  }
  EXPECT_GT(checked, 30);
  EXPECT_GT(encoder_nonzero, 3);  // the loss reaches the encoder through the decoder's steps
}

// Answers equal up to float noise in the log-probabilities.
void expect_same_answer(const nlohmann::json& got, const nlohmann::json& want,
                        const std::string& where) {
  EXPECT_EQ(got["text"], want["text"]) << where;
  EXPECT_EQ(got["length"], want["length"]) << where;
  EXPECT_NEAR(got["log_prob"].get<double>(), want["log_prob"].get<double>(), 1e-4) << where;
  if (want.contains("expression")) {
    EXPECT_EQ(got["expression"], want["expression"]) << where;
  }
  if (want.contains("beams")) {
    ASSERT_EQ(got["beams"].size(), want["beams"].size()) << where;
    for (std::size_t k = 0; k < want["beams"].size(); ++k)
      EXPECT_EQ(got["beams"][k]["text"], want["beams"][k]["text"]) << where << " beam " << k;
  }
}

TEST_P(DecodingModels, ABatchDecodesAsItsExamplesAlone) {
  std::unique_ptr<Model> model = tiny(GetParam(), {{"hidden", 16}, {"max_depth", 3}});
  scramble(*model);
  DecodingModel* decoder = model->decoding();
  ASSERT_NE(decoder, nullptr);
  const std::span<const nlohmann::json> examples = model->examples(train::Split::kDev);
  for (int beam : {0, 3}) {
    const DecodeSettings settings{.beam = beam};
    const std::vector<nlohmann::json> together = decoder->decode(examples, settings);
    ASSERT_EQ(together.size(), examples.size());
    std::set<std::size_t> lengths;
    for (std::size_t e = 0; e < examples.size(); ++e) {
      const std::vector<nlohmann::json> alone = decoder->decode(examples.subspan(e, 1), settings);
      expect_same_answer(together[e], alone[0],
                         "beam " + std::to_string(beam) + ", example " + std::to_string(e));
      lengths.insert(together[e]["length"].get<std::size_t>());
    }
    EXPECT_GT(lengths.size(), 1u);  // the batch's outputs differed in length
  }
}

// decode()'s steps: each example's length in engine steps is the same in the batch as alone;
// greedy decoding takes one step per token or decision (the answer's "length"), a beam search
// at least as many as its best answer has; asking for them changes no answer.
TEST_P(DecodingModels, StepsAreEachExamplesLengthInAnyBatch) {
  std::unique_ptr<Model> model = tiny(GetParam(), {{"hidden", 16}, {"max_depth", 3}});
  scramble(*model);
  DecodingModel* decoder = model->decoding();
  const std::span<const nlohmann::json> examples = model->examples(train::Split::kDev);
  for (int beam : {0, 3}) {
    const DecodeSettings settings{.beam = beam};
    std::vector<std::int64_t> steps{-1};
    const std::vector<nlohmann::json> answers = decoder->decode(examples, settings, &steps);
    ASSERT_EQ(steps.size(), examples.size());
    EXPECT_EQ(answers, decoder->decode(examples, settings));
    std::set<std::int64_t> distinct(steps.begin(), steps.end());
    EXPECT_GT(distinct.size(), 1u);  // the examples took different numbers of steps
    for (std::size_t e = 0; e < examples.size(); ++e) {
      const std::string where = "beam " + std::to_string(beam) + ", example " + std::to_string(e);
      std::vector<std::int64_t> alone;
      decoder->decode(examples.subspan(e, 1), settings, &alone);
      EXPECT_EQ(alone, std::vector<std::int64_t>{steps[e]}) << where;
      const std::int64_t length = answers[e]["length"].get<std::int64_t>();
      if (beam == 0) {
        EXPECT_EQ(steps[e], length) << where;
      } else {
        EXPECT_GE(steps[e], length) << where;
      }
    }
  }
  std::vector<std::int64_t> none{7};
  EXPECT_TRUE(decoder->decode({}, DecodeSettings{}, &none).empty());
  EXPECT_TRUE(none.empty());
}

TEST_P(DecodingModels, BeamWidthOneGivesGreedyAnswers) {
  std::unique_ptr<Model> model = tiny(GetParam(), {{"hidden", 16}, {"max_depth", 3}});
  scramble(*model);
  const std::span<const nlohmann::json> examples = model->examples(train::Split::kDev);
  const auto greedy = model->decoding()->decode(examples, DecodeSettings{.beam = 0});
  const auto beam = model->decoding()->decode(examples, DecodeSettings{.beam = 1});
  for (std::size_t e = 0; e < examples.size(); ++e) {
    ASSERT_EQ(beam[e]["beams"].size(), 1u);
    expect_same_answer(beam[e], greedy[e], "example " + std::to_string(e));
  }
}

// Examples encoded to join a running batch (a server admitting requests between steps) have
// their attention memories padded to the most the model's data needs, so every step is one
// operation; the padding is masked, so greedy and beam answers are those of a whole batch, and
// one example alone joins with the memory size of a whole batch (one operation for both).
TEST_P(DecodingModels, JoiningExamplesAnswerAsAWholeBatchDoes) {
  std::unique_ptr<Model> model = tiny(GetParam(), {{"hidden", 16}, {"max_depth", 3}});
  scramble(*model);
  const std::span<const nlohmann::json> examples = model->examples(train::Split::kDev);
  for (const int beam : {0, 3}) {
    const auto whole = model->decoding()->decode(examples, DecodeSettings{.beam = beam});
    const auto joining =
        model->decoding()->decode(examples, DecodeSettings{.beam = beam, .joining = true});
    for (std::size_t e = 0; e < examples.size(); ++e) {
      const std::string where = "beam " + std::to_string(beam) + ", example " + std::to_string(e);
      expect_same_answer(joining[e], whole[e], where);
      const auto alone = model->decoding()->decode(examples.subspan(e, 1),
                                                   DecodeSettings{.beam = beam, .joining = true});
      expect_same_answer(alone[0], whole[e], where + " alone");
    }
  }
}

// Batched operation calls per engine step when the dev split's smallest and largest examples
// are encoded as two groups (a server admitting them at different times) into one engine.
double batched_calls_per_step(Model& model, bool joining) {
  const std::span<const nlohmann::json> examples = model.examples(train::Split::kDev);
  const auto size = [](const nlohmann::json& e) { return e.dump().size(); };
  const auto [small, large] =
      std::minmax_element(examples.begin(), examples.end(),
                          [&](const auto& a, const auto& b) { return size(a) < size(b); });
  DecodingModel& decoding = *model.decoding();
  Tape tape;
  tape.set_grad_enabled(false);
  TapeScope scope(tape);
  nn::ForwardMode mode(false);
  flow::Engine engine(decoding.decoding_loom(), tape, {}, decoding.decoding_device());
  const DecodeSettings settings{.beam = 0, .joining = joining};
  std::vector<std::unique_ptr<DecodeJob>> jobs = decoding.encode(engine, {&*small, 1}, settings);
  for (auto& job : decoding.encode(engine, {&*large, 1}, settings)) jobs.push_back(std::move(job));
  for (auto& job : jobs) engine.admit([&j = *job](flow::Context& ctx) { return j.program(ctx); });
  engine.run();
  return double(engine.stats().batched_calls) / double(engine.stats().steps);
}

TEST_P(DecodingModels, JoiningGroupsStepAsOneOperation) {
  std::unique_ptr<Model> model = tiny(GetParam(), {{"hidden", 16}, {"max_depth", 3}});
  EXPECT_EQ(batched_calls_per_step(*model, true), 1.0);
  EXPECT_GT(batched_calls_per_step(*model, false), 1.0);  // one operation per memory size
}

// What AttentionDecoder::step_beams issued for some beams, and what step() issued for each.
struct BothWays {
  flow::BeamStep together;
  std::vector<flow::DecoderStep> alone;
};

flow::Program issue_both_ways(flow::Context& ctx, const AttentionDecoder& decoder,
                              AttentionDecoder::Memory memory, std::vector<flow::Val> states,
                              std::vector<std::int32_t> inputs, std::vector<flow::Val> parents,
                              BothWays& out) {
  out.together = decoder.step_beams(ctx, memory, states, inputs, parents);
  for (std::size_t b = 0; b < states.size(); ++b)
    out.alone.push_back(decoder.step(ctx, memory, states[b], inputs[b],
                                     parents.empty() ? flow::Val{} : parents[b]));
  co_return;
}

void expect_near_values(const Tensor& got, const Tensor& want, const std::string& where) {
  const std::vector<double> a = got.to_double_vector(), b = want.to_double_vector();
  ASSERT_EQ(a.size(), b.size()) << where;
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], 1e-5) << where << " [" << i << "]";
}

// Beam search steps an example's beams together (one call per 8 beams, attending to the memory
// once); that must compute what stepping each beam alone computes, with and without the parent
// feed (with it, the memories padded as a joining example's are), for every group size and past
// one group.
TEST(AttentionDecoderBeams, SteppedTogetherEqualsOneBeamAtATime) {
  for (const bool parent_feed : {false, true}) {
    nn::ParameterStore store(7);
    loom::Loom loom;
    const AttentionDecoder decoder(store, loom, 6, 5, 4, parent_feed, 12);
    for (Parameter p : store.parameters())
      p.value() = weft::testing::random_tensor(p.value().shape(), 40 + p.value().numel(), -1, 1);
    Tape tape;
    tape.set_grad_enabled(false);
    TapeScope scope(tape);
    flow::Engine engine(loom, tape);
    const Var encoded = tape.constant(weft::testing::random_tensor({8, 6}, 3));
    const auto memories =
        decoder.memories(engine, encoded, {{0, 1, 2}, {3, 4, 5, 6, 7}}, "test", parent_feed);
    const std::vector<flow::Val> states = engine.import(
        tape.constant(weft::testing::random_tensor({10, 12}, 4)), decoder.state_type());
    const std::vector<flow::Val> parents = engine.import(
        tape.constant(weft::testing::random_tensor({10, 12}, 5)), decoder.state_type());
    const std::vector<std::size_t> counts{1, 2, 3, 8, 10};  // 10: a group of 8 and one of 2
    std::vector<BothWays> issued(2 * counts.size());
    for (std::size_t e = 0; e < 2; ++e)
      for (std::size_t c = 0; c < counts.size(); ++c) {
        const std::size_t n = counts[c];
        std::vector<std::int32_t> inputs;
        for (std::size_t b = 0; b < n; ++b) inputs.push_back(std::int32_t((b * 3 + e) % 5));
        std::vector<flow::Val> fed(states.rbegin(), states.rbegin() + std::ptrdiff_t(n));
        std::vector<flow::Val> fed_parents;
        if (parent_feed) fed_parents.assign(parents.begin(), parents.begin() + std::ptrdiff_t(n));
        BothWays& out = issued[e * counts.size() + c];
        engine.admit([&, e, fed, inputs, fed_parents](flow::Context& ctx) {
          return issue_both_ways(ctx, decoder, memories[e], fed, inputs, fed_parents, out);
        });
      }
    engine.run();
    for (std::size_t k = 0; k < issued.size(); ++k) {
      const std::string where =
          (parent_feed ? "parent feed, " : "") + std::string("program ") + std::to_string(k);
      ASSERT_EQ(engine.state(k), flow::ProgramState::kDone) << engine.error(k);
      const BothWays& both = issued[k];
      ASSERT_EQ(both.together.states.size(), both.alone.size()) << where;
      std::vector<Tensor> rows;
      for (flow::Val v : both.together.log_probs) {
        const Tensor t = engine.value(v);
        const std::int64_t r = t.rank() == 1 ? 1 : t.shape()[0];
        for (std::int64_t i = 0; i < r; ++i) rows.push_back(t.rank() == 1 ? t : t.rows_view(i, 1));
      }
      ASSERT_EQ(rows.size(), both.alone.size()) << where;
      for (std::size_t b = 0; b < both.alone.size(); ++b) {
        expect_near_values(engine.value(both.together.states[b]), engine.value(both.alone[b].state),
                           where + " state " + std::to_string(b));
        expect_near_values(rows[b], engine.value(both.alone[b].log_probs),
                           where + " log_probs " + std::to_string(b));
      }
    }
  }
}

// A length penalty p ranks a beam's hypotheses by log_prob / length^p. The search is the same
// (partial hypotheses rank by their sum either way), so of the hypotheses it finished, the
// penalty keeps those best by that score: every hypothesis kept without it that scores above
// the worst kept with it is kept with it too.
TEST_P(DecodingModels, LengthPenaltyRanksTheBeamsByTheFormula) {
  std::unique_ptr<Model> model = tiny(GetParam(), {{"hidden", 16}, {"max_depth", 3}});
  scramble(*model);
  const std::span<const nlohmann::json> examples = model->examples(train::Split::kDev);
  const auto plain = model->decoding()->decode(examples, DecodeSettings{.beam = 4});
  const auto penalised =
      model->decoding()->decode(examples, DecodeSettings{.beam = 4, .length_penalty = 1.0});
  for (std::size_t e = 0; e < examples.size(); ++e) {
    const nlohmann::json& beams = penalised[e]["beams"];
    std::set<std::pair<std::string, double>> kept;  // text and length
    for (std::size_t k = 0; k < beams.size(); ++k) {
      kept.insert({beams[k]["text"].get<std::string>(), beams[k]["length"].get<double>()});
      const double length = beams[k]["length"].get<double>();
      EXPECT_NEAR(beams[k]["score"].get<double>(), beams[k]["log_prob"].get<double>() / length,
                  1e-9)
          << "example " << e << " beam " << k;
      if (k > 0) {
        EXPECT_GE(beams[k - 1]["score"].get<double>(), beams[k]["score"].get<double>());
      }
    }
    ASSERT_EQ(beams.size(), 4u);
    const double worst = beams[3]["score"].get<double>();
    for (const auto& h : plain[e]["beams"]) {
      const double length = h["length"].get<double>();
      if (h["log_prob"].get<double>() / length > worst + 1e-9) {
        EXPECT_TRUE(kept.contains({h["text"].get<std::string>(), length}))
            << "example " << e << ": " << h.dump() << " was dropped";
      }
    }
    EXPECT_EQ(penalised[e]["text"], beams[0]["text"]);
  }
}

TEST_P(DecodingModels, ShortTrainingBeatsTheMostFrequentAnswer) {
  std::unique_ptr<Model> model = tiny(
      GetParam(),
      {{"hidden", 32}, {"max_depth", 1}, {"max_train", 1500}, {"max_eval", 100}, {"eval_beam", 3}});
  train::TrainerOptions options = find_model(GetParam()).training_options(model->options());
  // A constant rate: the recipe's cosine schedule needs its 8 epochs.
  options.update({{"epochs", 3}, {"batch_size", 32}, {"progress", "off"}, {"schedule", "constant"}},
                 "test");
  train::Trainer trainer(options);
  trainer.fit(*model);
  const train::MetricSet test = trainer.evaluate(*model, train::Split::kTest);
  const double baseline = static_cast<FlowModel&>(*model).majority_rate(train::Split::kTest);
  EXPECT_GT(test.value("exact_match"), baseline + 0.4) << test.to_json();
  EXPECT_GT(test.value("exact_match_beam"), baseline + 0.4) << test.to_json();
}

INSTANTIATE_TEST_SUITE_P(Models, DecodingModels, ::testing::Values("tree2seq", "seq2tree"));

TEST(DecodingModels, MalformedInputIsNamedWithWhatAndWhere) {
  std::unique_ptr<Model> tree = tiny("tree2seq");
  expect_error(
      [&] {
        tree->parse_example(R"({"op": "/", "left": {"number": 1}, "right": {"number": 2}})",
                            "in.jsonl:3");
      },
      {"[tree2seq] in.jsonl:3: ", "unknown op \"/\""});
  expect_error([&] { tree->parse_example(R"({"number": 12})", "in.jsonl:4"); },
               {"[tree2seq] in.jsonl:4: ", "must be a digit 0-9, got 12"});
  std::unique_ptr<Model> text = tiny("seq2tree");
  expect_error([&] { text->parse_example("(3 + x)", "in.txt:2"); },
               {"[seq2tree] in.txt:2: column 6: unexpected character 'x'"});
  expect_error([&] { text->parse_example("(3 + 4", "in.txt:5"); },
               {"[seq2tree] in.txt:5: the text ends where ')' was expected"});
  expect_error([&] { text->parse_example("3 4", "in.txt:6"); },
               {"[seq2tree] in.txt:6: column 3: expected an operator or the end of the expression, "
                "got '4'"});
  expect_error([&] { text->parse_example(R"({"text": 7})", "in.txt:7"); },
               {"[seq2tree] in.txt:7: expected {\"text\": \"...\"}"});
  // A bad example handed straight to decode (Python dicts skip parse_example) names its index.
  const std::vector<nlohmann::json> batch{tree->examples(train::Split::kDev)[0],
                                          {{"expression", {{"number", -1}}}}};
  expect_error([&] { tree->predict(batch); }, {"[tree2seq] example 1: ", "must be a digit"});
  expect_error(
      [&] { tree->decoding()->decode(std::span(batch).first(1), DecodeSettings{.beam = -2}); },
      {"[tree2seq] the beam width must be 0 (greedy) or more, got -2"});
}

}  // namespace
}  // namespace weft::models
