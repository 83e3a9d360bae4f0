// The op-test harness: references, finite differences and batched-vs-row checks.
#include "op_test_util.h"

#include <cmath>
#include <set>

namespace weft::testing {

bool register_op_case(const char* op) {
  auto& cases = const_cast<std::vector<std::string>&>(registered_op_cases());
  cases.emplace_back(op);
  return true;
}

const std::vector<std::string>& registered_op_cases() {
  static std::vector<std::string> cases;
  return cases;
}

HostArray::HostArray(const Tensor& t) : shape(t.shape()) {
  if (t.dtype() == DType::kFloat32) {
    for (float v : t.to_float_vector()) values.push_back(v);
  } else {
    for (std::int32_t v : t.to_int_vector()) values.push_back(v);
  }
}

Tensor HostArray::to_tensor() const {
  std::vector<float> floats(values.begin(), values.end());
  return Tensor::from_vector(shape, floats);
}

Tensor random_tensor(const Shape& shape, std::uint64_t seed, float low, float high) {
  Rng rng(seed);
  std::vector<float> values(std::size_t(shape.numel()));
  for (float& v : values) v = rng.uniform(low, high);
  return Tensor::from_vector(shape, values);
}

Tensor int_tensor(const Shape& shape, const std::vector<std::int32_t>& values) {
  return Tensor::from_vector(shape, values);
}

bool close(double actual, double expected, double abs_tol, double rel_tol) {
  return std::abs(actual - expected) <= abs_tol + rel_tol * std::abs(expected);
}

std::vector<float> random_cotangent(std::size_t size, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> cotangent(size);
  for (float& c : cotangent) c = rng.uniform(-1.0f, 1.0f);
  return cotangent;
}

double weighted_sum(const HostArray& y, std::span<const float> weights) {
  double total = 0;
  for (std::size_t i = 0; i < y.size(); ++i) total += y[i] * double(weights[i]);
  return total;
}

void expect_matches_reference(const HostArray& actual, const HostArray& expected,
                              const Tolerance& tol, const char* who) {
  ASSERT_EQ(actual.shape, expected.shape) << "output shape differs from the reference's";
  for (std::size_t i = 0; i < actual.size(); ++i)
    EXPECT_TRUE(close(actual[i], expected[i], tol.forward_abs, tol.forward_rel))
        << "forward element " << i << ": " << who << " " << actual[i] << " vs reference "
        << expected[i];
}

void check_op(const OpUnderTest& op, const Reference& reference, const std::vector<Tensor>& inputs,
              const Tolerance& tol) {
  Tape tape;
  std::vector<Var> vars;
  std::vector<HostArray> host;
  for (const Tensor& t : inputs) {
    vars.push_back(tape.variable(t));
    host.emplace_back(t);
  }
  Var y = op(vars);
  const HostArray actual(y.value());
  expect_matches_reference(actual, reference(host), tol, "op");
  if (::testing::Test::HasFatalFailure()) return;

  const std::vector<float> cotangent = random_cotangent(actual.size(), 0xC0FFEE);
  tape.backward(y, Tensor::from_vector(y.shape(), cotangent));
  const auto loss = [&] { return weighted_sum(reference(host), cotangent); };
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    ASSERT_TRUE(vars[k].grad().defined()) << "no gradient reached input " << k;
    check_finite_differences("input " + std::to_string(k), std::span(host[k].values),
                             HostArray(vars[k].grad()).values, loss, tol.fd_step, tol.grad_abs,
                             tol.grad_rel);
  }
}

void check_batched_matches_rows(const OpUnderTest& op, const std::vector<Tensor>& inputs,
                                const std::vector<bool>& batched, double tolerance) {
  ASSERT_EQ(inputs.size(), batched.size());
  Tape tape;
  std::vector<Var> whole;
  std::int64_t rows = -1;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    whole.push_back(tape.constant(inputs[k]));
    if (batched[k]) rows = inputs[k].rows();
  }
  ASSERT_GT(rows, 0) << "no batched input";
  HostArray batch_result(op(whole).value());
  std::size_t row_size = batch_result.size() / std::size_t(rows);
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<Var> single;
    for (std::size_t k = 0; k < inputs.size(); ++k)
      single.push_back(tape.constant(batched[k] ? inputs[k].rows_view(r, 1) : inputs[k]));
    HostArray row_result(op(single).value());
    ASSERT_EQ(row_result.size(), row_size);
    for (std::size_t i = 0; i < row_size; ++i)
      EXPECT_NEAR(row_result[i], batch_result[std::size_t(r) * row_size + i], tolerance)
          << "row " << r << " element " << i;
  }
}

void expect_error(const std::function<void()>& body, const std::vector<std::string>& fragments) {
  try {
    body();
  } catch (const Error& e) {
    std::string message = e.what();
    for (const std::string& fragment : fragments)
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "message \"" << message << "\" lacks \"" << fragment << "\"";
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-weft exception: " << e.what();
    return;
  }
  ADD_FAILURE() << "expected a weft::Error";
}

}  // namespace weft::testing
