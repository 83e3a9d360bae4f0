// The outside consumer: builds y = tanh(x · W) on the autodiff tape, backpropagates sum(y)
// and compares dL/dW with the gradient worked out by hand; then sums a JSON list with blocks
// (nlohmann-json reaches the consumer through the package). Exit code 0 when all agree.
#include <cmath>
#include <cstdio>
#include <vector>

#include <weft/autodiff/ops.h>
#include <weft/blocks/compiler.h>

int main() {
  weft::Tape tape;
  weft::TapeScope scope(tape);
  weft::Parameter w("W", weft::Tensor::from_vector({2, 1}, std::vector<float>{0.3f, 0.1f}));
  weft::Var x = tape.constant(weft::Tensor::from_vector({1, 2}, std::vector<float>{1.f, 2.f}));
  weft::Var y = weft::tanh(weft::matmul(x, w));  // [1, 1]: tanh(0.3 + 0.2)
  tape.backward(weft::sum(y));

  // dL/dW_i = x_i * (1 - tanh(x · W)^2)
  const double t = std::tanh(0.5);
  const std::vector<double> expected = {1.0 * (1 - t * t), 2.0 * (1 - t * t)};
  const std::vector<float> grad = w.grad().to_float_vector();
  bool ok = std::fabs(y.value().item() - t) < 1e-6;
  for (std::size_t i = 0; i < expected.size(); ++i)
    ok = ok && std::fabs(grad[i] - expected[i]) < 1e-5;
  std::printf("y = %.6f, dL/dW = [%.6f, %.6f], expected [%.6f, %.6f]: %s\n", y.value().item(),
              grad[0], grad[1], expected[0], expected[1], ok ? "ok" : "MISMATCH");
  using namespace weft::blocks;
  const float total = eval(Map(Scalar()) >> Sum(), Input::parse("[1, 2, 3.5]")).floats().at(0);
  std::printf("blocks: sum of [1, 2, 3.5] = %.2f\n", total);
  ok = ok && total == 6.5f;
  return ok ? 0 : 1;
}
