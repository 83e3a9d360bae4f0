// Per engine step, wall time and live programs of a greedy decode: the mixed batch (the first
// 64 test examples, decoded 64 times in a row) against the bench's matched one-length batches
// (per output length, 64 held-out examples of that length, weighted by the mixed batch's
// count of it); prints per sequence times and the least-squares step = F + r x live.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include "weft/autodiff/tape.h"
#include "weft/flow/flow.h"
#include "weft/models/decoding.h"
#include "weft/models/model.h"
#include "weft/models/saved_model.h"
#include "weft/nn/mode.h"
// Build: g++ -O2 -DNDEBUG -DFMT_SHARED -march=native -std=c++20 -I include step_times.cpp \
//   -o step_times -L build/test/src -l:libweft.so.0 -Wl,-rpath,$PWD/build/test/src
// Run: taskset -c 1 ./step_times build/ckpt/tree2seq.safetensors ROUNDS
// BENCH_LIKE=1: 64 one-at-a-time decodes after each mixed one, as `weft bench decode` runs.
using namespace weft;
using Clock = std::chrono::steady_clock;
// Step seconds and counts by live programs at the step's start; encode and total seconds.
struct Acc {
  std::map<std::size_t, std::pair<double, long>> by_live;
  double encode = 0, total = 0;
  long steps = 0;
};
void run(models::DecodingModel& m, std::span<const nlohmann::json> ex, Acc& acc) {
  const auto t0 = Clock::now();
  Tape tape;
  tape.set_grad_enabled(false);
  TapeScope scope(tape);
  nn::ForwardMode mode(false);
  flow::Engine engine(m.decoding_loom(), tape, {.drop_step_intermediates = true},
                      m.decoding_device());
  models::DecodeSettings settings{.beam = 0};
  auto jobs = m.encode(engine, ex, settings);
  for (auto& j : jobs) engine.admit([&jj = *j](flow::Context& c) { return jj.program(c); });
  const auto t1 = Clock::now();
  acc.encode += std::chrono::duration<double>(t1 - t0).count();
  for (;;) {
    const std::size_t live = engine.num_live();
    const auto s0 = Clock::now();
    if (!engine.step()) break;
    const double dt = std::chrono::duration<double>(Clock::now() - s0).count();
    auto& e = acc.by_live[live];
    e.first += dt;
    e.second += 1;
    ++acc.steps;
  }
  for (auto& j : jobs) (void)j->answer();
  acc.total += std::chrono::duration<double>(Clock::now() - t0).count();
}
int main(int argc, char** argv) {
  auto model = models::load_model(argv[1], models::ModelUse::kEvaluate, {{"eval_beam", 4}}, "");
  const int rounds = std::atoi(argv[2]);
  models::DecodingModel& m = *model->decoding();
  auto ex = model->examples(train::Split::kTest).first(64);
  Acc mixed, one;
  // The bench's one-length batches: per length of the mixed batch, 64 distinct examples of that
  // length from the held-out pool (repeated when fewer), weighted by that length's count.
  std::vector<std::int64_t> steps;
  m.decode(ex, models::DecodeSettings{.beam = 0}, &steps);
  std::map<std::int64_t, std::vector<nlohmann::json>> bucket;
  std::map<std::int64_t, int> weight;
  for (auto s : steps) {
    ++weight[s];
    bucket[s];
  }
  std::vector<nlohmann::json> pool(ex.begin(), ex.end());
  for (const auto& e : model->examples(train::Split::kTest).subspan(64)) pool.push_back(e);
  for (const auto& e : model->examples(train::Split::kDev)) pool.push_back(e);
  for (std::size_t at = 0; at < pool.size(); at += 64) {
    std::span<const nlohmann::json> part(pool.data() + at,
                                         std::min<std::size_t>(64, pool.size() - at));
    std::vector<std::int64_t> st;
    m.decode(part, models::DecodeSettings{.beam = 0}, &st);
    for (std::size_t i = 0; i < part.size(); ++i) {
      auto it = bucket.find(st[i]);
      if (it != bucket.end() && it->second.size() < 64) it->second.push_back(part[i]);
    }
  }
  std::vector<std::vector<nlohmann::json>> copies;
  for (auto& [len, b] : bucket) {
    const std::size_t d = b.size();
    for (std::size_t i = 0; b.size() < 64; ++i) b.push_back(b[i % d]);
    for (int w = 0; w < weight[len]; ++w) copies.push_back(b);
  }
  std::fprintf(stderr, "%zu one-length batches (weighted)\n", copies.size());
  {
    Acc warm;
    run(m, ex, warm);
    for (const auto& c : copies) run(m, c, warm);
  }
  const bool bench_like = std::getenv("BENCH_LIKE") != nullptr;
  for (int r = 0; r < rounds; ++r) {
    for (int k = 0; k < 64; ++k) {
      run(m, ex, mixed);
      if (bench_like) {
        Acc alone;
        for (std::size_t e = 0; e < 64; ++e) run(m, ex.subspan(e, 1), alone);
      }
    }
    for (const auto& c : copies) run(m, c, one);
  }
  for (auto* a : {&mixed, &one}) {
    const double seqs = 64.0 * rounds * 64;
    double step_s = 0;
    for (auto& [l, e] : a->by_live) step_s += e.first;
    std::printf("%s: %.1f us/seq total, encode %.1f, steps %.1f (%ld steps/64 seqs)\n",
                a == &mixed ? "mixed" : "one-length", 1e6 * a->total / seqs, 1e6 * a->encode / seqs,
                1e6 * step_s / seqs, long(a->steps * 64 / long(seqs)));
    // Least squares of step time on live count (one-length batches: every step has 64 live).
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (auto& [l, e] : a->by_live) {
      double y = e.first / double(e.second);
      double w = double(e.second);
      n += w;
      sx += w * l;
      sy += w * y;
      sxx += w * l * l;
      sxy += w * l * y;
    }
    if (n * sxx - sx * sx > 0) {
      const double b = (n * sxy - sx * sy) / (n * sxx - sx * sx), c = (sy - b * sx) / n;
      std::printf("  step = %.2f us + %.3f us x live\n", 1e6 * c, 1e6 * b);
    }
    for (std::size_t l : {1, 2, 4, 8, 16, 32, 48, 64})
      if (a->by_live.count(l)) {
        auto& e = a->by_live[l];
        std::printf("  live %2zu: %.2f us/step (%ld)\n", l, 1e6 * e.first / double(e.second),
                    e.second);
      }
  }
}
