// weft_bench_flow_reverse: beam search and greedy decoding of the reverse-a-digit-string toy
// decoder written in C++ (flow::beam_search / greedy_decode over a flow::Decoder), the baseline
// of python/bench/flow_search.py, which writes the weights and the examples' initial states into
// DIR and runs the same model from Python with weft.flow.beam_search. Prints one JSON line: the
// seconds of each timed round, batched and one example at a time, and the best hypotheses' tokens
// (the Python script checks them equal to its own). CPU time, one thread.
#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "weft/autodiff/ops.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/flow/search.h"

namespace {

using namespace weft;

template <typename T>
std::vector<T> read_file(const std::string& path, std::size_t count) {
  std::ifstream in(path, std::ios::binary);
  std::vector<T> out(count);
  if (!in.read(reinterpret_cast<char*>(out.data()), std::streamsize(count * sizeof(T))))
    fail("bench", "cannot read ", count, " values from ", path);
  return out;
}

// h' = tanh(h W + E[token]); log_probs = log_softmax(h' U): the script's model, op for op.
struct ReverseDecoder {
  loom::Loom loom;
  loom::TypeId hidden = 0, token = 0;
  loom::OpId embed = 0, cell = 0, head = 0;
  Parameter e, w, u;
  ReverseDecoder(const std::string& dir, std::int64_t h, std::int64_t v)
      : e("E", Tensor::from_vector({v, h}, read_file<float>(dir + "/E.f32", std::size_t(v * h)))),
        w("W", Tensor::from_vector({h, h}, read_file<float>(dir + "/W.f32", std::size_t(h * h)))),
        u("U", Tensor::from_vector({h, v}, read_file<float>(dir + "/U.f32", std::size_t(h * v)))) {
    const loom::TypeShape hidden_type{DType::kFloat32, {h}, "hidden"};
    const loom::TypeShape token_type{DType::kInt32, Shape{}, "token"};
    const loom::TypeShape log_probs_type{DType::kFloat32, {v}, "log_probs"};
    embed =
        loom.add_operation("embed", {token_type}, {hidden_type}, [this](std::span<const Var> in) {
          return std::vector<Var>{embedding_lookup(Tape::current().parameter(e), in[0].value())};
        });
    cell = loom.add_operation(
        "cell", {hidden_type, hidden_type}, {hidden_type}, [this](std::span<const Var> in) {
          return std::vector<Var>{tanh(matmul(in[0], Tape::current().parameter(w)) + in[1])};
        });
    head = loom.add_operation(
        "head", {hidden_type}, {log_probs_type}, [this](std::span<const Var> in) {
          return std::vector<Var>{log_softmax(matmul(in[0], Tape::current().parameter(u)))};
        });
    hidden = loom.type_id(hidden_type);
    token = loom.type_id(token_type);
  }
  flow::Decoder decoder(std::int32_t max_length) const {
    flow::Decoder d;
    d.step = [this](flow::Context& ctx, flow::Val state, std::int32_t previous) {
      const flow::Val x = ctx.apply(embed, {ctx.constant(token, std::span(&previous, 1))});
      const flow::Val next = ctx.apply(cell, {state, x});
      return flow::DecoderStep{next, ctx.apply(head, {next})};
    };
    d.start_token = 11;
    d.end_token = 10;
    d.max_length = max_length;
    return d;
  }
};

// One batch's beam searches (width 0: greedy); the best hypothesis' tokens of each example.
std::vector<std::vector<std::int32_t>> decode(const ReverseDecoder& m, const Tensor& starts,
                                              std::span<const std::int32_t> bounds, int width) {
  Tape tape;
  tape.set_grad_enabled(false);
  flow::Engine engine(m.loom, tape);
  const std::vector<flow::Val> initial = engine.import(tape.constant(starts), m.hidden);
  std::vector<std::vector<std::int32_t>> best(initial.size());
  std::vector<std::size_t> ids;
  std::vector<flow::Decoder> decoders;
  for (std::int32_t bound : bounds) decoders.push_back(m.decoder(bound));
  std::vector<std::vector<flow::Hypothesis>> found(initial.size());
  for (std::size_t i = 0; i < initial.size(); ++i)
    ids.push_back(engine.admit([&, i](flow::Context& ctx) {
      found[i].resize(width == 0 ? 1 : 0);
      return width == 0 ? flow::greedy_program(ctx, decoders[i], initial[i], found[i][0])
                        : flow::beam_program(ctx, decoders[i], initial[i], {width, 0.0}, found[i]);
    }));
  engine.run();
  for (std::size_t i = 0; i < initial.size(); ++i) {
    if (engine.state(ids[i]) != flow::ProgramState::kDone) fail("bench", engine.error(ids[i]));
    best[i] = found[i].at(0).tokens;
  }
  return best;
}

// CPU seconds of this process (one thread), as the script measures: the machine may be shared.
double cpu_seconds() { return double(std::clock()) / CLOCKS_PER_SEC; }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::cerr << "usage: weft_bench_flow_reverse DIR HIDDEN VOCABULARY EXAMPLES WIDTH ROUNDS\n";
    return 2;
  }
  try {
    const std::string dir = argv[1];
    const std::int64_t h = std::stoll(argv[2]), v = std::stoll(argv[3]), n = std::stoll(argv[4]);
    const int width = std::stoi(argv[5]), rounds = std::stoi(argv[6]);
    set_num_threads(1);
    const ReverseDecoder model(dir, h, v);
    const Tensor starts =
        Tensor::from_vector({n, h}, read_file<float>(dir + "/h0.f32", std::size_t(n * h)));
    const std::vector<std::int32_t> bounds =
        read_file<std::int32_t>(dir + "/bounds.i32", std::size_t(n));
    nlohmann::json out{{"batched", nlohmann::json::array()}, {"alone", nlohmann::json::array()}};
    out["tokens"] = decode(model, starts, bounds, width);  // also the untimed warm-up
    for (int r = 0; r < rounds; ++r) {
      double start = cpu_seconds();
      decode(model, starts, bounds, width);
      out["batched"].push_back(cpu_seconds() - start);
      start = cpu_seconds();
      for (std::int64_t i = 0; i < n; ++i)
        decode(model, starts.rows_view(i, 1), std::span(bounds).subspan(std::size_t(i), 1), width);
      out["alone"].push_back(cpu_seconds() - start);
    }
    std::cout << out.dump() << "\n";
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
