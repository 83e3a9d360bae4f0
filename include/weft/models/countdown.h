// `countdown`: a small decoding model whose output length its input sets, for testing and
// benchmarking iteration-level serving before (and beside) the trained decoders. Input
// {"count": n, "word": w}: it writes word w n times, then the end token. Its weights are set,
// not learned (a counter, a threshold and a word table, plus seeded transition scores that make
// other words plausible, so beam search has real choices), and it runs through the loom and a
// flow engine like any decoder, so its checkpoints, `weft infer` and `weft serve` are real.
// Not built in: register_countdown_model() adds it for the program that wants it.
#pragma once

#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft::models {

// Registers `countdown` unless it is registered already (options: max_count, words, and the
// runtime beam and max_steps that predict() decodes with); find_model("countdown") then has it.
void register_countdown_model();

}  // namespace weft::models
WEFT_API_END
