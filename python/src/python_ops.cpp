// Ops whose forward and backward are Python (what weft.torch builds torch bodies on):
// _record_op(name, inputs, outputs, backward) records the already computed outputs as tape
// nodes reading `inputs`; on the tape's backward, `backward(grads)` is called once for all the
// outputs (a gradient or None each) and returns one gradient (or None) per input, which is
// added into the inputs' gradients. The callable lives as long as the nodes do.
#include <memory>
#include <vector>

#include "common.h"
#include "weft/backend/tensor_ops.h"
#include "weft/core/error.h"

namespace weft::python {
namespace {

// What the nodes of one recorded call share: the backward callable and the gradients of the
// outputs gathered until the call's lowest output with a gradient runs the backward.
struct PythonOp {
  std::string name;
  std::size_t num_inputs = 0;  // the caller's (an anchor leaf may follow them on the node)
  std::unique_ptr<PyCallable> backward;
  std::vector<weft::Tensor> output_grads;
};

void release_python_op(void* context) { delete static_cast<PythonOp*>(context); }

// The call's state, kept alive by node.saved[1] (a zero-element tensor owning it), so it goes
// when the tape drops the nodes (clear, destruction) whether or not backward ran.
weft::Tensor hold(PythonOp* op) {
  return weft::Tensor::from_external(op, Shape({0}), DType::kFloat32, Device::kCpu,
                                     release_python_op, op);
}

py::list grads_for_python(const PythonOp& op) {
  py::list grads;
  for (const weft::Tensor& g : op.output_grads)
    grads.append(g.defined() ? py::cast(g) : py::none());
  return grads;
}

// Adds the gradients `backward` returned into the call's inputs (inputs of node `id`).
void add_input_grads(Tape& tape, std::uint32_t id, const PythonOp& op, py::handle result) {
  if (!py::isinstance<py::list>(result) && !py::isinstance<py::tuple>(result))
    fail("torch", op.name, ": the backward returned ",
         py::str(py::type::of(result).attr("__name__")).cast<std::string>(),
         ", not a list of gradients");
  const py::sequence grads = py::reinterpret_borrow<py::sequence>(result);
  if (grads.size() != op.num_inputs)
    fail("torch", op.name, ": the backward returned ", grads.size(), " gradients for ",
         op.num_inputs, " inputs");
  for (std::uint32_t k = 0; k < op.num_inputs; ++k) {
    if (grads[k].is_none()) continue;
    const weft::Tensor g = grads[k].cast<weft::Tensor>();
    const std::uint32_t input = tape.input(id, k);
    weft::Tensor* target = tape.grad_of(input);
    if (target == nullptr) continue;
    if (g.shape() != target->shape() || g.dtype() != target->dtype())
      fail("torch", op.name, ": the gradient of input ", k, " is ", g.describe(),
           " but the input is ", tape.node(input).value.describe());
    backend::add_scaled(g, 1.0f, *target);
  }
}

// Output k of a call of n outputs is node id; its siblings are ids id - k .. id - k + n - 1,
// recorded together, so every consumer of any of them comes later on the tape and all their
// gradients are final once the reverse sweep reaches the highest of them. Each stores its
// gradient; the lowest sibling holding one calls the Python backward for all.
void python_op_backward(Tape& tape, std::uint32_t id) {
  TapeNode& n = tape.node(id);
  auto* op = static_cast<PythonOp*>(const_cast<void*>(n.saved[1].raw_data()));
  const auto k = std::uint32_t(n.int_attrs[0]);
  op->output_grads[k] = n.grad;
  for (std::uint32_t j = 0; j < k; ++j)
    if (tape.node(id - k + j).grad.defined()) return;  // that sibling runs the backward
  py::gil_scoped_acquire gil;
  py::object result;
  try {
    result = op->backward->fn()(grads_for_python(*op));
  } catch (py::error_already_set& e) {
    // Ctrl-C, and errors the backward already names (weft.Error), go through as they are.
    // (Held for the process's life, never released: no decref after the interpreter ends.)
    static const py::handle weft_error =
        py::object(py::module_::import("weft._weft").attr("Error")).release();
    if (e.matches(PyExc_KeyboardInterrupt) || e.matches(weft_error)) throw;
    fail("torch", op->name, ": the backward raised ", python_error_text(e));
  }
  for (weft::Tensor& g : op->output_grads) g = weft::Tensor();
  add_input_grads(tape, id, *op, result);
}

Tape& tape_of(const std::vector<Var>& inputs) {
  return inputs.empty() ? Tape::current() : inputs.front().tape();
}

py::list record_op(const std::string& name, std::vector<Var> inputs,
                   const std::vector<weft::Tensor>& outputs, py::object backward) {
  Tape& tape = tape_of(inputs);
  for (const Var& v : inputs)
    if (&v.tape() != &tape) fail("torch", name, ": the inputs are on different tapes");
  const bool differentiable = !backward.is_none() && tape.grad_enabled();
  const std::size_t num_inputs = inputs.size();
  bool any_input_needs_grad = false;
  for (const Var& v : inputs) any_input_needs_grad = any_input_needs_grad || v.requires_grad();
  // Parameters the body owns (a torch module's) need the backward even where no input does:
  // an anchor leaf makes the nodes differentiable; nothing flows into it.
  if (differentiable && !any_input_needs_grad)
    inputs.push_back(tape.variable(weft::Tensor::zeros(Shape({0}), DType::kFloat32)));
  py::list out;
  if (!differentiable) {
    for (const weft::Tensor& t : outputs) out.append(tape.constant(t));
    return out;
  }
  auto* op =
      new PythonOp{name, num_inputs, std::make_unique<PyCallable>(backward.cast<py::function>()),
                   std::vector<weft::Tensor>(outputs.size())};
  const weft::Tensor holder = hold(op);
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const Var v = tape.record(outputs[k], std::span<const Var>(inputs), python_op_backward);
    TapeNode& n = tape.node(v.id());
    n.saved[1] = holder;
    n.int_attrs[0] = std::int64_t(k);
    out.append(v);
  }
  return out;
}

}  // namespace

void init_python_ops(py::module_& m) {
  m.def("_record_op", &record_op, py::arg("name"), py::arg("inputs"), py::arg("outputs"),
        py::arg("backward"), R"doc(
Records outputs computed outside Weft as tape nodes reading `inputs` (one node per output). On
backward, backward(grads) runs once for the call: grads holds each output's gradient (a
weft.Tensor, or None where none reached it); it returns one gradient or None per input. With
backward None (or gradients off on the tape) the outputs are constants.)doc");
  m.def(
      "_records_grad",
      [](const std::vector<Var>& inputs) { return tape_of(inputs).grad_enabled(); },
      py::arg("inputs"), "Whether the tape of these Vars (or the current one) records gradients.");
}

}  // namespace weft::python
