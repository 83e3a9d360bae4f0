// The thread-local forward mode: a training flag and the dropout Rng, saved and restored by
// each ForwardMode so that modes nest.
#include "weft/nn/mode.h"

#include "weft/autodiff/ops.h"
#include "weft/core/error.h"

namespace weft::nn {
namespace {

thread_local bool t_training = false;
thread_local Rng* t_rng = nullptr;

}  // namespace

ForwardMode::ForwardMode(bool training, Rng* rng)
    : previous_training_(t_training), previous_rng_(t_rng) {
  t_training = training;
  t_rng = rng;
}

ForwardMode::~ForwardMode() {
  t_training = previous_training_;
  t_rng = previous_rng_;
}

bool is_training() { return t_training; }

Rng& dropout_rng() {
  if (t_rng == nullptr)
    fail("dropout_rng",
         t_training ? "a training ForwardMode was opened without an Rng"
                    : "no ForwardMode with an Rng is active",
         "; pass one: ForwardMode mode(true, &rng)");
  return *t_rng;
}

Var mode_dropout(Var x, float drop_prob) {
  if (!t_training || drop_prob == 0.0f) return x;
  return dropout(x, drop_prob, dropout_rng(), true);
}

}  // namespace weft::nn
