"""Torch bodies in Weft, the part of ``weft.torch`` the torchfold API (weft/_torchfold.py) runs
on: ``call``, ``Function``, ``op`` (any torch callable or ``nn.Module`` once per batched call, on
torch tensors viewing Weft's values; Weft's backward runs torch autograd), ``parameters_of``,
and ``WeftStep`` / ``backward_outputs`` (a Weft tape as one torch autograd step). Users import
them from ``weft.torch``.
"""

import sys as _sys
import traceback as _traceback

import torch as _torch

from . import _weft
from . import blocks as _td
from . import nn as _wnn


# ---- torch bodies in Weft -----------------------------------------------------------------------


def _body_name(fn, name):
    return name or getattr(fn, "__name__", None) or type(fn).__name__


def _error_text(error):
    """"ZeroDivisionError: division by zero (at cell.py:12, in forward)"."""
    text = type(error).__name__ + (f": {error}" if str(error) else "")
    frames = _traceback.extract_tb(error.__traceback__)
    if frames:
        text += f" (at {frames[-1].filename}:{frames[-1].lineno}, in {frames[-1].name})"
    return text


def _raise_if_interrupted(error):
    """Ctrl-C landing in a Python hook that torch calls from C++ (a saved-tensor hook of a body's
    forward, or of torch's backward) comes out of torch as RuntimeError("KeyboardInterrupt: ..."):
    raised again as the KeyboardInterrupt it was, so it stops the program rather than failing
    one body."""
    if isinstance(error, RuntimeError) and str(error).startswith("KeyboardInterrupt"):
        raise KeyboardInterrupt from error


def _flatten(value, leaf_type, out):
    """The leaves of nested tuples / lists in order, and the nesting (None for a leaf)."""
    if isinstance(value, (tuple, list)):
        return tuple(_flatten(v, leaf_type, out) for v in value)
    out.append(value)
    return None


def _unflatten(structure, leaves):
    """The nesting of _flatten rebuilt over `leaves`. (No nested recursive function: one would be
    a reference cycle holding the leaves, a body's inputs among them, until the collector ran.)"""
    return _build(structure, iter(leaves))


def _build(structure, leaves):
    return next(leaves) if structure is None else tuple(_build(s, leaves) for s in structure)


_from_capsule = _torch.utils.dlpack.from_dlpack


def _to_torch(var, differentiable):
    t = _from_capsule(var.value.__dlpack__())  # a view, no copy (torch.from_dlpack, less Python)
    if differentiable and var.requires_grad and t.is_floating_point():
        t.requires_grad_(True)  # a fresh leaf over Weft's memory: its .grad is the input's
    return t


def _to_weft(t):
    """A Weft tensor over a torch tensor's memory (contiguous: copied only where it is not)."""
    return _weft.from_dlpack(_torch.utils.dlpack.to_dlpack(t.detach().contiguous()))



def _check_output(name, k, out, batch, expected):
    if not isinstance(out, _torch.Tensor):
        raise _weft.Error(f"[torch] body '{name}': output {k} is {type(out).__name__}, not a "
                          "torch.Tensor (return a tensor or a tuple of tensors)")
    if out.dtype != _torch.float32:
        raise _weft.Error(f"[torch] body '{name}': output {k} is {out.dtype} "
                          f"{list(out.shape)}; Weft's differentiable values are torch.float32")
    if out.dim() == 0 or (batch is not None and out.shape[0] != batch):
        raise _weft.Error(f"[torch] body '{name}': output {k} has shape {list(out.shape)}; it "
                          f"must keep the batch axis first ({batch} rows, one per call)")
    if expected is not None and list(out.shape[1:]) != list(expected):
        raise _weft.Error(f"[torch] body '{name}': output {k} has shape {list(out.shape)}, but "
                          f"the operation declares [{batch}, {', '.join(map(str, expected))}]")


def _save_detached(t):
    """torch autograd saves detached aliases inside bodies: they share the memory and version
    counter, but hold no reference to the body's inputs (an embedding saves its indices; recent
    PyTorch would hold the input's Python object) nor to outputs' graphs (no cycle)."""
    return t.detach()


def _unpack_saved(t):
    return t


def _references_added(t, use):
    """How many references to t's Python object torch keeps while the result of use(t) lives."""
    before = _sys.getrefcount(t)
    result = use(t)  # noqa: F841  (its graph must live while the references are counted)
    return _sys.getrefcount(t) - before


# Saving a tensor for backward holds its Python object in recent PyTorch (2.15), not in 1.13 and
# 2.2 (they keep the C++ tensor): only there do bodies run under the detached-alias hooks, a
# Python call per saved tensor (forward and backward) that older torch does not need.
_weight = _torch.ones(1, requires_grad=True)
_SAVED_ALIASES = (_torch.autograd.graph.saved_tensors_hooks(_save_detached, _unpack_saved)
                  if _references_added(_torch.ones(1), lambda x: _weight * x) else None)
del _weight

# The references torch's autograd graph itself holds to a leaf it accumulates into: 1 from
# PyTorch 2 on (its AccumulateGrad node keeps the Python object), 0 in 1.13.
_GRAPH_REFERENCES = _references_added(_torch.zeros(1, requires_grad=True), lambda leaf: leaf * 2)


def _check_nothing_kept(name, inputs, references, outputs):
    """A body holding on to an input beyond its call (a view of Weft's memory for that call: kept,
    it pins the step's memory after the tape is cleared) is an error; returning it (or a view of
    it) is fine. Direct references are seen (a kept view is not)."""
    for k in range(len(inputs)):  # counted as references[] was: no other local names them
        returned = sum(o is inputs[k] or getattr(o, "_base", None) is inputs[k] for o in outputs)
        if inputs[k].requires_grad:
            returned += _GRAPH_REFERENCES
        if _sys.getrefcount(inputs[k]) > references[k] + returned:
            raise _weft.Error(f"[torch] body '{name}' kept input {k} {list(inputs[k].shape)} "
                              "after the call; inputs view Weft's memory for the call only "
                              "(keep t.clone() instead)")


def _engine_backward(outputs, grads):
    """torch.autograd.backward(outputs, grads, retain_graph=True) without its Python front (grad
    normalisation and checks, ~5 us a call, one call per body and batch): `grads` are Weft's
    gradients of `outputs`, float32 tensors of their shapes (the C++ engine checks shapes too).
    PyTorch 2 goes through torch.autograd.graph._engine_run_backward (it keeps the context that
    compiled backward passes need), 1.13 straight to the engine."""
    return _ENGINE_RUN(outputs, grads, True, False, (), allow_unreachable=True,
                       accumulate_grad=True)


def _public_backward(outputs, grads):
    _torch.autograd.backward(list(outputs), list(grads), retain_graph=True)


_ENGINE_RUN = getattr(getattr(_torch.autograd, "graph", None), "_engine_run_backward", None) or \
    getattr(getattr(_torch.autograd.Variable, "_execution_engine", None), "run_backward", None)
_run_backward = _engine_backward if _ENGINE_RUN is not None else _public_backward


def _backward(inputs, outputs):
    """The Weft-side backward of one torch call: torch autograd from the outputs' gradients;
    parameters accumulate their .grad, the inputs' gradients go back to Weft."""

    def run(grads):
        pairs = [(o, _from_capsule(g.__dlpack__())) for o, g in zip(outputs, grads)
                 if g is not None and o.requires_grad]
        try:
            if pairs:
                _run_backward(tuple(o for o, _ in pairs), tuple(g for _, g in pairs))
        except RuntimeError as error:
            _raise_if_interrupted(error)
            raise
        result = []
        for t in inputs:
            g = t.grad if t.requires_grad else None
            result.append(None if g is None else _to_weft(g))
            t.grad = None
        return result

    return run


def _run_body(fn, args, differentiable):
    """fn(*args) with torch autograd recording exactly when Weft's tape does (the grad mode
    switched only where it differs), under the detached-alias hooks where torch needs them."""
    if _torch.is_grad_enabled() != differentiable:
        with _torch.enable_grad() if differentiable else _torch.no_grad():
            return _run_body(fn, args, differentiable)
    if differentiable and _SAVED_ALIASES is not None:
        with _SAVED_ALIASES:
            return fn(*args)
    return fn(*args)


_FROM_INPUTS = object()


def call(fn, *args, name=None, outputs=None, batch_rows=_FROM_INPUTS):
    """Runs the torch callable `fn` on Weft Vars (nested tuples of Vars allowed): once, on torch
    tensors sharing the Vars' memory, recording autograd when Weft's tape records gradients.
    Returns the result's structure with Vars in place of tensors. `outputs`: the per-row shapes
    the caller declares (checked); every output is float32 with `batch_rows` rows (by default
    the first input's; None: any)."""
    name = _body_name(fn, name)
    flat_vars = []
    structure = _flatten(args, _weft.Var, flat_vars)
    differentiable = _weft._records_grad(flat_vars)
    inputs = [_to_torch(v, differentiable) for v in flat_vars]
    references = [_sys.getrefcount(inputs[k]) for k in range(len(inputs))]
    try:
        result = _run_body(fn, _unflatten(structure, inputs), differentiable)
    except (KeyboardInterrupt, _weft.Error):
        raise
    except Exception as error:
        _raise_if_interrupted(error)
        raise _weft.Error(f"[torch] body '{name}' raised {_error_text(error)}") from error
    flat_out = []
    out_structure = _flatten(result, _torch.Tensor, flat_out)
    del result
    _check_nothing_kept(name, inputs, references, flat_out)
    batch = batch_rows
    if batch is _FROM_INPUTS:
        batch = inputs[0].shape[0] if inputs and inputs[0].dim() > 0 else None
    if outputs is not None and len(outputs) != len(flat_out):
        raise _weft.Error(f"[torch] body '{name}' returned {len(flat_out)} tensors; the "
                          f"operation declares {len(outputs)}")
    for k, out in enumerate(flat_out):
        _check_output(name, k, out, batch, None if outputs is None else outputs[k])
    values = [_to_weft(o) for o in flat_out]
    needs_backward = differentiable and any(o.requires_grad for o in flat_out)
    backward = _backward(inputs, flat_out) if needs_backward else None
    recorded = _weft._record_op(f"body '{name}'", flat_vars, values, backward)
    return _unflatten(out_structure, recorded)


def _declared_shapes(output):
    """Per-row shapes of a blocks Type (a tensor, or a tuple of tensors), or None."""
    if output is None:
        return None
    if output.kind == "tuple":
        flat = []
        for item in output.items:
            flat.extend(_declared_shapes(item) or [None])
        return flat
    return [list(output.shape)] if output.kind == "tensor" else None


class Function(_td.Function):
    """A blocks Function whose body is a torch callable or nn.Module, batched like any other:
    ``Function(module)`` (types from composition, TF Fold's spelling) or ``Function(name, inputs,
    module, output=None)``. The module runs once per (depth, operation) on [B, ...] tensors."""

    def __init__(self, fn_or_name, *args, name=None, **kwargs):
        if isinstance(fn_or_name, str):  # Weft's spelling: name, inputs, body, output=None
            inputs, fn = args[0], args[1]
            output = args[2] if len(args) > 2 else kwargs.pop("output", None)
            shapes = _declared_shapes(output)

            def body(*flat):
                return call(fn, *flat, name=fn_or_name, outputs=shapes)

            super().__init__(fn_or_name, inputs, body, output, **kwargs)
        else:
            fn = fn_or_name
            label = _body_name(fn, name)

            def body(*nested):
                return call(fn, *nested, name=label)

            body.__name__ = label
            super().__init__(body, *args, name=label, **kwargs)
        self.module = fn


def op(loom, name, inputs, outputs, fn):
    """A loom operation (weft.flow.Loom) whose body is the torch callable `fn`: one call per
    batched step, [B, ...] tensors in and out (one per input / output type)."""

    def body(*vars):
        result = call(fn, *vars, name=name)
        return result if isinstance(result, tuple) else (result,)

    return loom.op(name, inputs, outputs, body)


# ---- Weft inside a torch model ------------------------------------------------------------------


def parameters_of(source):
    """Weft Parameters of a ParameterStore, a list of them, or None (none)."""
    if source is None:
        return []
    if isinstance(source, _wnn.ParameterStore):
        return list(source.trainable_parameters())
    params = list(source)
    for p in params:
        if not isinstance(p, _weft.Parameter):
            raise _weft.Error(f"[weft.torch] expected weft Parameters, got {type(p).__name__}")
    return params


def _torch_view(param):
    """An nn.Parameter over the Weft parameter's memory (the optimizer's updates are Weft's)."""
    return _torch.nn.Parameter(_torch.from_dlpack(param.value), requires_grad=param.trainable)


def backward_outputs(tape, outputs, grads):
    """Weft's backward from torch's gradients of `outputs` (Vars of `tape`): one pass, seeded
    through sum_k <output_k, grad_k> where several outputs have gradients."""
    _weft.torch_glue.step_backward(tape, outputs, grads, [], [])


class WeftStep(_torch.autograd.Function):
    """A Weft computation as one torch autograd step: `run.forward()` returns the outputs (torch
    tensors over Weft's memory), `run.backward(grads)` runs Weft's tape backward and returns the
    gradients of `inputs`. The anchor (a tensor requiring grad) makes the outputs differentiable
    when only torch bodies' parameters (updated in .grad directly) are trained."""

    @staticmethod
    def forward(ctx, run, anchor, *inputs):
        ctx.run = run
        ctx.set_materialize_grads(False)  # an output the loss does not use seeds no backward
        outputs = run.forward()
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    @staticmethod
    def backward(ctx, *grads):
        run, ctx.run = ctx.run, None
        if run is None:
            raise _weft.Error("[weft.torch] this Weft step was already backpropagated (a second "
                              "backward needs retain_graph, which Weft steps do not keep)")
        return (None, None, *run.backward(grads))
