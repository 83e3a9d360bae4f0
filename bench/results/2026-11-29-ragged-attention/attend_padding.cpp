// The ragged_attention call of a greedy step (64 items, hidden 64, lengths 5-30) with its memories
// padded to 32, 64 and 128 rows: the cost should not move with the padding.
// Build: g++ -O2 -DNDEBUG -DFMT_SHARED -march=native -std=c++20 -I include attend_padding.cpp \
//   -o attend_padding -L build/test/src -l:libweft.so.0 -Wl,-rpath,$PWD/build/test/src

#include <chrono>
#include <cstdio>
#include <vector>
#include "weft/autodiff/ops.h"
using namespace weft;
int main() {
  const std::int64_t n = 64, hidden = 64;
  std::vector<std::int32_t> len(n);
  for (std::int64_t i = 0; i < n; ++i) len[i] = std::int32_t(5 + (i * 7) % 26);  // 5..30
  const Tensor lengths = Tensor::from_vector({n}, len);
  for (int rep = 0; rep < 2; ++rep)
    for (std::int64_t size : {32, 64, 128}) {
      const Tensor qt = Tensor::full({n, 1, hidden}, 0.01f),
                   mt = Tensor::full({n, size, hidden}, 0.02f);
      const int calls = 20000;
      auto t0 = std::chrono::steady_clock::now();
      for (int block = 0; block < calls / 250; ++block) {
        Tape tape;
        tape.set_grad_enabled(false);
        const Var q = tape.constant(qt), m = tape.constant(mt);
        for (int c = 0; c < 250; ++c) ragged_attention(q, m, lengths);
      }
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
          calls;
      std::printf("size %3ld: %.2f us per call (64 items, lengths 5-30)\n", long(size), us);
    }
}
