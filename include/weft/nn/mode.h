// The forward mode seen by layers running inside op bodies: whether this is a training pass
// (dropout on) and which Rng draws the dropout masks. The loom calls op bodies with no extra
// arguments, so the mode is thread-local state set by an RAII ForwardMode around the run.
// Outside any ForwardMode, layers run in inference mode (no dropout).
#pragma once

#include "weft/autodiff/tape.h"
#include "weft/core/export.h"
#include "weft/core/rng.h"

WEFT_API_BEGIN
namespace weft::nn {

// Sets the mode for its lifetime on this thread; nestable (the innermost wins, the previous
// mode comes back on destruction).
class ForwardMode {
 public:
  explicit ForwardMode(bool training, Rng* rng = nullptr);
  ~ForwardMode();
  ForwardMode(const ForwardMode&) = delete;
  ForwardMode& operator=(const ForwardMode&) = delete;

 private:
  bool previous_training_;
  Rng* previous_rng_;
};

// False when no ForwardMode is active.
bool is_training();
// The innermost ForwardMode's Rng; throws if it was given none.
Rng& dropout_rng();
// Dropout under the current mode: dropout(x, drop_prob, dropout_rng()) when is_training()
// and drop_prob > 0, else x itself (no op recorded).
Var mode_dropout(Var x, float drop_prob);

}  // namespace weft::nn
WEFT_API_END
