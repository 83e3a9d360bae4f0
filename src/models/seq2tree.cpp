// seq2tree (models/seq2tree.h): the LSTM reader woven statically, the top-down tree decoder as
// flow programs (teacher forcing, greedy, beam search over the decisions), the registry entry.
#include "weft/models/seq2tree.h"

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

// Decisions: a digit 0-9 or an operator (tokens::kPlus..kTimes), as the text's symbols.
constexpr std::int32_t kDecisions = tokens::kTimes + 1;
constexpr std::int32_t kNoDecision = kDecisions;  // before the root's
constexpr std::int32_t kNoParent = 3;             // the root's parent operator
enum Position : std::int32_t { kRoot = 0, kLeft = 1, kRight = 2 };
// A step's input id: the previous decision (in top-down order), the parent's operator and
// the child's position.
constexpr std::int64_t kInputs = (kDecisions + 1) * 4 * 3;

std::int32_t input_id(std::int32_t previous, std::int32_t parent_op, std::int32_t position) {
  return (previous * 4 + parent_op) * 3 + position;
}

struct TextEncoding : FlowModel::Encoding {
  AttentionDecoder::Memory memory;
  flow::Val final_state;
  std::int32_t max_decisions = 0;  // a tree written with n symbols has at most n nodes
};

// A child still to decide: its parent's state and operator, and which child it is.
struct Pending {
  flow::Val parent;
  std::int32_t parent_op;
  std::int32_t position;
};

// A partial tree: its decisions in top-down (pre-)order and its pending children.
struct TreeHypothesis {
  flow::Val state;
  std::vector<Pending> stack;  // the next child to decide is the back
  std::vector<std::int32_t> decisions;
  double log_prob = 0;
  bool complete() const { return stack.empty(); }
};

TreeHypothesis start_tree(flow::Val initial) {
  return TreeHypothesis{initial, {Pending{initial, kNoParent, kRoot}}, {}, 0.0};
}

// The input id of the step that decides the hypothesis' next pending child.
std::int32_t next_input(const TreeHypothesis& h) {
  const Pending& next = h.stack.back();
  const std::int32_t previous = h.decisions.empty() ? kNoDecision : h.decisions.back();
  return input_id(previous, next.parent_op, next.position);
}

// Issues the step that decides the hypothesis' next pending child.
flow::DecoderStep issue(flow::Context& ctx, const AttentionDecoder& decoder,
                        const AttentionDecoder::Memory& memory, const TreeHypothesis& h) {
  return decoder.step(ctx, memory, h.state, next_input(h), h.stack.back().parent);
}

// Takes decision d for the child on top of the stack; an operator's children become pending
// (the left one next).
void advance(TreeHypothesis& h, flow::Val state, std::int32_t d) {
  h.stack.pop_back();
  h.decisions.push_back(d);
  h.state = state;
  if (d >= tokens::kPlus) {
    h.stack.push_back(Pending{state, d - tokens::kPlus, kRight});
    h.stack.push_back(Pending{state, d - tokens::kPlus, kLeft});
  }
}

void preorder(const json& node, std::vector<std::int32_t>& out) {
  if (node.contains("number")) {
    out.push_back(node["number"].get<std::int32_t>());
    return;
  }
  out.push_back(tokens::operator_symbol(node["op"].get<std::string>()));
  preorder(node["left"], out);
  preorder(node["right"], out);
}

// The tree of pre-order decisions, from `at` on; children still undecided are null.
json build_tree(std::span<const std::int32_t> decisions, std::size_t& at) {
  if (at == decisions.size()) return nullptr;
  const std::int32_t d = decisions[at++];
  if (d < tokens::kPlus) return json{{"number", d}};
  json left = build_tree(decisions, at);
  json right = build_tree(decisions, at);
  return json{
      {"op", tokens::operator_text(d)}, {"left", std::move(left)}, {"right", std::move(right)}};
}

// A tree's text as the calculator writes it, an undecided child as "?".
std::string tree_text(const json& tree) {
  if (tree.is_null()) return "?";
  if (tree.contains("number")) return std::to_string(tree["number"].get<int>());
  return "(" + tree_text(tree["left"]) + " " + tree["op"].get<std::string>() + " " +
         tree_text(tree["right"]) + ")";
}

}  // namespace

namespace {

std::vector<double> read_log_probs(const Tensor& row) { return row.to_double_vector(); }

// Greedy decoding: the best decision at every step (the lowest on ties), until the tree is
// complete or max_decisions were taken.
flow::Program greedy_tree(flow::Context& ctx, const AttentionDecoder& decoder,
                          const TextEncoding& text, TreeHypothesis& out) {
  out = start_tree(text.final_state);
  while (!out.complete() && out.decisions.size() < std::size_t(text.max_decisions)) {
    const flow::DecoderStep step = issue(ctx, decoder, text.memory, out);
    const Tensor row = co_await ctx.read(step.log_probs);
    const std::vector<double> log_probs = read_log_probs(row);
    const auto best = std::max_element(log_probs.begin(), log_probs.end());
    out.log_prob += *best;
    advance(out, step.state, std::int32_t(best - log_probs.begin()));
  }
}

// One step of every live tree, all issued at once (AttentionDecoder::step_beams).
flow::BeamStep issue_all(flow::Context& ctx, const AttentionDecoder& decoder,
                         const AttentionDecoder::Memory& memory,
                         const std::vector<TreeHypothesis>& trees, std::vector<double>& log_probs) {
  std::vector<flow::Val> states, parents;
  std::vector<std::int32_t> inputs;
  log_probs.clear();
  for (const TreeHypothesis& h : trees) {
    states.push_back(h.state);
    parents.push_back(h.stack.back().parent);
    inputs.push_back(next_input(h));
    log_probs.push_back(h.log_prob);
  }
  return decoder.step_beams(ctx, memory, states, inputs, parents);
}

// Beam search over the decisions in top-down order, ranked as flow::beam_program ranks tokens
// (flow::RankedExpansions: summed log-probability, ties by tree, then decision); the best
// `width` incomplete ones continue, those among the best `width` that complete the tree (or
// reach max_decisions) are kept; it stops when none is live or none can beat the width-th
// best kept (flow::search_finished). Width 1 without a length penalty is greedy decoding.
flow::Program beam_tree(flow::Context& ctx, const AttentionDecoder& decoder,
                        const TextEncoding& text, flow::BeamOptions options,
                        std::vector<TreeHypothesis>& kept) {
  const std::size_t width = std::size_t(options.width);
  kept.clear();
  std::vector<TreeHypothesis> beams{start_tree(text.final_state)}, next;
  std::vector<double> log_probs, scores;
  flow::RankedExpansions ranked;
  const auto score = [&](const TreeHypothesis& h) {
    return flow::normalised_score(h.log_prob, h.decisions.size(), options.length_penalty);
  };
  for (bool finished = false; !beams.empty() && !finished;) {
    const flow::BeamStep step = issue_all(ctx, decoder, text.memory, beams, log_probs);
    ranked.clear();
    std::uint32_t read = 0;
    for (const flow::Val rows : step.log_probs) {
      const Tensor value = co_await ctx.read(rows);
      read = ranked.add(read, value, log_probs, "seq2tree");
    }
    next.clear();
    for (std::size_t rank = 0; rank < ranked.size() && next.size() < width; ++rank) {
      const flow::RankedExpansions::Expansion e = ranked[rank];
      TreeHypothesis h = beams[e.beam];
      advance(h, step.states[e.beam], e.token);
      h.log_prob = e.log_prob;
      if (!h.complete() && h.decisions.size() < std::size_t(text.max_decisions))
        next.push_back(std::move(h));
      else if (rank < width)
        kept.push_back(std::move(h));
    }
    std::swap(beams, next);  // best first
    scores.clear();
    for (const TreeHypothesis& h : kept) scores.push_back(score(h));
    finished = !beams.empty() &&
               flow::search_finished(scores, beams[0].log_prob, width,
                                     std::size_t(text.max_decisions), options.length_penalty);
  }
  std::stable_sort(kept.begin(), kept.end(), [&](const TreeHypothesis& x, const TreeHypothesis& y) {
    return score(x) > score(y);
  });
  if (kept.size() > width) kept.resize(width);
}

// A tree in the decoding answer's schema (iterative_decoding.h): "ended" once every pending
// child was decided within `bound` decisions; what it has otherwise, undecided children null
// in "expression" and "?" in "text".
json tree_json(const TreeHypothesis& h, double length_penalty, std::int32_t bound) {
  std::size_t at = 0;
  json expression = build_tree(h.decisions, at);
  json out{{"expression", expression},
           {"text", tree_text(expression)},
           {"length", h.decisions.size()},
           {"log_prob", h.log_prob},
           {"score", flow::normalised_score(h.log_prob, h.decisions.size(), length_penalty)}};
  mark_ending(out, h.complete(), bound, "the tree was complete");
  return out;
}

class TreeJob : public DecodeJob {
 public:
  TreeJob(const AttentionDecoder& decoder, std::unique_ptr<TextEncoding> text,
          const DecodeSettings& settings)
      : decoder_(decoder), text_(std::move(text)), settings_(settings) {
    if (settings.max_steps > 0)
      text_->max_decisions = std::min(settings.max_steps, text_->max_decisions);
  }
  flow::Program program(flow::Context& ctx) override {
    if (settings_.beam == 0) return greedy_tree(ctx, decoder_, *text_, greedy_);
    return beam_tree(ctx, decoder_, *text_,
                     flow::BeamOptions{settings_.beam, settings_.length_penalty}, beams_);
  }
  json answer() const override {
    if (settings_.beam == 0) {
      if (greedy_.decisions.empty()) fail("seq2tree", "the answer was asked before decoding");
      return tree_json(greedy_, 0.0, text_->max_decisions);
    }
    if (beams_.empty()) fail("seq2tree", "the answer was asked before decoding");
    json out = tree_json(beams_[0], settings_.length_penalty, text_->max_decisions);
    out["beams"] = json::array();
    for (const TreeHypothesis& h : beams_)
      out["beams"].push_back(tree_json(h, settings_.length_penalty, text_->max_decisions));
    return out;
  }

 private:
  const AttentionDecoder& decoder_;
  std::unique_ptr<TextEncoding> text_;
  DecodeSettings settings_;
  TreeHypothesis greedy_;
  std::vector<TreeHypothesis> beams_;
};

}  // namespace

// Its registry entry: hidden, max_depth and leaf_probability of the generated expressions
// (max_train / max_eval 0: 20,000 training and 1,000 dev and test expressions), and the
// decoding options (beam, eval_beam).
ModelEntry seq2tree_entry() {
  ModelEntry entry;
  entry.name = "seq2tree";
  entry.summary =
      "LSTM over an expression's infix text, grows its tree top-down with attention (Dong & "
      "Lapata 2016; decoded as flow programs, greedy or beam)";
  entry.input = "infix text: ((3 + 4) * 2), or {\"text\": \"...\"}";
  entry.options = expression_model_options();
  entry.recipe = expression_model_recipe;
  entry.create = [](const OptionValues& options, const ModelInit& init) {
    return std::make_unique<Seq2TreeModel>(options, init);
  };
  return entry;
}

struct Seq2TreeModel::Layers {
  std::unique_ptr<nn::Embedding> symbols;
  std::unique_ptr<nn::LSTMCell> reader;
  std::unique_ptr<AttentionDecoder> decoder;
  loom::OpId read = 0;
};

Seq2TreeModel::Seq2TreeModel(const OptionValues& options, const ModelInit& init)
    : FlowModel(options, init), layers_(std::make_unique<Layers>()) {
  generate_splits(
      init,
      [](const json& expression) {
        return json{{"text", expression_text(expression)}, {"expression", expression}};
      },
      kDefaultTrainExpressions, kDefaultEvalExpressions);
  const std::int64_t n = options.integer("hidden");
  Layers& l = *layers_;
  l.symbols = std::make_unique<nn::Embedding>(store(), "encoder/symbols", tokens::kSymbols, n);
  l.reader = std::make_unique<nn::LSTMCell>(store(), "encoder/cell", n, n);
  // Joining examples attend to memories of a full tree's text at max_depth: its nodes and a
  // pair of parentheses per operator.
  const std::int64_t operators = (std::int64_t(1) << options.integer("max_depth")) - 1;
  l.decoder = std::make_unique<AttentionDecoder>(store(), loom(), n, kInputs, kDecisions, true,
                                                 3 * operators + 1);
  const loom::TypeShape state = loom().type(l.decoder->state_type());
  const loom::TypeShape id = loom().type(l.decoder->id_type());
  Layers* layers = layers_.get();
  l.read = loom().add_operation("read", {id, state}, {state}, [layers, n](std::span<const Var> in) {
    const auto [h, c] =
        (*layers->reader)((*layers->symbols)(in[0]), slice(in[1], 1, 0, n), slice(in[1], 1, n, n));
    return std::vector<Var>{concat({h, c})};
  });
}

Seq2TreeModel::~Seq2TreeModel() = default;

namespace {

constexpr std::size_t kMaxSymbols = std::size_t(AttentionDecoder::kMemorySizes.back());

// The text's symbols, checked: not empty and at most the largest memory.
tokens::Tokenized text_symbols(const json& example, std::string_view where) {
  if (!example.is_object() || !example.contains("text") || !example["text"].is_string())
    fail("seq2tree", where, ": expected {\"text\": \"...\"}, got ", io::json_excerpt(example));
  tokens::Tokenized text = tokens::tokenize(example["text"].get<std::string>(), "seq2tree", where);
  if (text.tokens.empty()) fail("seq2tree", where, ": an empty expression");
  if (text.tokens.size() > kMaxSymbols)
    fail("seq2tree", where, ": ", text.tokens.size(), " symbols; at most ", kMaxSymbols, " fit");
  return text;
}

}  // namespace

std::int32_t Seq2TreeModel::max_decode_steps() const { return std::int32_t(kMaxSymbols); }

json Seq2TreeModel::parse_example(std::string_view line, std::string_view where) const {
  json example;
  const std::size_t first = line.find_first_not_of(" \t");
  if (first != std::string_view::npos && (line[first] == '{' || line[first] == '"')) {
    const json value = io::parse_json(line, where, "seq2tree");
    example = value.is_string() ? json{{"text", value}} : value;
  } else {
    example = json{{"text", std::string(line)}};
  }
  const json expression = tokens::parse(text_symbols(example, where), "seq2tree", where);
  tokens::check_expression(expression, "seq2tree", where);
  return json{{"text", example["text"]}, {"expression", expression}};
}

std::vector<std::unique_ptr<FlowModel::Encoding>> Seq2TreeModel::encode_batch(
    flow::Engine& engine, std::span<const json> examples, bool joining) {
  const Layers& l = *layers_;
  const loom::TypeId state_type = l.decoder->state_type(), id_type = l.decoder->id_type();
  loom::Weaver weaver(loom());
  const std::vector<float> zeros(std::size_t(2 * l.decoder->hidden()), 0.f);
  std::vector<loom::Value> states;
  std::vector<std::vector<std::int64_t>> rows(examples.size());
  for (std::size_t e = 0; e < examples.size(); ++e) {
    const tokens::Tokenized text = text_symbols(examples[e], "example " + std::to_string(e));
    loom::Value state = weaver.constant(state_type, zeros);
    for (std::int32_t symbol : text.tokens) {
      state = weaver.call(l.read, {weaver.constant(id_type, std::span(&symbol, 1)), state})[0];
      rows[e].push_back(std::int64_t(states.size()));
      states.push_back(state);
    }
  }
  loom::Executor executor(loom(), Tape::current(), decoding_device());
  const loom::LoomResult result = executor.run(weaver);
  const std::vector<flow::Val> vals = engine.import(result, states);
  const std::vector<AttentionDecoder::Memory> memories = l.decoder->memories(
      engine, l.decoder->hidden_half(engine.gather(vals)), rows, "seq2tree", joining);
  std::vector<std::unique_ptr<Encoding>> out;
  for (std::size_t e = 0; e < examples.size(); ++e) {
    auto encoding = std::make_unique<TextEncoding>();
    encoding->memory = memories[e];
    encoding->final_state = vals[std::size_t(rows[e].back())];
    encoding->max_decisions = std::int32_t(rows[e].size());
    out.push_back(std::move(encoding));
  }
  return out;
}

flow::Program Seq2TreeModel::teacher_program(flow::Context& ctx, const Encoding& encoding,
                                             const json& example, Targets& out) {
  const auto& text = static_cast<const TextEncoding&>(encoding);
  if (!example.contains("expression"))
    fail("seq2tree", "a training example needs its \"expression\": ", io::json_excerpt(example));
  std::vector<std::int32_t> gold;
  preorder(example["expression"], gold);
  TreeHypothesis h = start_tree(text.final_state);
  for (std::int32_t d : gold) {
    const flow::DecoderStep step = issue(ctx, *layers_->decoder, text.memory, h);
    out.log_probs.push_back(step.log_probs);
    out.gold.push_back(d);
    advance(h, step.state, d);
  }
  co_return;
}

std::unique_ptr<DecodeJob> Seq2TreeModel::decode_job(std::unique_ptr<Encoding> encoding,
                                                     const DecodeSettings& settings) {
  std::unique_ptr<TextEncoding> text(static_cast<TextEncoding*>(encoding.release()));
  return std::make_unique<TreeJob>(*layers_->decoder, std::move(text), settings);
}

bool Seq2TreeModel::exact_match(const json& answer, const json& example) const {
  return answer.value("ended", false) && answer["expression"] == example["expression"];
}

}  // namespace weft::models
