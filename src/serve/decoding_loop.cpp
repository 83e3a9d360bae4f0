// The decoding loop (decoding_loop.h): generations of flow engines, admitting queued instances
// between steps, retiring finished and abandoned sequences, and the decoding figures.
#include "decoding_loop.h"

#include <time.h>

#include <algorithm>
#include <exception>
#include <tuple>

#include <fmt/format.h>

#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/nn/mode.h"

namespace weft::serve::detail {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// One instance being decoded; its program refers to its job, so the job stays put.
struct DecodingLoop::Sequence {
  QueuedInstance instance;
  std::unique_ptr<models::DecodeJob> job;
  std::size_t example = 0;  // in its generation's engine
  bool stepped = false;     // has run a step (time to first step recorded)
};

// Engines on one tape, for one Model; freed whole when its last sequence is answered.
struct DecodingLoop::Generation {
  Generation(std::shared_ptr<models::Model> m, std::uint32_t max_steps)
      : model(std::move(m)), decoding(model->decoding()) {
    tape.set_grad_enabled(false);  // inference: values only, nothing kept for gradients
    flow::EngineOptions engine_options;
    engine_options.max_steps = max_steps;
    engine_options.drop_step_intermediates = true;  // a generation steps for long
    engine = std::make_unique<flow::Engine>(decoding->decoding_loom(), tape, engine_options,
                                            decoding->decoding_device());
  }
  std::shared_ptr<models::Model> model;
  models::DecodingModel* decoding;
  Tape tape;  // before the engine, which records on it
  std::unique_ptr<flow::Engine> engine;
  std::vector<std::unique_ptr<Sequence>> live;
  std::uint64_t steps = 0;
};

namespace {

// CPU seconds this thread has used (the decoding figures' cost, whatever else runs beside it).
double thread_cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

}  // namespace

DecodingLoop::DecodingLoop(ModelWorker& worker, const ServerOptions& options)
    : worker_(worker), options_(options) {}

DecodingLoop::~DecodingLoop() = default;

std::size_t DecodingLoop::live_sequences() const {
  std::size_t n = 0;
  for (const auto& g : generations_)
    for (const auto& s : g->live) n += std::size_t(std::max(1, s->instance.decode.beam));
  return n;
}

void DecodingLoop::run() {
  adopt_num_threads();  // this thread's OpenMP count is the default, not the process's setting
  cpu_seconds_ = thread_cpu_seconds();
  for (;;) {
    admit_queued();
    if (generations_.empty()) {
      if (worker_.stopping()) return;  // stopping, and every instance answered
      continue;
    }
    retire_abandoned();
    step_all();
  }
}

void DecodingLoop::admit_queued() {
  const std::size_t live = live_sequences();
  // Whole-batch serving admits only between batches.
  if (!options_.iteration_level && live > 0) return;
  const std::size_t room =
      options_.max_live_sequences > live ? options_.max_live_sequences - live : 0;
  if (room == 0) return;
  if (live > 0) {
    const std::size_t queued = worker_.queue_depth();
    if (queued == 0) {
      admission_waited_ = 0;
      return;
    }
    if (queued < std::min(room, kAdmissionGroup) && ++admission_waited_ < kAdmissionWaitSteps)
      return;
  }
  admission_waited_ = 0;
  std::vector<QueuedInstance> taken = worker_.take_queued(room, /*wait=*/live == 0);
  drop_abandoned(taken);
  if (!taken.empty()) admit(std::move(taken));
}

void DecodingLoop::drop_abandoned(std::vector<QueuedInstance>& instances) {
  std::vector<PendingRequest*> requests;
  for (const QueuedInstance& q : instances) requests.push_back(q.request.get());
  std::sort(requests.begin(), requests.end());
  requests.erase(std::unique(requests.begin(), requests.end()), requests.end());
  clients_.mark_gone_now(requests);
  std::uint64_t dropped = 0;
  std::erase_if(instances, [&](QueuedInstance& q) {
    if (!q.request->abandoned) return false;
    q.request->finish(q.index, json(), "the client went away");
    ++dropped;
    return true;
  });
  if (dropped == 0) return;
  abandoned_at_admission_ = true;
  worker_.update_decode_stats([&](DecodeStats& d) { d.dropped += dropped; });
}

DecodingLoop::Generation& DecodingLoop::generation_for(
    const std::shared_ptr<models::Model>& model) {
  if (!generations_.empty()) {
    Generation& newest = *generations_.back();
    if (newest.model == model && newest.steps < kGenerationSteps) return newest;
  }
  // A safety net: each job stops at its request's bound (or the model's) well before this.
  const std::uint32_t bound = options_.max_decode_steps > 0
                                  ? 4 * std::uint32_t(options_.max_decode_steps) + 16
                                  : std::uint32_t(1) << 30;
  generations_.push_back(std::make_unique<Generation>(model, bound));
  return *generations_.back();
}

void DecodingLoop::admit(std::vector<QueuedInstance> instances) {
  // Instances of one model (a reload may start another) and one search are encoded together.
  const auto key = [](const QueuedInstance& q) {
    return std::tuple(q.model.get(), q.decode.beam, q.decode.max_steps, q.decode.length_penalty);
  };
  std::stable_sort(
      instances.begin(), instances.end(),
      [&](const QueuedInstance& a, const QueuedInstance& b) { return key(a) < key(b); });
  std::vector<std::unique_ptr<Sequence>> fresh;
  for (std::size_t i = 0; i < instances.size(); ++i) {
    const bool last = i + 1 == instances.size() || key(instances[i + 1]) != key(instances[i]);
    auto s = std::make_unique<Sequence>();
    s->instance = std::move(instances[i]);
    fresh.push_back(std::move(s));
    if (!last) continue;
    Generation& g = generation_for(fresh.front()->instance.model);
    encode_into(g, std::move(fresh));
    fresh.clear();
  }
}

void DecodingLoop::encode_into(Generation& g, std::vector<std::unique_ptr<Sequence>> fresh) {
  TapeScope scope(g.tape);
  nn::ForwardMode inference(false);
  std::vector<json> examples;
  for (const auto& s : fresh) examples.push_back(s->instance.example);
  std::vector<std::unique_ptr<models::DecodeJob>> jobs;
  models::DecodeSettings settings = fresh.front()->instance.decode;
  settings.joining = options_.iteration_level;  // later steps batch them with other groups
  try {
    jobs = g.decoding->encode(*g.engine, examples, settings);
    if (jobs.size() != fresh.size()) fail("weft serve", "the model encoded too few examples");
  } catch (const std::exception& e) {
    for (auto& s : fresh) s->instance.request->finish(s->instance.index, json(), e.what());
    return;
  }
  for (std::size_t i = 0; i < fresh.size(); ++i) {
    Sequence& s = *fresh[i];
    s.job = std::move(jobs[i]);
    s.example = g.engine->admit([&job = *s.job](flow::Context& ctx) { return job.program(ctx); },
                                fmt::format("instance {}", s.instance.index));
    clients_.watch(*s.instance.request);
    g.live.push_back(std::move(fresh[i]));
  }
}

void DecodingLoop::retire_abandoned() {
  if (!clients_.mark_gone() && !std::exchange(abandoned_at_admission_, false)) return;
  std::vector<std::unique_ptr<Sequence>> gone;
  for (const auto& g : generations_) {
    std::size_t kept = 0;
    for (auto& s : g->live) {
      if (s->instance.request->abandoned) {
        g->engine->cancel(s->example, "the client went away");
        clients_.unwatch(*s->instance.request);
        gone.push_back(std::move(s));
        continue;
      }
      g->live[kept++] = std::move(s);
    }
    g->live.resize(kept);
  }
  // Counted before their requests finish: whoever sees a request cancelled
  // (weft_requests_cancelled_total, counted as its handler returns) sees its sequences counted.
  worker_.update_decode_stats([&](DecodeStats& d) { d.cancelled += gone.size(); });
  for (const auto& s : gone)
    s->instance.request->finish(s->instance.index, json(), "the client went away");
}  // the sequences (their decoders, their hypotheses) are freed here

void DecodingLoop::step_all() {
  const auto start = Clock::now();
  std::uint64_t tokens = 0;
  for (const auto& g : generations_) {
    tokens += g->engine->num_live();
    TapeScope scope(g->tape);
    nn::ForwardMode inference(false);
    g->engine->step();
    ++g->steps;
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> first_steps;
  const auto now = Clock::now();
  for (auto& g : generations_) {
    for (auto& s : g->live)
      if (!std::exchange(s->stepped, true))
        first_steps.push_back(std::chrono::duration<double>(now - s->instance.queued_at).count());
    answer_finished(*g);
  }
  // A generation with nothing live is freed (its tape and every value on it).
  std::erase_if(generations_, [](const auto& g) { return g->live.empty(); });
  std::size_t nodes = 0;
  for (const auto& g : generations_) nodes += g->tape.size();
  const std::size_t live = live_sequences();
  const double cpu = thread_cpu_seconds();
  worker_.update_decode_stats([&](DecodeStats& d) {
    d.cpu_seconds += cpu - std::exchange(cpu_seconds_, cpu);
    d.steps += 1;
    d.tokens += tokens;
    d.step_seconds.add(seconds);
    for (double f : first_steps) d.first_step.add(f);
    d.live = live;
    d.generations = generations_.size();
    d.tape_nodes = nodes;
    d.count_step(now, tokens);
  });
}

void DecodingLoop::answer_finished(Generation& g) {
  std::vector<std::unique_ptr<Sequence>> finished;
  std::size_t kept = 0;
  for (auto& s : g.live) {
    const flow::ProgramState state = g.engine->state(s->example);
    const bool ended = state == flow::ProgramState::kDone || state == flow::ProgramState::kFailed;
    (ended ? finished.emplace_back() : g.live[kept++]) = std::move(s);
  }
  g.live.resize(kept);
  // Counted before answering, so a client that has its answer sees it in the figures.
  worker_.update_decode_stats([&](DecodeStats& d) { d.sequences += finished.size(); });
  for (auto& s : finished) {
    clients_.unwatch(*s->instance.request);
    QueuedInstance& in = s->instance;
    if (g.engine->state(s->example) == flow::ProgramState::kFailed) {
      in.request->finish(in.index, json(), g.engine->error(s->example));
      continue;
    }
    try {
      in.request->finish(in.index, s->job->answer(), "");
    } catch (const std::exception& e) {
      in.request->finish(in.index, json(), e.what());
    }
  }
}

}  // namespace weft::serve::detail
