// The DyNet peer of Weft's tree2seq greedy decoding (issue 32, item 5d), built outside the
// library by bench/peers/build_dynet.sh against DyNet's public source. Written as DyNet asks:
// every example's graph built imperatively (Tree-LSTM encoder, then the attention decoder a
// step at a time); with autobatching on, one graph holds a batch's examples and every step's
// calls of all of them run batched when the first value is read. Weights by name from a Weft
// checkpoint (safetensors), shapes checked. Prints one JSON object: the answers of the first
// run (text, log_prob; for the check against Weft) and sequences/s of each arm per round, by
// the wall clock and by CPU time.
// Usage: dynet_tree2seq CHECKPOINT EXAMPLES.jsonl ROUNDS [BATCH]
#include <dynet/dynet.h>
#include <dynet/expr.h>
#include <dynet/init.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

using dynet::ComputationGraph;
using dynet::Expression;
using nlohmann::json;

constexpr unsigned kEnd = 15, kStart = 16, kOutputs = 16;

struct Tensor {
  std::vector<std::int64_t> shape;
  std::vector<float> data;
};

// The "model/" tensors of a safetensors file (float32 only) and its metadata.
std::map<std::string, Tensor> read_checkpoint(const std::string& path, json& metadata) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::uint64_t length = 0;
  in.read(reinterpret_cast<char*>(&length), 8);
  std::string header(length, '\0');
  in.read(header.data(), std::streamsize(length));
  const json index = json::parse(header);
  const std::string rest((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::map<std::string, Tensor> out;
  for (const auto& [name, info] : index.items()) {
    if (name == "__metadata__") {
      metadata = info;
      continue;
    }
    if (name.rfind("model/", 0) != 0) continue;
    if (info["dtype"] != "F32") throw std::runtime_error(name + " is not float32");
    Tensor t{info["shape"].get<std::vector<std::int64_t>>(), {}};
    const std::size_t begin = info["data_offsets"][0], end = info["data_offsets"][1];
    t.data.resize((end - begin) / 4);
    std::memcpy(t.data.data(), rest.data() + begin, end - begin);
    out[name.substr(6)] = std::move(t);
  }
  return out;
}

// The weights as DyNet parameters: Weft's row-major [in, out] matrix has the memory layout of
// DyNet's column-major {out, in}, so y = W x reads it as is; table rows become lookups.
struct Model {
  dynet::ParameterCollection pc;
  dynet::LookupParameter digits, operators, positions, input;
  dynet::Parameter encoder_w, encoder_b, cell_w, cell_b, attended_w, attended_b, scores_w, scores_b;
  unsigned hidden = 0;

  explicit Model(const std::map<std::string, Tensor>& w, unsigned n) : hidden(n) {
    digits = table(w, "encoder/digits/table", 10);
    operators = table(w, "encoder/operators/table", 3);
    positions = table(w, "encoder/positions/table", 128);
    input = table(w, "decoder/input/table", kStart + 1);
    encoder_w = matrix(w, "encoder/cell/weight", 3 * n, 5 * n);
    encoder_b = matrix(w, "encoder/cell/bias", 0, 5 * n);
    cell_w = matrix(w, "decoder/cell/weight", 2 * n, 4 * n);
    cell_b = matrix(w, "decoder/cell/bias", 0, 4 * n);
    attended_w = matrix(w, "decoder/attended/weight", 2 * n, n);
    attended_b = matrix(w, "decoder/attended/bias", 0, n);
    scores_w = matrix(w, "decoder/scores/weight", n, kOutputs);
    scores_b = matrix(w, "decoder/scores/bias", 0, kOutputs);
  }

  static const Tensor& find(const std::map<std::string, Tensor>& w, const std::string& name,
                            std::vector<std::int64_t> shape) {
    const auto it = w.find(name);
    if (it == w.end()) throw std::runtime_error("the checkpoint lacks " + name);
    if (it->second.shape != shape)
      throw std::runtime_error(name + " has another shape than " + json(shape).dump());
    return it->second;
  }
  // rows 0: a bias [out].
  dynet::Parameter matrix(const std::map<std::string, Tensor>& w, const std::string& name,
                          unsigned rows, unsigned cols) {
    const Tensor& t = rows == 0 ? find(w, name, {cols}) : find(w, name, {rows, cols});
    dynet::Parameter p = rows == 0 ? pc.add_parameters({cols}) : pc.add_parameters({cols, rows});
    p.set_value(t.data);
    return p;
  }
  dynet::LookupParameter table(const std::map<std::string, Tensor>& w, const std::string& name,
                               unsigned size) {
    const Tensor& t = find(w, name, {size, hidden});
    dynet::LookupParameter p = pc.add_lookup_parameters(size, {hidden});
    for (unsigned i = 0; i < size; ++i)
      p.initialize(
          i, std::vector<float>(t.data.begin() + i * hidden, t.data.begin() + (i + 1) * hidden));
    return p;
  }
};

// One graph's parameter expressions.
struct Graph {
  ComputationGraph& cg;
  const Model& m;
  Expression encoder_w, encoder_b, cell_w, cell_b, attended_w, attended_b, scores_w, scores_b;

  Graph(ComputationGraph& g, Model& model) : cg(g), m(model) {
    encoder_w = parameter(cg, model.encoder_w);
    encoder_b = parameter(cg, model.encoder_b);
    cell_w = parameter(cg, model.cell_w);
    cell_b = parameter(cg, model.cell_b);
    attended_w = parameter(cg, model.attended_w);
    attended_b = parameter(cg, model.attended_b);
    scores_w = parameter(cg, model.scores_w);
    scores_b = parameter(cg, model.scores_b);
  }
};

// One example's decoding state: the memory [H, n] (node h plus position embedding, columns in
// post-order), the decoder's h and c, its tokens and log-probability.
struct Decoding {
  Expression memory, memory_t, h, c, log_probs;
  std::vector<unsigned> tokens;
  double log_prob = 0;
  unsigned bound = 0;
  bool done = false;
};

std::pair<Expression, Expression> tree_cell(Graph& g, Expression x, Expression hl, Expression hr,
                                            Expression cl, Expression cr) {
  const unsigned n = g.m.hidden;
  const Expression gates =
      dynet::affine_transform({g.encoder_b, g.encoder_w, dynet::concatenate({x, hl, hr})});
  const Expression c =
      cmult(logistic(pickrange(gates, 2 * n, 3 * n)), tanh(pickrange(gates, 3 * n, 4 * n))) +
      cmult(logistic(pickrange(gates, 0, n)), cl) + cmult(logistic(pickrange(gates, n, 2 * n)), cr);
  return {cmult(logistic(pickrange(gates, 4 * n, 5 * n)), tanh(c)), c};
}

std::pair<Expression, Expression> encode(Graph& g, const json& node, std::vector<Expression>& cols,
                                         unsigned& next) {
  if (node.contains("number")) {
    const unsigned position = next++;
    const Expression zero = dynet::zeros(g.cg, {g.m.hidden});
    const auto hc = tree_cell(g, lookup(g.cg, g.m.digits, node["number"].get<unsigned>()), zero,
                              zero, zero, zero);
    cols.push_back(hc.first + lookup(g.cg, g.m.positions, position));
    return hc;
  }
  const auto left = encode(g, node["left"], cols, next);
  const unsigned position = next++;
  const auto right = encode(g, node["right"], cols, next);
  const std::string op = node["op"];
  const unsigned id = op == "+" ? 0 : op == "-" ? 1 : 2;
  const auto hc = tree_cell(g, lookup(g.cg, g.m.operators, id), left.first, right.first,
                            left.second, right.second);
  cols.push_back(hc.first + lookup(g.cg, g.m.positions, position));
  return hc;
}

Decoding start(Graph& g, const json& example) {
  std::vector<Expression> cols;
  unsigned next = 0;
  const json& tree = example.contains("expression") ? example["expression"] : example;
  const auto root = encode(g, tree, cols, next);
  Decoding d;
  d.memory = dynet::concatenate_cols(cols);
  d.memory_t = transpose(d.memory);
  d.h = root.first;
  d.c = root.second;
  d.bound = unsigned(2 * cols.size());
  return d;
}

// Adds one step's calls (nothing is computed until a value is read).
void issue_step(Graph& g, Decoding& d) {
  const unsigned n = g.m.hidden;
  const unsigned token = d.tokens.empty() ? kStart : d.tokens.back();
  const Expression x = lookup(g.cg, g.m.input, token);
  const Expression gates =
      dynet::affine_transform({g.cell_b, g.cell_w, dynet::concatenate({x, d.h})});
  d.c = cmult(logistic(pickrange(gates, 0, n)), d.c) +
        cmult(logistic(pickrange(gates, n, 2 * n)), tanh(pickrange(gates, 2 * n, 3 * n)));
  d.h = cmult(logistic(pickrange(gates, 3 * n, 4 * n)), tanh(d.c));
  const Expression weights = softmax(d.memory_t * d.h);
  const Expression attended = tanh(dynet::affine_transform(
      {g.attended_b, g.attended_w, dynet::concatenate({d.h, d.memory * weights})}));
  d.log_probs = dynet::log_softmax(dynet::affine_transform({g.scores_b, g.scores_w, attended}));
}

// Reads the step's log-probabilities: the lowest argmax is the next token.
void take_step(Decoding& d) {
  const std::vector<float> lp = dynet::as_vector(d.log_probs.value());
  unsigned best = 0;
  for (unsigned k = 1; k < lp.size(); ++k)
    if (lp[k] > lp[best]) best = k;
  d.tokens.push_back(best);
  d.log_prob += double(lp[best]);
  d.done = best == kEnd || d.tokens.size() >= d.bound;
}

// Greedy decoding of `examples` in one graph: each step issues every live example's calls, then
// runs them (batched by DyNet's autobatching when it is on) and reads them.
std::vector<Decoding> decode_together(Model& model, const std::vector<json>& examples) {
  ComputationGraph cg;
  Graph g(cg, model);
  std::vector<Decoding> all;
  for (const json& e : examples) all.push_back(start(g, e));
  for (bool live = true; live;) {
    live = false;
    Expression last;
    for (Decoding& d : all)
      if (!d.done) {
        issue_step(g, d);
        last = d.log_probs;
        live = true;
      }
    if (!live) break;
    cg.incremental_forward(last);
    for (Decoding& d : all)
      if (!d.done) take_step(d);
  }
  return all;
}

std::string text_of(const Decoding& d) {
  std::string out;
  for (std::size_t k = 0; k < d.tokens.size(); ++k) {
    const unsigned t = d.tokens[k];
    if (t == kEnd && k + 1 == d.tokens.size()) break;
    if (t <= 9)
      out += char('0' + t);
    else if (t <= 12)
      out += std::string(" ") + "+-*"[t - 10] + " ";
    else
      out += t == 13 ? "(" : t == 14 ? ")" : "?";
  }
  return out;
}

// Sequences/s of `work` over `count` examples: by the wall clock, and by this process's CPU time
// (which other processes' load on the machine does not inflate).
template <typename Work>
std::pair<double, double> rates(std::size_t count, Work&& work) {
  const auto wall = std::chrono::steady_clock::now();
  const std::clock_t cpu = std::clock();
  work();
  const double cpu_seconds = double(std::clock() - cpu) / CLOCKS_PER_SEC;
  const double wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
  return {double(count) / wall_seconds, double(count) / cpu_seconds};
}

// Greedy answers of `examples` in graphs of `batch` examples each, autobatched or not.
std::vector<Decoding> decode_all(Model& model, const std::vector<json>& examples, std::size_t batch,
                                 bool autobatch) {
  dynet::autobatch_flag = autobatch ? 1 : 0;
  std::vector<Decoding> answers;
  for (std::size_t i = 0; i < examples.size(); i += batch) {
    const std::vector<json> part(
        examples.begin() + std::ptrdiff_t(i),
        examples.begin() + std::ptrdiff_t(std::min(i + batch, examples.size())));
    for (Decoding& d : decode_together(model, part)) answers.push_back(std::move(d));
  }
  return answers;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: dynet_tree2seq CHECKPOINT EXAMPLES.jsonl ROUNDS [BATCH]\n";
    return 2;
  }
  dynet::DynetParams params;
  params.mem_descriptor = "1024";
  params.autobatch = 1;
  dynet::initialize(params);
  json metadata;
  const auto weights = read_checkpoint(argv[1], metadata);
  const json config = json::parse(metadata.value("config", std::string("{}")));
  Model model(weights, config["model"]["options"]["hidden"].get<unsigned>());
  std::vector<json> examples;
  std::ifstream lines(argv[2]);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) examples.push_back(json::parse(line));
  const int rounds = std::stoi(argv[3]);
  const std::size_t batch = argc > 4 ? std::stoul(argv[4]) : 64;

  // Untimed first: DyNet's memory pools grow on first use.
  const std::vector<json> few(
      examples.begin(),
      examples.begin() + std::min<std::ptrdiff_t>(8, std::ptrdiff_t(examples.size())));
  decode_all(model, few, batch, true);
  decode_all(model, few, 1, false);
  json out{{"answers", json::array()}};
  for (const Decoding& d : decode_all(model, examples, batch, true))
    out["answers"].push_back({{"text", text_of(d)}, {"log_prob", d.log_prob}});
  for (int r = 0; r < rounds; ++r) {
    for (const bool autobatch : {true, false}) {
      const std::string arm = autobatch ? "autobatch_batch" : "one_at_a_time";
      const auto [wall, cpu] = rates(
          examples.size(), [&] { decode_all(model, examples, autobatch ? batch : 1, autobatch); });
      out[arm].push_back(wall);
      out[arm + "_cpu"].push_back(cpu);
    }
  }
  std::cout << out.dump() << "\n";
  return 0;
}
