// The nn test helpers: float64 reference pieces and the layer gradient check.
#include "nn_test_util.h"

#include <cmath>

namespace weft::testing {

HostArray affine(const HostArray& x, const HostArray& weight, const HostArray& bias) {
  const std::int64_t rows = x.shape[0], in = x.shape[1], out = weight.shape[1];
  EXPECT_EQ(weight.shape[0], in) << "reference affine: x and weight do not fit";
  HostArray y(Shape{rows, out}, std::vector<double>(std::size_t(rows * out)));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < out; ++j) {
      double total = bias[std::size_t(j)];
      for (std::int64_t k = 0; k < in; ++k)
        total += x[std::size_t(r * in + k)] * weight[std::size_t(k * out + j)];
      y[std::size_t(r * out + j)] = total;
    }
  return y;
}

HostArray concat_cols(const std::vector<HostArray>& parts) {
  const std::int64_t rows = parts[0].shape[0];
  std::int64_t width = 0;
  for (const HostArray& p : parts) width += p.shape[1];
  HostArray y(Shape{rows, width}, {});
  for (std::int64_t r = 0; r < rows; ++r)
    for (const HostArray& p : parts)
      for (std::int64_t j = 0; j < p.shape[1]; ++j)
        y.values.push_back(p[std::size_t(r * p.shape[1] + j)]);
  return y;
}

HostArray cols(const HostArray& x, std::int64_t start, std::int64_t count) {
  const std::int64_t rows = x.shape[0], width = x.shape[1];
  HostArray y(Shape{rows, count}, {});
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = start; j < start + count; ++j)
      y.values.push_back(x[std::size_t(r * width + j)]);
  return y;
}

HostArray map(const HostArray& x, const std::function<double(double)>& f) {
  HostArray y = x;
  for (double& v : y.values) v = f(v);
  return y;
}

HostArray times(const HostArray& a, const HostArray& b) {
  EXPECT_EQ(a.shape, b.shape);
  HostArray y = a;
  for (std::size_t i = 0; i < y.size(); ++i) y[i] *= b[i];
  return y;
}

HostArray plus(const HostArray& a, const HostArray& b) {
  EXPECT_EQ(a.shape, b.shape);
  HostArray y = a;
  for (std::size_t i = 0; i < y.size(); ++i) y[i] += b[i];
  return y;
}

double sigmoid64(double v) { return 1.0 / (1.0 + std::exp(-v)); }
HostArray sigmoid64(const HostArray& x) {
  return map(x, [](double v) { return sigmoid64(v); });
}
HostArray tanh64(const HostArray& x) {
  return map(x, [](double v) { return std::tanh(v); });
}

std::vector<float> values_of(Var v) { return v.value().to_float_vector(); }

HostArray dropout_mask(std::int64_t rows, std::int64_t cols, float drop_prob, std::uint64_t seed) {
  Tape tape;
  Rng rng(seed);
  return HostArray(
      dropout(tape.constant(Tensor::full({rows, cols}, 1.0f)), drop_prob, rng).value());
}

void check_layer(const std::vector<Parameter>& params, const OpUnderTest& forward,
                 const LayerReference& reference, const std::vector<Tensor>& inputs,
                 const Tolerance& tol) {
  Tape tape;
  TapeScope scope(tape);
  std::vector<Var> vars;
  std::vector<HostArray> host_in, host_params;
  for (const Tensor& t : inputs) {
    vars.push_back(tape.variable(t));
    host_in.emplace_back(t);
  }
  for (Parameter p : params) {
    p.zero_grad();
    host_params.emplace_back(p.value());
  }
  Var y = forward(vars);
  const HostArray actual(y.value());
  expect_matches_reference(actual, reference(host_in, host_params), tol, "layer");
  if (::testing::Test::HasFatalFailure()) return;

  const std::vector<float> cotangent = random_cotangent(actual.size(), 0xBEEF);
  tape.backward(y, Tensor::from_vector(y.shape(), cotangent));
  const auto loss = [&] { return weighted_sum(reference(host_in, host_params), cotangent); };
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    ASSERT_TRUE(vars[k].grad().defined()) << "no gradient reached input " << k;
    check_finite_differences("input " + std::to_string(k), std::span(host_in[k].values),
                             HostArray(vars[k].grad()).values, loss, tol.fd_step, tol.grad_abs,
                             tol.grad_rel);
  }
  for (std::size_t p = 0; p < params.size(); ++p)
    check_finite_differences("parameter '" + params[p].name() + "'",
                             std::span(host_params[p].values), HostArray(params[p].grad()).values,
                             loss, tol.fd_step, tol.grad_abs, tol.grad_rel);
}

}  // namespace weft::testing
