// weft.torch's per-step work (python/weft/torch.py, _torch_optim.py) as one call each instead of
// Python per output, per parameter and per tensor: a batch's outputs and labels as DLPack
// capsules, Weft's backward from torch's gradients with each parameter's gradient for torch (a
// row-sparse one as int64 COO indices and a copy of its rows), and an optimizer's rule over many
// torch tensors at once, their Weft views kept between steps (weft.torch.Adam).
#include <limits>
#include <unordered_map>

#include "common.h"
#include "weft/autodiff/ops.h"
#include "weft/blocks/compiler.h"
#include "weft/core/error.h"
#include "weft/train/optimizer.h"

namespace weft::python {
namespace {

using blocks::BatchResult;
using blocks::MetricValues;

// torch's utils.dlpack.to_dlpack (a C function: no Python-level checks), looked up once. Kept
// for the process's life (never destroyed after the interpreter is gone).
py::handle torch_to_dlpack() {
  static py::object* fn =
      new py::object(py::module_::import("torch.utils.dlpack").attr("to_dlpack"));
  return *fn;
}

Tensor view_of_torch(py::handle tensor) {
  return from_dlpack(torch_to_dlpack()(tensor.attr("detach")()));
}

std::uintptr_t data_address(py::handle tensor) {
  return tensor.attr("data_ptr")().cast<std::uintptr_t>();
}

// Each output's and each metric's values (Vars, for the backward) and the same values and the
// metrics' labels (int64, torch's class indices) as DLPack capsules for torch.from_dlpack.
py::tuple step_outputs(const BatchResult& result, const std::vector<std::string>& metrics) {
  py::list vars, values, labels;
  auto add = [&](const Var& var, const std::string& what) {
    if (!var.defined())
      fail("weft.torch", what, " has no rows in this batch (no example produced one)");
    vars.append(py::cast(var));
    values.append(to_dlpack(var.value()));
  };
  for (std::size_t k = 0; k < result.num_outputs(); ++k)
    add(result.output(k), "output " + std::to_string(k));
  for (const std::string& name : metrics) {
    const MetricValues rows = result.metric(name);
    add(rows.values, "metric '" + name + "'");
    labels.append(to_dlpack(label_tensor(rows, DType::kInt64)));
  }
  return py::make_tuple(vars, values, labels);
}

// One backward pass from torch's gradients of `outputs` (None: the loss did not use it), seeded
// through sum_k <output_k, grad_k> where several outputs have gradients.
void backward_from(Tape& tape, const std::vector<Var>& outputs, const py::sequence& grads) {
  if (grads.size() != outputs.size())
    fail("weft.torch", outputs.size(), " outputs but ", grads.size(), " gradients");
  std::vector<std::pair<Var, Tensor>> seeded;
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    py::object g = grads[k];
    if (g.is_none() || !outputs[k].requires_grad()) continue;
    seeded.emplace_back(outputs[k], from_dlpack(g.attr("detach")().attr("contiguous")()));
  }
  if (seeded.empty()) return;
  py::gil_scoped_release nogil;
  if (seeded.size() == 1) return tape.backward(seeded[0].first, seeded[0].second);
  TapeScope scope(tape);
  Var total;
  for (const auto& [var, g] : seeded) {
    Var term = sum(var * tape.constant(g));
    total = total.defined() ? total + term : term;
  }
  tape.backward(total);
}

// A row-sparse gradient for torch.sparse_coo_tensor: int64 indices [1, k], a copy of the rows
// (Weft's may live in the tape's buffers, which the next step reuses while torch may still hold
// this gradient, accumulating over several backward passes) and the table's shape.
py::tuple sparse_grad_for_torch(Parameter& p) {
  if (!p.grad_is_row_sparse())
    fail("weft.torch", "parameter '", p.name(),
         "' asks for row-sparse gradients (sparse_grad, Embedding(..., sparse_gradient=True)), "
         "but this step reached it through an op other than a row lookup, so its gradient is "
         "dense; use the table only through lookups (Embedding, gather_rows), or set its "
         "sparse_grad to False (and use a dense optimizer)");
  const RowSparseGrad& rows = p.row_sparse_grad();
  const std::vector<std::int32_t> ids = rows.indices.to(Device::kCpu).to_int_vector();
  const std::vector<std::int64_t> wide(ids.begin(), ids.end());
  const Tensor indices = Tensor::from_vector(Shape{1, std::int64_t(wide.size())}, wide);
  const auto& dims = p.shape().dims();
  return py::make_tuple(to_dlpack(indices.to(rows.rows.device())), to_dlpack(rows.rows.clone()),
                        py::tuple(py::cast(std::vector<std::int64_t>(dims.begin(), dims.end()))));
}

// Whether torch's .grad of a parameter is Weft's gradient buffer itself (not zeroed since, or
// zeroed in place): Weft then accumulates into it and torch is handed nothing to add.
bool torch_holds_weft_grad(Parameter& p, py::handle torch_grad) {
  if (p.sparse_grad() || torch_grad.is_none() || !p.grad().defined()) return false;
  return data_address(torch_grad) == reinterpret_cast<std::uintptr_t>(p.grad().raw_data());
}

// Zeroes the gradients torch does not hold, runs the backward and returns, per parameter, what
// torch is handed: None (nothing, or accumulated in place), a capsule of the dense gradient (a
// view of Weft's buffer), or a row-sparse one's (indices, rows, shape).
py::list step_backward(Tape& tape, const std::vector<Var>& outputs, const py::sequence& grads,
                       std::vector<Parameter> params, const py::sequence& torch_grads) {
  if (torch_grads.size() != params.size())
    fail("weft.torch", params.size(), " parameters but ", torch_grads.size(), " torch .grads");
  std::vector<bool> in_place(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    in_place[i] = torch_holds_weft_grad(params[i], torch_grads[i]);
    if (!in_place[i]) params[i].zero_grad();
  }
  backward_from(tape, outputs, grads);
  py::list out;
  for (std::size_t i = 0; i < params.size(); ++i) {
    Parameter& p = params[i];
    if (p.sparse_grad())
      out.append(sparse_grad_for_torch(p));
    else if (in_place[i] || !p.grad().defined())
      out.append(py::none());
    else
      out.append(to_dlpack(p.grad()));
  }
  return out;
}

// Weft's (int32 indices, rows) of a torch sparse COO gradient, each row once: indices already
// strictly increasing (weft.torch's own gradients, whose coalesced flag torch's accumulation
// drops) are taken as they are, anything else is coalesced by torch first (repeats summed).
std::pair<Tensor, Tensor> distinct_rows(py::object grad) {
  Tensor wide = view_of_torch(grad.attr("_indices")());
  auto increasing = [](const Tensor& t) {
    const std::int64_t* ids = t.data<std::int64_t>();
    for (std::int64_t i = 1; i < t.numel(); ++i)
      if (ids[i] <= ids[i - 1]) return false;
    return true;
  };
  if (wide.dtype() != DType::kInt64 || wide.device() != Device::kCpu || wide.rank() != 2 ||
      wide.shape()[0] != 1)
    fail("weft.torch.Adam",
         "a sparse gradient must be sparse in its first axis only, with int64 "
         "indices on the CPU; its indices are ",
         wide.describe());
  if (!grad.attr("is_coalesced")().cast<bool>() && !increasing(wide)) {
    grad = grad.attr("coalesce")();
    wide = view_of_torch(grad.attr("_indices")());
  }
  Tensor indices = Tensor::empty(Shape{wide.numel()}, DType::kInt32);
  const std::int64_t* from = wide.data<std::int64_t>();
  std::int32_t* to = indices.data<std::int32_t>();
  for (std::int64_t i = 0; i < wide.numel(); ++i) {
    if (from[i] < 0 || from[i] > std::numeric_limits<std::int32_t>::max())
      fail("sparse gradient", "row index ", from[i], " at position ", i, " is outside [0, 2^31)");
    to[i] = std::int32_t(from[i]);
  }
  return {indices, view_of_torch(grad.attr("_values")().attr("contiguous")())};
}

// How a kept view is known to still be the tensor's: the same object (a parameter's value also
// at the same address: `p.data = ...` keeps the object), or the same memory (a gradient: torch
// checks that it has the parameter's shape and dtype).
enum class Reuse { kSameObject, kSameObjectAndAddress, kSameAddress };

struct HeldView {
  py::object tensor;  // the torch tensor viewed (kept, so its identity is not reused)
  Tensor view;

  const Tensor& of(py::handle t, Reuse reuse) {
    bool kept = view.defined();
    if (kept && reuse != Reuse::kSameAddress) kept = tensor.ptr() == t.ptr();
    if (kept && reuse != Reuse::kSameObject)
      kept = data_address(t) == reinterpret_cast<std::uintptr_t>(view.raw_data());
    if (!kept) {
      view = view_of_torch(t);
      tensor = py::reinterpret_borrow<py::object>(t);
    }
    return view;
  }
};

// An optimizer's rule over torch tensors (weft.torch.Adam's step): one call for all of a step's
// tensors, the updates run without the GIL; views kept as HeldView says.
class TorchUpdate {
 public:
  void step(const train::Optimizer& rule, double learning_rate, const py::sequence& params,
            const py::sequence& grads, const std::vector<std::int64_t>& steps,
            const py::sequence& slots);

 private:
  struct Entry {
    HeldView value, grad;
    std::vector<HeldView> slots;
  };
  struct Update {
    Tensor value, grad, indices;
    std::vector<Tensor> slots;
    std::int64_t step = 0;
  };
  Update prepare(py::handle param, py::handle grad, std::int64_t step, py::handle slots);
  // Keyed by the parameter object, which the entry keeps alive (so the key is never reused).
  std::unordered_map<PyObject*, Entry> entries_;
};

TorchUpdate::Update TorchUpdate::prepare(py::handle param, py::handle grad, std::int64_t step,
                                         py::handle slots) {
  Entry& entry = entries_[param.ptr()];
  Update u;
  u.value = entry.value.of(param, Reuse::kSameObjectAndAddress);
  if (grad.attr("is_sparse").cast<bool>()) {
    std::tie(u.indices, u.grad) = distinct_rows(py::reinterpret_borrow<py::object>(grad));
  } else {
    u.grad = entry.grad.of(grad.attr("contiguous")(), Reuse::kSameAddress);
  }
  const py::sequence slot_tensors = py::reinterpret_borrow<py::sequence>(slots);
  entry.slots.resize(slot_tensors.size());
  for (std::size_t k = 0; k < slot_tensors.size(); ++k)
    u.slots.push_back(entry.slots[k].of(slot_tensors[k], Reuse::kSameObject));
  u.step = step;
  return u;
}

void TorchUpdate::step(const train::Optimizer& rule, double learning_rate,
                       const py::sequence& params, const py::sequence& grads,
                       const std::vector<std::int64_t>& steps, const py::sequence& slots) {
  const std::size_t n = params.size();
  if (grads.size() != n || steps.size() != n || slots.size() != n)
    fail("weft.torch.Adam", n, " parameters but ", grads.size(), " gradients, ", steps.size(),
         " step counts and ", slots.size(), " slot lists");
  std::vector<Update> updates;
  updates.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    try {
      updates.push_back(prepare(params[i], grads[i], steps[i], slots[i]));
    } catch (const weft::Error& e) {
      fail("weft.torch.Adam", "parameter ",
           py::str(py::list(params[i].attr("shape"))).cast<std::string>(), ": ", e.what());
    }
  }
  py::gil_scoped_release nogil;
  for (Update& u : updates) {
    try {
      rule.update_tensor(learning_rate, u.step, u.value, u.grad, u.indices, u.slots);
    } catch (const weft::Error& e) {
      fail("weft.torch.Adam", "parameter ", u.value.shape().to_string(), ": ", e.what());
    }
  }
}

}  // namespace

void init_torch_glue(py::module_& m) {
  py::module_ glue = m.def_submodule(
      "torch_glue", "weft.torch's per-step work in one call each (python/weft/torch.py).");
  glue.def("step_outputs", &step_outputs, py::arg("result"), py::arg("metrics"),
           "(Vars, value capsules, int64 label capsules) of a batch's outputs, then metrics.");
  glue.def("step_backward", &step_backward, py::arg("tape"), py::arg("outputs"), py::arg("grads"),
           py::arg("parameters"), py::arg("torch_grads"),
           "Weft's backward from torch's output gradients; per parameter: None, a dense "
           "gradient's capsule, or a row-sparse one's (int64 indices [1, k], rows) capsules.");
  py::class_<TorchUpdate>(glue, "TorchUpdate",
                          "An optimizer's rule over torch tensors, all of a step's in one call.")
      .def(py::init<>())
      .def("step", &TorchUpdate::step, py::arg("rule"), py::arg("learning_rate"), py::arg("params"),
           py::arg("grads"), py::arg("steps"), py::arg("slots"));
}

}  // namespace weft::python
