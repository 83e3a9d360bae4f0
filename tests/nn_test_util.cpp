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

namespace {

bool close(double actual, double expected, double abs_tol, double rel_tol) {
  return std::abs(actual - expected) <= abs_tol + rel_tol * std::abs(expected);
}

double weighted_sum(const HostArray& y, const std::vector<double>& weights) {
  double total = 0;
  for (std::size_t i = 0; i < y.size(); ++i) total += y[i] * weights[i];
  return total;
}

// Every gradient entry of argument `k` (inputs first, then parameters) against central
// differences of sum(cotangent * reference).
void check_gradient(const std::string& what, const HostArray& analytic, std::vector<HostArray>& in,
                    std::vector<HostArray>& params, HostArray& arg, const LayerReference& reference,
                    const std::vector<double>& cotangent, const Tolerance& tol) {
  for (std::size_t j = 0; j < arg.size(); ++j) {
    const double saved = arg[j];
    arg[j] = saved + tol.fd_step;
    const double up = weighted_sum(reference(in, params), cotangent);
    arg[j] = saved - tol.fd_step;
    const double down = weighted_sum(reference(in, params), cotangent);
    arg[j] = saved;
    const double numeric = (up - down) / (2 * tol.fd_step);
    EXPECT_TRUE(close(analytic[j], numeric, tol.grad_abs, tol.grad_rel))
        << "gradient of " << what << " element " << j << ": backward " << analytic[j]
        << " vs finite difference " << numeric;
  }
}

}  // namespace

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
  HostArray expected = reference(host_in, host_params);
  ASSERT_EQ(y.shape(), expected.shape) << "output shape differs from the reference's";
  HostArray actual(y.value());
  for (std::size_t i = 0; i < actual.size(); ++i)
    EXPECT_TRUE(close(actual[i], expected[i], tol.forward_abs, tol.forward_rel))
        << "forward element " << i << ": layer " << actual[i] << " vs reference " << expected[i];

  Rng rng(0xBEEF);
  std::vector<double> cotangent(actual.size());
  std::vector<float> cotangent_f(actual.size());
  for (std::size_t i = 0; i < cotangent.size(); ++i) {
    cotangent_f[i] = rng.uniform(-1.0f, 1.0f);
    cotangent[i] = cotangent_f[i];
  }
  tape.backward(y, Tensor::from_vector(y.shape(), cotangent_f));

  for (std::size_t k = 0; k < inputs.size(); ++k) {
    ASSERT_TRUE(vars[k].grad().defined()) << "no gradient reached input " << k;
    check_gradient("input " + std::to_string(k), HostArray(vars[k].grad()), host_in, host_params,
                   host_in[k], reference, cotangent, tol);
  }
  for (std::size_t p = 0; p < params.size(); ++p)
    check_gradient("parameter '" + params[p].name() + "'", HostArray(params[p].grad()), host_in,
                   host_params, host_params[p], reference, cotangent, tol);
}

}  // namespace weft::testing
