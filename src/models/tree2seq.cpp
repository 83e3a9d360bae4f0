// tree2seq (models/tree2seq.h): the Tree-LSTM encoder woven statically, the attention decoder
// run as flow programs (teacher forcing, greedy decoding, beam search), the registry entry.
#include "weft/models/tree2seq.h"

#include <algorithm>

#include "attention_decoder.h"
#include "expression_tokens.h"
#include "weft/autodiff/ops.h"
#include "weft/core/error.h"
#include "weft/io/json_lines.h"
#include "weft/models/calculator_data.h"
#include "weft/models/registry.h"

namespace weft::models {

using nlohmann::json;
namespace tokens = expression_tokens;

namespace {

constexpr std::int32_t kEnd = tokens::kSymbols;  // the last output
constexpr std::int32_t kStart = kEnd + 1;        // an input only
constexpr std::int64_t kOutputs = kEnd + 1, kInputs = kStart + 1;

const json& expression_of(const json& example) {
  return example.is_object() && example.contains("expression") ? example["expression"] : example;
}

struct TreeEncoding : FlowModel::Encoding {
  AttentionDecoder::Memory memory;
  flow::Val root;
  std::int32_t max_length = 0;  // tokens written at most, the end token included
};

}  // namespace

// Its registry entry: hidden, max_depth and leaf_probability of the generated expressions
// (max_train / max_eval 0: 20,000 training and 1,000 dev and test expressions), and the
// decoding options (beam, eval_beam).
ModelEntry tree2seq_entry() {
  ModelEntry entry;
  entry.name = "tree2seq";
  entry.summary =
      "Tree-LSTM over a calculator expression, writes it as infix text with attention "
      "(decoded as flow programs; greedy or beam)";
  entry.input =
      "an expression as JSON: {\"number\": 7} or {\"op\": \"+\", \"left\": ..., "
      "\"right\": ...}";
  entry.options = expression_model_options();
  entry.recipe = expression_model_recipe;
  entry.create = [](const OptionValues& options, const ModelInit& init) {
    return std::make_unique<Tree2SeqModel>(options, init);
  };
  return entry;
}

struct Tree2SeqModel::Layers {
  std::unique_ptr<nn::Embedding> digits, operators, positions;
  std::unique_ptr<nn::NaryTreeLSTMCell> cell;
  std::unique_ptr<AttentionDecoder> decoder;
  loom::OpId leaf = 0, node = 0;
};

namespace {

// A batch's Tree-LSTM calls, children first: every node's value, its example's node indices
// (the root last) and its position in the text's order of nodes (in-order).
struct TreeWeave {
  loom::Weaver& weaver;
  loom::OpId leaf, inner;
  loom::TypeId id;
  std::vector<loom::Value> nodes;
  std::vector<std::int32_t> positions;

  loom::Value add(const json& node, std::vector<std::int64_t>& rows, std::int32_t& next) {
    loom::Value value;
    std::int32_t position = 0;
    if (node.contains("number")) {
      const std::int32_t digit = node["number"].get<std::int32_t>();
      position = next++;
      value = weaver.call(leaf, {weaver.constant(id, std::span(&digit, 1))})[0];
    } else {
      const loom::Value left = add(node["left"], rows, next);
      position = next++;
      const loom::Value right = add(node["right"], rows, next);
      const std::int32_t op =
          tokens::operator_symbol(node["op"].get<std::string>()) - tokens::kPlus;
      value = weaver.call(inner, {weaver.constant(id, std::span(&op, 1)), left, right})[0];
    }
    rows.push_back(std::int64_t(nodes.size()));
    nodes.push_back(value);
    positions.push_back(position);
    return value;
  }
};

}  // namespace

Tree2SeqModel::Tree2SeqModel(const OptionValues& options, const ModelInit& init)
    : FlowModel(options, init), layers_(std::make_unique<Layers>()) {
  generate_splits(
      init,
      [](const json& expression) {
        return json{{"expression", expression}};
      },
      kDefaultTrainExpressions, kDefaultEvalExpressions);
  const std::int64_t n = options.integer("hidden");
  Layers& l = *layers_;
  l.digits = std::make_unique<nn::Embedding>(store(), "encoder/digits", 10, n);
  l.operators = std::make_unique<nn::Embedding>(store(), "encoder/operators", 3, n);
  l.cell = std::make_unique<nn::NaryTreeLSTMCell>(store(), "encoder/cell", n, n, 2);
  l.positions = std::make_unique<nn::Embedding>(store(), "encoder/positions",
                                                AttentionDecoder::kMemorySizes.back(), n);
  // Joining examples attend to memories of a full tree of max_depth's nodes.
  const std::int64_t nodes = (std::int64_t(2) << options.integer("max_depth")) - 1;
  l.decoder =
      std::make_unique<AttentionDecoder>(store(), loom(), n, kInputs, kOutputs, false, nodes);
  const loom::TypeShape state = loom().type(l.decoder->state_type());
  const loom::TypeShape id = loom().type(l.decoder->id_type());
  Layers* layers = layers_.get();
  l.leaf = loom().add_operation("leaf", {id}, {state}, [layers, n](std::span<const Var> in) {
    const Var none = Tape::current().constant(
        Tensor::zeros({in[0].shape()[0], n}, DType::kFloat32, in[0].value().device()));
    const auto [h, c] = (*layers->cell)((*layers->digits)(in[0]), {none, none}, {none, none});
    return std::vector<Var>{concat({h, c})};
  });
  l.node = loom().add_operation(
      "node", {id, state, state}, {state}, [layers, n](std::span<const Var> in) {
        const auto [h, c] = (*layers->cell)((*layers->operators)(in[0]),
                                            {slice(in[1], 1, 0, n), slice(in[2], 1, 0, n)},
                                            {slice(in[1], 1, n, n), slice(in[2], 1, n, n)});
        return std::vector<Var>{concat({h, c})};
      });
}

Tree2SeqModel::~Tree2SeqModel() = default;

std::int32_t Tree2SeqModel::max_decode_steps() const {
  return std::int32_t(2 * AttentionDecoder::kMemorySizes.back());
}

json Tree2SeqModel::parse_example(std::string_view line, std::string_view where) const {
  const json value = io::parse_json(line, where, "tree2seq");
  const json& expression = expression_of(value);
  tokens::check_expression(expression, "tree2seq", where);
  return json{{"expression", expression}};
}

std::vector<std::unique_ptr<FlowModel::Encoding>> Tree2SeqModel::encode_batch(
    flow::Engine& engine, std::span<const json> examples, bool joining) {
  const Layers& l = *layers_;
  loom::Weaver weaver(loom());
  TreeWeave trees{weaver, l.leaf, l.node, l.decoder->id_type(), {}, {}};
  std::vector<std::vector<std::int64_t>> rows(examples.size());
  for (std::size_t e = 0; e < examples.size(); ++e) {
    const json& expression = expression_of(examples[e]);
    tokens::check_expression(expression, "tree2seq", "example " + std::to_string(e));
    std::int32_t next = 0;
    trees.add(expression, rows[e], next);
  }
  loom::Executor executor(loom(), Tape::current(), decoding_device());
  const loom::LoomResult result = executor.run(weaver);
  const std::vector<flow::Val> states = engine.import(result, trees.nodes);
  // Equal digits have equal leaf states: their positions in the text tell them apart.
  const Tensor positions = Tensor::from_vector({std::int64_t(trees.positions.size())},
                                               trees.positions, decoding_device());
  const Var all = l.decoder->hidden_half(engine.gather(states)) + (*l.positions)(positions);
  const std::vector<AttentionDecoder::Memory> memories =
      l.decoder->memories(engine, all, rows, "tree2seq", joining);
  std::vector<std::unique_ptr<Encoding>> out;
  for (std::size_t e = 0; e < examples.size(); ++e) {
    auto encoding = std::make_unique<TreeEncoding>();
    encoding->memory = memories[e];
    encoding->root = states[std::size_t(rows[e].back())];
    encoding->max_length = std::int32_t(2 * rows[e].size());  // 2n - 1 symbols and the end
    out.push_back(std::move(encoding));
  }
  return out;
}

flow::Program Tree2SeqModel::teacher_program(flow::Context& ctx, const Encoding& encoding,
                                             const json& example, Targets& out) {
  const auto& tree = static_cast<const TreeEncoding&>(encoding);
  std::vector<std::int32_t> gold = tokens::expression_tokens(expression_of(example));
  gold.push_back(kEnd);
  flow::Val state = tree.root;
  std::int32_t previous = kStart;
  for (std::int32_t token : gold) {
    const flow::DecoderStep step = layers_->decoder->step(ctx, tree.memory, state, previous);
    out.log_probs.push_back(step.log_probs);
    out.gold.push_back(token);
    state = step.state;
    previous = token;
  }
  co_return;
}

namespace {

// A hypothesis in the decoding answer's schema (iterative_decoding.h): its text (the end token
// dropped), and whether it ended within `bound` tokens.
json hypothesis_json(const flow::Hypothesis& h, std::int32_t bound) {
  std::vector<std::int32_t> symbols = h.tokens;
  if (h.ended && !symbols.empty()) symbols.pop_back();
  json out{{"text", tokens::tokens_text(symbols)},
           {"length", h.tokens.size()},
           {"log_prob", h.log_prob},
           {"score", h.score}};
  mark_ending(out, h.ended, bound);
  return out;
}

class TextJob : public DecodeJob {
 public:
  TextJob(const AttentionDecoder& decoder, std::unique_ptr<TreeEncoding> encoding,
          const DecodeSettings& settings)
      : encoding_(std::move(encoding)), settings_(settings) {
    decoder_.step = [&decoder, this](flow::Context& ctx, flow::Val state, std::int32_t token) {
      return decoder.step(ctx, encoding_->memory, state, token);
    };
    decoder_.step_beams = [&decoder, this](flow::Context& ctx, std::span<const flow::Val> states,
                                           std::span<const std::int32_t> tokens) {
      return decoder.step_beams(ctx, encoding_->memory, states, tokens);
    };
    decoder_.start_token = kStart;
    decoder_.end_token = kEnd;
    decoder_.max_length = settings.max_steps > 0
                              ? std::min(settings.max_steps, encoding_->max_length)
                              : encoding_->max_length;
  }
  flow::Program program(flow::Context& ctx) override {
    if (settings_.beam == 0) return flow::greedy_program(ctx, decoder_, encoding_->root, greedy_);
    return flow::beam_program(ctx, decoder_, encoding_->root,
                              flow::BeamOptions{settings_.beam, settings_.length_penalty}, beams_);
  }
  json answer() const override {
    if (settings_.beam == 0) {
      if (greedy_.tokens.empty()) fail("tree2seq", "the answer was asked before decoding");
      return hypothesis_json(greedy_, decoder_.max_length);
    }
    if (beams_.empty()) fail("tree2seq", "the answer was asked before decoding");
    json out = hypothesis_json(beams_[0], decoder_.max_length);
    out["beams"] = json::array();
    for (const flow::Hypothesis& h : beams_)
      out["beams"].push_back(hypothesis_json(h, decoder_.max_length));
    return out;
  }

 private:
  std::unique_ptr<TreeEncoding> encoding_;
  DecodeSettings settings_;
  flow::Decoder decoder_;
  flow::Hypothesis greedy_;
  std::vector<flow::Hypothesis> beams_;
};

}  // namespace

std::unique_ptr<DecodeJob> Tree2SeqModel::decode_job(std::unique_ptr<Encoding> encoding,
                                                     const DecodeSettings& settings) {
  std::unique_ptr<TreeEncoding> tree(static_cast<TreeEncoding*>(encoding.release()));
  return std::make_unique<TextJob>(*layers_->decoder, std::move(tree), settings);
}

bool Tree2SeqModel::exact_match(const json& answer, const json& example) const {
  return answer.value("ended", false) &&
         answer.value("text", std::string()) == expression_text(expression_of(example));
}

}  // namespace weft::models
