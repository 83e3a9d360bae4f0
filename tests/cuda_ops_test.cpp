// The CUDA backend held to the CPU one: every op in ops.def runs on the same inputs on both
// devices, and the forward values and every input's gradient must agree (the CPU side is
// itself checked against float64 references and finite differences by the op suite). Plus
// the dropout mask bit for bit, copies, the device pool and device-mixing errors. Without a
// usable device every test but the case-coverage check skips with "no CUDA device".
#include <algorithm>
#include <functional>
#include <limits>
#include <string>

#include "../src/backend/kernels.h"
#include "op_test_util.h"
#include "weft/backend/cuda.h"
#include "weft/loom/executor.h"

namespace weft::testing {
namespace {

#define WEFT_REQUIRE_CUDA() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device (" << cuda_unavailable_reason() << ")"

// One op applied to differentiable inputs `v` and non-differentiable tensors `t` (indices,
// labels), both already on the device under test.
using CaseBody = std::function<Var(const std::vector<Var>& v, const std::vector<Tensor>& t)>;

struct CudaCase {
  std::string op;  // its name in ops.def
  std::string label;
  std::vector<Tensor> inputs;  // float, on the CPU
  std::vector<Tensor> extras;  // anything else, on the CPU
  CaseBody body;
};

std::vector<std::int32_t> cycle(std::int64_t n, std::int32_t period) {
  std::vector<std::int32_t> out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) out[std::size_t(i)] = std::int32_t((i * 7 + 3) % period);
  return out;
}

Tensor ids(const std::vector<std::int32_t>& values) {
  return int_tensor({std::int64_t(values.size())}, values);
}

void add_unary_cases(std::vector<CudaCase>& cases) {
  using Fn = Var (*)(Var);
  const std::pair<const char*, Fn> unary[] = {
      {"neg", neg}, {"relu", relu},         {"sigmoid", sigmoid}, {"tanh", tanh},
      {"exp", exp}, {"softplus", softplus}, {"abs", abs}};
  for (auto [name, fn] : unary) {
    cases.push_back({name, "small", {random_tensor({5, 7}, 1, -3, 3)}, {}, [fn](auto& v, auto&) {
                       return fn(v[0]);
                     }});
    cases.push_back(
        {name, "large", {random_tensor({300, 257}, 2, -3, 3)}, {}, [fn](auto& v, auto&) {
           return fn(v[0]);
         }});
  }
  cases.push_back(
      {"log", "positive", {random_tensor({40, 33}, 3, 0.2f, 3)}, {}, [](auto& v, auto&) {
         return log(v[0]);
       }});
}

void add_binary_cases(std::vector<CudaCase>& cases) {
  using Fn = Var (*)(Var, Var);
  const std::pair<const char*, Fn> binary[] = {{"add", add},         {"sub", sub},
                                               {"mul", mul},         {"div", div},
                                               {"minimum", minimum}, {"maximum", maximum}};
  for (auto [name, fn] : binary) {
    auto body = [fn](auto& v, auto&) { return fn(v[0], v[1]); };
    cases.push_back({name,
                     "same shape",
                     {random_tensor({6, 5}, 4), random_tensor({6, 5}, 5, 0.5f, 2)},
                     {},
                     body});
    cases.push_back({name,
                     "row broadcast",
                     {random_tensor({300, 70}, 6), random_tensor({70}, 7, 0.5f, 2)},
                     {},
                     body});
    cases.push_back({name,
                     "scalar lhs",
                     {random_tensor({1}, 8, 0.5f, 2), random_tensor({9, 4}, 9, 0.5f, 2)},
                     {},
                     body});
    cases.push_back({name,
                     "long broadcast",
                     {random_tensor({20000, 3}, 10), random_tensor({1, 3}, 11, 0.5f, 2)},
                     {},
                     body});
  }
}

void add_linear_algebra_cases(std::vector<CudaCase>& cases) {
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    Tensor a = random_tensor(ta ? Shape{70, 33} : Shape{33, 70}, 20 + t);
    Tensor b = random_tensor(tb ? Shape{45, 70} : Shape{70, 45}, 30 + t);
    cases.push_back({"matmul",
                     std::string("transposes ") + (ta ? "T" : "N") + (tb ? "T" : "N"),
                     {a, b},
                     {},
                     [ta, tb](auto& v, auto&) { return matmul(v[0], v[1], ta, tb); }});
  }
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    Tensor a = random_tensor(ta ? Shape{9, 17, 6} : Shape{9, 6, 17}, 60 + t);
    Tensor b = random_tensor(tb ? Shape{9, 11, 17} : Shape{9, 17, 11}, 70 + t);
    cases.push_back({"batch_matmul",
                     std::string("transposes ") + (ta ? "T" : "N") + (tb ? "T" : "N"),
                     {a, b},
                     {},
                     [ta, tb](auto& v, auto&) { return batch_matmul(v[0], v[1], ta, tb); }});
  }
  cases.push_back(
      {"linear",
       "tree-lstm shape",
       {random_tensor({37, 64}, 40), random_tensor({64, 128}, 41), random_tensor({128}, 42)},
       {},
       [](auto& v, auto&) { return linear(v[0], v[1], v[2]); }});
  const std::vector<Tensor> linear_inputs{random_tensor({37, 64}, 43), random_tensor({64, 32}, 44),
                                          random_tensor({32}, 45)};
  cases.push_back({"linear_relu", "bias in the activation", linear_inputs, {}, [](auto& v, auto&) {
                     return linear_relu(v[0], v[1], v[2]);
                   }});
  cases.push_back({"linear_tanh", "bias in the activation", linear_inputs, {}, [](auto& v, auto&) {
                     return linear_tanh(v[0], v[1], v[2]);
                   }});
  cases.push_back(
      {"linear_sigmoid", "bias in the activation", linear_inputs, {}, [](auto& v, auto&) {
         return linear_sigmoid(v[0], v[1], v[2]);
       }});
}

void add_shape_cases(std::vector<CudaCase>& cases) {
  cases.push_back({"concat",
                   "features",
                   {random_tensor({5, 3}, 50), random_tensor({5, 4}, 51)},
                   {},
                   [](auto& v, auto&) {
                     return concat({v[0], v[1]});
                   }});
  cases.push_back({"concat",
                   "rows",
                   {random_tensor({2, 3, 2}, 52), random_tensor({4, 3, 2}, 53)},
                   {},
                   [](auto& v, auto&) {
                     return concat({v[0], v[1]}, 0);
                   }});
  cases.push_back({"split", "uneven sizes", {random_tensor({6, 9}, 54)}, {}, [](auto& v, auto&) {
                     const std::int64_t sizes[] = {2, 3, 4};
                     auto parts = split(v[0], sizes);
                     return concat({parts[2] * 2.0f, parts[0], parts[1] * 3.0f});
                   }});
  cases.push_back({"slice", "middle axis", {random_tensor({3, 8, 5}, 55)}, {}, [](auto& v, auto&) {
                     return slice(v[0], 1, 2, 4);
                   }});
  cases.push_back({"reshape", "then scale", {random_tensor({4, 6}, 56)}, {}, [](auto& v, auto&) {
                     return reshape(v[0], {3, -1}) * 1.5f;
                   }});
}

void add_indexing_cases(std::vector<CudaCase>& cases) {
  cases.push_back({"gather_rows",
                   "repeated",
                   {random_tensor({50, 9}, 60)},
                   {ids(cycle(400, 50))},
                   [](auto& v, auto& t) { return gather_rows(v[0], t[0]); }});
  cases.push_back({"embedding_lookup",
                   "repeated",
                   {random_tensor({30, 16}, 61)},
                   {ids(cycle(99, 30))},
                   [](auto& v, auto& t) { return embedding_lookup(v[0], t[0]); }});
  cases.push_back({"scatter_add_rows",
                   "duplicates",
                   {random_tensor({400, 5}, 62)},
                   {ids(cycle(400, 37))},
                   [](auto& v, auto& t) { return scatter_add_rows(v[0], t[0], 40); }});
}

void add_reduce_cases(std::vector<CudaCase>& cases) {
  cases.push_back({"sum_rows", "tall", {random_tensor({500, 7}, 70)}, {}, [](auto& v, auto&) {
                     return sum_rows(v[0]);
                   }});
  cases.push_back({"mean_rows", "tall", {random_tensor({500, 7}, 71)}, {}, [](auto& v, auto&) {
                     return mean_rows(v[0]);
                   }});
  cases.push_back({"max_rows", "tall", {random_tensor({500, 7}, 72)}, {}, [](auto& v, auto&) {
                     return max_rows(v[0]);
                   }});
  // Segment 5 is empty; ids are unsorted.
  std::vector<std::int32_t> seg = cycle(300, 8);
  for (auto& s : seg) s = s == 5 ? 6 : s;
  const Tensor seg_ids = ids(seg);
  cases.push_back({"segment_sum",
                   "unsorted, one empty",
                   {random_tensor({300, 6}, 73)},
                   {seg_ids},
                   [](auto& v, auto& t) { return segment_sum(v[0], t[0], 8); }});
  cases.push_back({"segment_mean",
                   "unsorted, one empty",
                   {random_tensor({300, 6}, 74)},
                   {seg_ids},
                   [](auto& v, auto& t) { return segment_mean(v[0], t[0], 8); }});
  cases.push_back({"segment_max",
                   "unsorted, one empty",
                   {random_tensor({300, 6}, 75)},
                   {seg_ids},
                   [](auto& v, auto& t) { return segment_max(v[0], t[0], 8); }});
  cases.push_back(
      {"sum", "many elements", {random_tensor({1000, 300}, 76)}, {}, [](auto& v, auto&) {
         return sum(v[0]);
       }});
  cases.push_back({"mean", "small", {random_tensor({3, 4}, 77)}, {}, [](auto& v, auto&) {
                     return mean(v[0]);
                   }});
}

void add_loss_and_cell_cases(std::vector<CudaCase>& cases) {
  cases.push_back(
      {"softmax", "wide rows", {random_tensor({20, 1000}, 80, -8, 8)}, {}, [](auto& v, auto&) {
         return softmax(v[0]);
       }});
  cases.push_back(
      {"log_softmax", "wide rows", {random_tensor({20, 1000}, 81, -8, 8)}, {}, [](auto& v, auto&) {
         return log_softmax(v[0]);
       }});
  cases.push_back({"log_softmax",
                   "huge logits",
                   {random_tensor({4, 5}, 82, -300, 300)},
                   {},
                   [](auto& v, auto&) { return log_softmax(v[0]); }});
  cases.push_back({"softmax_cross_entropy",
                   "five classes",
                   {random_tensor({64, 5}, 83, -4, 4)},
                   {ids(cycle(64, 5))},
                   [](auto& v, auto& t) { return softmax_cross_entropy(v[0], t[0]); }});
  cases.push_back({"l2_loss", "matrix", {random_tensor({30, 40}, 84)}, {}, [](auto& v, auto&) {
                     return l2_loss(v[0]);
                   }});
  cases.push_back(
      {"dropout", "same seed, same mask", {random_tensor({50, 41}, 85)}, {}, [](auto& v, auto&) {
         Rng rng(99);
         return dropout(v[0], 0.3f, rng);
       }});
  cases.push_back({"lstm_cell_state",
                   "two children",
                   {random_tensor({33, 4 * 16}, 86, -2, 2), random_tensor({33, 2 * 16}, 87)},
                   {},
                   [](auto& v, auto&) { return lstm_cell_state(v[0], v[1]); }});
  cases.push_back({"lstm_cell_state",
                   "two children, output gate after, recurrent dropout",
                   {random_tensor({33, 5 * 16}, 90, -2, 2), random_tensor({33, 2 * 16}, 91)},
                   {},
                   [](auto& v, auto&) {
                     Rng rng(98);
                     return lstm_cell_state(v[0], v[1], 16, 0.3f, &rng);
                   }});
  cases.push_back({"ragged_attention",
                   "two beams, lengths 1 to the whole memory",
                   {random_tensor({3, 2, 17}, 94), random_tensor({3, 6, 17}, 95)},
                   {Tensor::from_vector({3}, std::vector<std::int32_t>{6, 1, 4})},
                   [](auto& v, auto& e) { return ragged_attention(v[0], v[1], e[0]); }});
  cases.push_back({"lstm_hidden",
                   "output gate at column 64",
                   {random_tensor({33, 5 * 16}, 92, -2, 2), random_tensor({33, 16}, 93, -2, 2)},
                   {},
                   [](auto& v, auto&) { return lstm_hidden(v[0], 64, v[1]); }});
  cases.push_back({"lstm_cell_state",
                   "one child",
                   {random_tensor({7, 3 * 5}, 88, -2, 2), random_tensor({7, 5}, 89)},
                   {},
                   [](auto& v, auto&) { return lstm_cell_state(v[0], v[1]); }});
  cases.push_back({"linear_lstm_cell_state",
                   "two children, recurrent dropout",
                   {random_tensor({33, 24}, 94), random_tensor({24, 4 * 16}, 95),
                    random_tensor({4 * 16}, 96), random_tensor({33, 2 * 16}, 97)},
                   {},
                   [](auto& v, auto&) {
                     Rng rng(97);
                     return linear_lstm_cell_state(v[0], v[1], v[2], v[3], 0.3f, &rng);
                   }});
}

const std::vector<CudaCase>& all_cases() {
  static const std::vector<CudaCase> cases = [] {
    std::vector<CudaCase> c;
    add_unary_cases(c);
    add_binary_cases(c);
    add_linear_algebra_cases(c);
    add_shape_cases(c);
    add_indexing_cases(c);
    add_reduce_cases(c);
    add_loss_and_cell_cases(c);
    // where: a full and a broadcast operand, the condition from a comparison on the device.
    c.push_back({"where",
                 "row broadcast",
                 {random_tensor({300, 70}, 12), random_tensor({70}, 13)},
                 {},
                 [](auto& v, auto&) { return where(greater(v[0], v[1]), v[0] * 2.0f, v[1]); }});
    return c;
  }();
  return cases;
}

struct Outcome {
  std::vector<float> value;
  std::vector<std::vector<float>> grads;
};

// Runs a case on `device` with a fixed random cotangent and returns host copies.
Outcome run_on(const CudaCase& c, Device device) {
  Tape tape;
  std::vector<Var> vars;
  for (const Tensor& t : c.inputs) vars.push_back(tape.variable(t.to(device)));
  std::vector<Tensor> extras;
  for (const Tensor& t : c.extras) extras.push_back(t.to(device));
  Var y = c.body(vars, extras);
  EXPECT_EQ(y.value().device(), device) << "the result left the device";
  Tensor cotangent = random_tensor(y.shape(), 12345, -1, 1);
  tape.backward(y, cotangent.to(device));
  Outcome out;
  out.value = y.value().to_float_vector();
  for (const Var& v : vars)
    out.grads.push_back(v.grad().defined() ? v.grad().to_float_vector() : std::vector<float>{});
  return out;
}

void expect_agree(const std::vector<float>& gpu, const std::vector<float>& cpu, const char* what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  std::size_t reported = 0;
  for (std::size_t i = 0; i < cpu.size() && reported < 5; ++i) {
    const double tol = 2e-5 + 2e-4 * std::abs(double(cpu[i]));
    if (!(std::abs(double(gpu[i]) - double(cpu[i])) <= tol)) {
      ADD_FAILURE() << what << " element " << i << ": cuda " << gpu[i] << " vs cpu " << cpu[i];
      ++reported;
    }
  }
}

TEST(CudaOps, EveryOpInTheListHasACudaCase) {
  // Needs no device: it checks this file's table against ops.def.
  for (std::string_view op : op_names()) {
    const auto& cases = all_cases();
    EXPECT_TRUE(
        std::any_of(cases.begin(), cases.end(), [&](const CudaCase& c) { return c.op == op; }))
        << "op '" << op << "' from ops.def has no CUDA-vs-CPU case in cuda_ops_test.cpp";
  }
}

TEST(CudaOps, EveryCaseRunsOnTheCpu) {
  // Needs no device: a case that cannot run (bad shapes, an op error) or leaves an input
  // without a gradient fails here, not only on a GPU machine.
  for (const CudaCase& c : all_cases()) {
    SCOPED_TRACE(c.op + " (" + c.label + ")");
    Outcome cpu;
    ASSERT_NO_THROW(cpu = run_on(c, Device::kCpu));
    EXPECT_FALSE(cpu.value.empty());
    for (std::size_t k = 0; k < cpu.grads.size(); ++k)
      EXPECT_EQ(cpu.grads[k].size(), std::size_t(c.inputs[k].numel())) << "input " << k;
  }
}

TEST(CudaOps, EveryCaseAgreesWithTheCpu) {
  WEFT_REQUIRE_CUDA();
  for (const CudaCase& c : all_cases()) {
    SCOPED_TRACE(c.op + " (" + c.label + ")");
    const Outcome cpu = run_on(c, Device::kCpu);
    const Outcome gpu = run_on(c, Device::kCuda);
    expect_agree(gpu.value, cpu.value, "forward");
    for (std::size_t k = 0; k < cpu.grads.size(); ++k)
      expect_agree(gpu.grads[k], cpu.grads[k], ("gradient of input " + std::to_string(k)).c_str());
  }
  cuda_synchronize();
}

TEST(CudaBackend, DropoutMaskEqualsTheCpuMaskBitForBit) {
  WEFT_REQUIRE_CUDA();
  for (std::uint64_t seed : {1ull, 0xDEADBEEFull, ~0ull}) {
    Tensor cpu = Tensor::empty({1000, 37});
    Tensor gpu = Tensor::empty({1000, 37}, DType::kFloat32, Device::kCuda);
    backend::dropout_mask(0.7f, seed, cpu);
    backend::dropout_mask(0.7f, seed, gpu);
    EXPECT_EQ(gpu.to_float_vector(), cpu.to_float_vector()) << "seed " << seed;
  }
}

TEST(CudaBackend, CopiesRoundTripEveryDtypeAndSize) {
  WEFT_REQUIRE_CUDA();
  // 3 M floats (12 MB) exceed the 8 MB staging ring; 600 small uploads wrap it many times.
  for (std::int64_t n :
       {std::int64_t(0), std::int64_t(1), std::int64_t(1000), std::int64_t(3) << 20}) {
    Tensor x = random_tensor({n}, std::uint64_t(n) + 1);
    Tensor back = x.to(Device::kCuda).clone().to(Device::kCpu);
    EXPECT_EQ(back.to_float_vector(), x.to_float_vector()) << n << " floats";
  }
  std::vector<Tensor> uploads;
  for (int i = 0; i < 600; ++i)
    uploads.push_back(
        Tensor::from_vector({3000}, std::vector<float>(3000, float(i)), Device::kCuda));
  for (int i = 0; i < 600; i += 97)
    EXPECT_EQ(uploads[std::size_t(i)].to_float_vector()[2999], float(i));
  Tensor ints =
      Tensor::from_vector({4}, std::vector<std::int32_t>{-7, 0, 7, 1 << 30}, Device::kCuda);
  EXPECT_EQ(ints.to_int_vector(), (std::vector<std::int32_t>{-7, 0, 7, 1 << 30}));
  EXPECT_EQ(Tensor::zeros({3}, DType::kInt32, Device::kCuda).to_int_vector(),
            (std::vector<std::int32_t>{0, 0, 0}));
  EXPECT_NE(ints.to_string().find(", cuda, {-7, 0, 7"), std::string::npos) << ints.to_string();
}

TEST(CudaBackend, DtypeKernelsEqualTheCpuExactly) {
  WEFT_REQUIRE_CUDA();
  // Integer arithmetic (wrapping, floor division), comparisons, where and casts of every dtype:
  // the CUDA results equal the CPU's bit for bit.
  const std::int64_t lo = std::numeric_limits<std::int64_t>::min();
  const Tensor a = Tensor::from_vector({6}, std::vector<std::int64_t>{7, -7, lo, 5, 0, 1LL << 62});
  const Tensor b = Tensor::from_vector({6}, std::vector<std::int64_t>{2, 2, -1, -3, 4, 4});
  const Tensor wide = Tensor::from_vector({6}, std::vector<double>{0.1, -2.9, 1e300, -1e300, 0, 3});
  auto run = [&](Device device) {
    Tape tape;
    Var x = tape.constant(a.to(device)), y = tape.constant(b.to(device));
    Var w = tape.constant(wide.to(device));
    std::vector<Tensor> out;
    for (Var r :
         {x + y, x - y, x * y, x / y, minimum(x, y), maximum(x, y), abs(x), -x,
          cast(less(x, y), DType::kInt64), where(greater(w, cast(y, DType::kFloat64)), x, y),
          cast(w, DType::kInt64), cast(cast(w, DType::kInt32), DType::kInt64),
          cast(cast(w, DType::kBool), DType::kInt64), cast(tanh(w) * 1e6f, DType::kInt64)})
      out.push_back(r.value().to(Device::kCpu));
    return out;
  };
  const std::vector<Tensor> cpu = run(Device::kCpu), gpu = run(Device::kCuda);
  ASSERT_EQ(cpu.size(), gpu.size());
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    ASSERT_EQ(cpu[i].dtype(), gpu[i].dtype()) << "result " << i;
    EXPECT_EQ(cpu[i].to_string(), gpu[i].to_string()) << "result " << i;
  }
  cuda_synchronize();
}

TEST(CudaBackend, ThePoolReusesFreedDeviceBlocks) {
  WEFT_REQUIRE_CUDA();
  { Tensor warm = Tensor::empty({1 << 16}, DType::kFloat32, Device::kCuda); }
  const AllocatorStats before = allocator_stats(Device::kCuda);
  for (int i = 0; i < 10; ++i) Tensor t = Tensor::empty({1 << 16}, DType::kFloat32, Device::kCuda);
  const AllocatorStats after = allocator_stats(Device::kCuda);
  EXPECT_EQ(after.system_allocations, before.system_allocations);
  EXPECT_EQ(after.allocations, before.allocations + 10);
  release_cached_memory(Device::kCuda);
  EXPECT_EQ(allocator_stats(Device::kCuda).bytes_cached, 0);
}

TEST(CudaBackend, GemmWithAnEmptyInnerDimensionScalesC) {
  WEFT_REQUIRE_CUDA();
  Tensor a = Tensor::empty({3, 0}, DType::kFloat32, Device::kCuda);
  Tensor b = Tensor::empty({0, 2}, DType::kFloat32, Device::kCuda);
  Tensor c = Tensor::full({3, 2}, 4.0f, Device::kCuda);
  backend::gemm(a, false, b, false, 1.0f, 0.5f, c);
  EXPECT_EQ(c.to_float_vector(), std::vector<float>(6, 2.0f));
  backend::gemm(a, false, b, false, 1.0f, 0.0f, c);
  EXPECT_EQ(c.to_float_vector(), std::vector<float>(6, 0.0f));
}

TEST(CudaBackend, TransposeEqualsTheCpuExactly) {
  WEFT_REQUIRE_CUDA();
  for (const Shape shape : {Shape{1, 1}, Shape{7, 3}, Shape{300, 750}, Shape{0, 4}}) {
    const Tensor x = random_tensor(shape, 31);
    Tensor cpu = Tensor::empty({shape[1], shape[0]});
    Tensor gpu = Tensor::empty({shape[1], shape[0]}, DType::kFloat32, Device::kCuda);
    backend::transpose(x, cpu);
    backend::transpose(x.to(Device::kCuda), gpu);
    EXPECT_EQ(gpu.to(Device::kCpu).to_float_vector(), cpu.to_float_vector()) << shape;
  }
}

TEST(CudaBackend, BadIndicesAreReportedAsOnTheCpu) {
  WEFT_REQUIRE_CUDA();
  Tape tape;
  Var x = tape.constant(random_tensor({5, 2}, 1).to(Device::kCuda));
  expect_error(
      [&] {
        gather_rows(x, ids({0, 4, 5, -1}).to(Device::kCuda));
      },
      {"[gather_rows] indices value 5 at position 2 is out of range [0, 5)"});
}

TEST(CudaBackend, SegmentMaxTiesGoToTheFirstRow) {
  WEFT_REQUIRE_CUDA();
  Tape tape;
  Var x = tape.variable(Tensor::from_vector({4, 1}, std::vector<float>{2, 5, 5, 1}, Device::kCuda));
  Var y = segment_max(x, ids({0, 0, 0, 1}).to(Device::kCuda), 3);
  EXPECT_EQ(y.value().to_float_vector(), (std::vector<float>{5, 1, 0}));
  tape.backward(sum(y));
  EXPECT_EQ(x.grad().to_float_vector(), (std::vector<float>{0, 1, 0, 1}));
}

TEST(CudaBackend, MixingDevicesInOneOpIsAClearError) {
  WEFT_REQUIRE_CUDA();
  Tape tape;
  Var cpu = tape.variable(random_tensor({2, 3}, 1));
  Var gpu = tape.variable(random_tensor({2, 3}, 2).to(Device::kCuda));
  const std::string hint = "operands are on different devices: cpu vs cuda";
  expect_error([&] { add(cpu, gpu); }, {"[add] " + hint});
  expect_error([&] { matmul(cpu, gpu, false, true); }, {"[matmul] " + hint});
  expect_error([&] { concat({cpu, gpu}); }, {"[concat] " + hint});
  expect_error(
      [&] {
        gather_rows(gpu, ids({0, 1}));
      },
      {"[gather_rows] operands are on different devices"});
  expect_error(
      [&] {
        segment_sum(gpu, ids({0, 1}), 2);
      },
      {"[segment_sum] operands are on different devices"});
  expect_error(
      [&] {
        lstm_cell_state(tape.constant(random_tensor({2, 3}, 3)), gpu);
      },
      {"[lstm_cell_state] " + hint});
  Var y = gpu * 2.0f;
  expect_error(
      [&] {
        tape.backward(y, random_tensor({2, 3}, 4));
      },
      {"[backward] cotangent is on cpu but output float32 [2, 3] is on cuda"});
  loom::Loom loom;
  const loom::TypeId t = loom.add_type({DType::kFloat32, {3}, "t"});
  loom::Executor executor(loom, tape, Device::kCuda);
  expect_error([&] { executor.feed(t, cpu); },
               {"[loom] feed: batch float32 [2, 3] is on cpu but the executor runs on cuda"});
}

}  // namespace
}  // namespace weft::testing
