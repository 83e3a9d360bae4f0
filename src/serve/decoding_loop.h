// A decoding model's serving loop (private to the server): iteration-level batching. Every
// live sequence (one flow program per instance, greedy or beam) advances one step per engine
// step, all of them in one loom batch; a finished program answers its instance at once, and
// queued instances are encoded together and join at the next step. With iteration_level off
// a batch decodes to its end before the next is admitted (the whole-batch baseline).
//
// Memory: an engine records on one tape that only grows, so engines are rotated by
// generation. New instances join the newest generation until it has run kGenerationSteps
// steps; then a fresh one (its own tape) takes them while the old one steps its programs to
// their end and is freed whole. An empty generation is freed at once, so a quiet server holds
// nothing, and a server under steady load holds at most a few generations.
//
// Clients that go away (client_watch.h; a half-close is not one): every live request's
// connection is in one epoll set (watched from its first sequence's admission to its last's
// answer), so a step asks the kernel once for the connections that changed, whatever the number
// of live sequences (a poll over every live connection per step cost the loop about a tenth of
// its time at 60 live). Queued instances whose client went away are dropped before they are
// encoded: admission looks at their connections first.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "client_watch.h"
#include "model_worker.h"
#include "weft/flow/flow.h"

namespace weft::serve::detail {

class DecodingLoop {
 public:
  static constexpr std::uint64_t kGenerationSteps = 256;
  // While sequences are live, queued instances join in groups of kAdmissionGroup, or as many
  // as have waited kAdmissionWaitSteps steps: a group is encoded by one static weave, whose
  // fixed cost one instance per step paid again and again (tree2seq at 16 clients spent 2.8x
  // the whole-batch server's encoding time per request; bench/log/2026-11-27-serve-tree2seq.md).
  static constexpr std::size_t kAdmissionGroup = 8;
  static constexpr std::uint32_t kAdmissionWaitSteps = 4;

  DecodingLoop(ModelWorker& worker, const ServerOptions& options);
  ~DecodingLoop();
  // Runs until the worker stops and every queued and live instance is answered.
  void run();

 private:
  struct Sequence;
  struct Generation;

  // Takes queued instances (waiting only when nothing is live; while sequences are live, in
  // groups: kAdmissionGroup) and admits them.
  void admit_queued();
  void admit(std::vector<QueuedInstance> instances);
  Generation& generation_for(const std::shared_ptr<models::Model>& model);
  void encode_into(Generation& g, std::vector<std::unique_ptr<Sequence>> fresh);
  // Answers the instances whose client went away without encoding them, and removes them.
  void drop_abandoned(std::vector<QueuedInstance>& instances);
  // Retires the sequences whose client went away.
  void retire_abandoned();
  // One step of every generation; answers the sequences that finished.
  void step_all();
  void answer_finished(Generation& g);
  std::size_t live_sequences() const;

  std::uint32_t admission_waited_ = 0;  // steps a smaller group has waited to be admitted
  ModelWorker& worker_;
  const ServerOptions& options_;
  std::vector<std::unique_ptr<Generation>> generations_;  // oldest first
  double cpu_seconds_ = 0;  // this thread's CPU time when the figures last counted it
  ClientWatch clients_;
  bool abandoned_at_admission_ = false;  // a request found gone there may have live sequences
};

}  // namespace weft::serve::detail
