"""Weft and PyTorch together, both ways, over shared memory (DLPack, no copies):

- torch bodies in Weft: ``weft.torch.Function(module)`` (a blocks Function), ``weft.torch.op(loom,
  name, inputs, outputs, module)`` (a loom / ``weft.flow`` operation) and ``weft.torch.call``
  run any torch callable or ``nn.Module`` once per batched call, on torch tensors viewing Weft's
  values; Weft's backward runs torch autograd, so input gradients return to Weft's tape and the
  module's parameters get their ``.grad`` (torch.optim, clipping and state_dict as usual).
- Weft inside a torch model: ``weft.torch.fold(block)(examples)`` is one differentiable torch
  step (a ``torch.autograd.Function``); ``weft.torch.Blocks(block, parameters)`` is the same as an
  ``nn.Module`` whose Weft-native parameters are ``nn.Parameter``s over Weft's memory.
- torchfold's API: ``weft.torch.Fold`` (weft/_torchfold.py): change the import, keep the code.
- ``weft.torch.Adam`` (weft/_torch_optim.py): torch's Adam as Weft's fused update, dense and
  sparse gradients in one optimizer (the sparse rows updated lazily).
"""

import torch as _torch

from . import _weft
from . import blocks as _td
from ._weft import torch_glue as _glue

__all__ = ["call", "Function", "op", "fold", "Blocks", "parameters_of", "Fold", "Unfold",
           "WeftStep", "Adam", "WeftDropout"]

from ._torch_bodies import (  # noqa: F401  (weft.torch's public names)
    Function,
    WeftStep,
    _from_capsule,
    _torch_view,
    backward_outputs,
    call,
    op,
    parameters_of,
)
from ._torchfold import Fold, Unfold  # noqa: F401  (torchfold's API, over the torch bodies)
from ._torch_optim import Adam  # noqa: F401  (Adam as one fused Weft pass, lazy on sparse rows)


class _Run:
    """One Weft batch behind a torch autograd step: its tape, outputs and parameters."""

    def __init__(self, compiler, examples, weft_params, metrics, tapes):
        self.compiler, self.examples, self.weft_params = compiler, examples, weft_params
        self.metrics = metrics
        self.tapes = tapes  # cleared tapes to reuse (their node blocks stay allocated)
        self.tape = tapes.pop() if tapes else _weft.Tape()
        self.outputs = []
        self.labels = {}

    def forward(self):
        """The block's outputs, then each metric's rows (its labels kept in self.labels)."""
        with self.tape:
            result = self.compiler.forward(self.examples, self.tape)
            self.outputs, values, labels = _glue.step_outputs(result, self.metrics)
        self.labels = dict(zip(self.metrics, map(_from_capsule, labels)))
        return [_from_capsule(v) for v in values]

    def backward(self, grads):
        """Weft's gradients land in its parameters' own buffers, and torch's `.grad` becomes a
        view of that buffer (no copy): where `.grad` is already that view (not zeroed, or
        zeroed in place), Weft accumulates into it and torch is handed nothing to add. A table
        with row-sparse gradients (sparse_grad: Embedding(..., sparse_gradient=True)) hands
        torch a sparse COO gradient of the rows the batch used, as nn.Embedding(sparse=True).
        One call does the zeroing, the backward and the gradients (torch_glue.cpp)."""
        out = _glue.step_backward(self.tape, self.outputs, grads, self.weft_params,
                                  [view.grad for view in self.torch_params])
        self.release()
        return [g if g is None else _sparse_coo(*g) if isinstance(g, tuple) else _from_capsule(g)
                for g in out]

    def release(self):
        """The tape goes back to the folder's pool, cleared (the batch's values, the torch
        bodies' graphs: gone; the outputs handed to torch keep their own memory)."""
        self.tape.clear()
        self.tapes.append(self.tape)


def _coalesced_coo_2(indices, rows, shape):
    return _torch.sparse_coo_tensor(indices, rows, shape, check_invariants=False,
                                    is_coalesced=True)


def _coalesced_coo_1(indices, rows, shape):
    return _torch._sparse_coo_tensor_unsafe(indices, rows, shape)._coalesced_(True)


def _sparse_coo(indices, rows, shape):
    """A row-sparse Weft gradient (capsules of int64 indices [1, k] and a copy of its rows: the
    tape's buffers are reused by the next step while torch may still hold this gradient) as a
    torch sparse COO tensor, flagged coalesced (Weft's indices are sorted and distinct), made
    without torch's checks of its indices (PyTorch 2 asks whether to check them, 1.13 has the
    unchecked constructor)."""
    return _COALESCED_COO(_from_capsule(indices), _from_capsule(rows), shape)


_COALESCED_COO = (_coalesced_coo_2 if "is_coalesced" in (_torch.sparse_coo_tensor.__doc__ or "")
                  else _coalesced_coo_1)


class _Folder:
    def __init__(self, block, parameters, metrics, compiler_options):
        if isinstance(block, _td.Compiler):
            self.compiler = block
        else:
            self.compiler = _td.Compiler(block, **compiler_options)
        self.weft_params = parameters_of(parameters)
        self.torch_params = [_torch_view(p) for p in self.weft_params]
        self.anchor = _torch.zeros((), requires_grad=True)
        self.metric_names = list(metrics)
        for name in self.metric_names:
            if name not in self.compiler.metric_names:
                raise _weft.Error(f"[weft.torch] fold: the block has no metric '{name}' (it has "
                                  f"{', '.join(self.compiler.metric_names) or 'none'})")
        self.metrics = {}
        self.tapes = []

    def __call__(self, examples):
        run = _Run(self.compiler, examples, self.weft_params, self.metric_names, self.tapes)
        run.torch_params = self.torch_params
        run.tape.grad_enabled = _torch.is_grad_enabled()  # torch.no_grad(): Weft records none
        out = WeftStep.apply(run, self.anchor, *self.torch_params)
        if not run.tape.grad_enabled:  # no backward will come: reuse the tape (and its blocks)
            run.release()
        if not self.metric_names:
            return out
        out = list(out) if isinstance(out, tuple) else [out]
        split = len(out) - len(self.metric_names)
        self.metrics = {name: (rows, run.labels[name])
                        for name, rows in zip(self.metric_names, out[split:])}
        return out[0] if split == 1 else tuple(out[:split])

    def metric(self, name):
        """(rows, labels) of a metric named in fold(..., metrics=[...]) for the last call: rows
        a torch tensor of the same differentiable step, labels a LongTensor."""
        if name not in self.metrics:
            raise _weft.Error(f"[weft.torch] fold: no metric '{name}' from the last call (ask for "
                              "it with fold(block, metrics=[...]) and call the fold first)")
        return self.metrics[name]


def fold(block, parameters=None, metrics=(), **compiler_options):
    """fold(block, parameters)(examples) -> torch.Tensor [len(examples), ...] (a tuple for several
    outputs): the block on the batch, as one differentiable torch step. `parameters` (a
    ParameterStore or a list of weft Parameters) get gradients through the step; torch bodies'
    modules get theirs in .grad directly. The returned object's `.torch_params` are the
    nn.Parameters viewing them; `metrics` names td.Metric blocks whose rows and labels
    `.metric(name)` gives after each call (rows differentiable, in the same step)."""
    return _Folder(block, parameters, metrics, compiler_options)


class Blocks(_torch.nn.Module):
    """A Weft block as an nn.Module: forward(examples) -> torch.Tensor. The Weft parameters given
    (a ParameterStore or list) are registered as nn.Parameters sharing Weft's memory, named as
    in Weft ("/" and "." become "_"), so a torch optimizer trains them and state_dict round-trips.
    Torch modules used as bodies belong to whatever nn.Module holds them (register them there,
    or pass them as `modules`)."""

    def __init__(self, block, parameters=None, modules=None, metrics=(), **compiler_options):
        super().__init__()
        self._folder = fold(block, parameters, metrics, **compiler_options)
        self.weft = _torch.nn.ParameterDict()
        for p, view in zip(self._folder.weft_params, self._folder.torch_params):
            self.weft[p.name.replace("/", "_").replace(".", "_")] = view
        self.bodies = _torch.nn.ModuleList(modules or [])

    def forward(self, examples):
        return self._folder(examples)

    def metric(self, name):
        """(rows, labels) of a metric of the last forward (see fold)."""
        return self._folder.metric(name)


class WeftDropout(_torch.nn.Module):
    """Dropout for torch bodies that draws its masks as Weft's own layers do: inside a training
    ``weft.forward_mode(True, rng)`` each call multiplies by the mask Weft's dropout would draw at
    that point (weft.nn.dropout_mask, from that Rng), so a model of torch bodies run at a seed
    draws the masks the same model of Weft's layers draws. In eval() or outside a training
    forward_mode it passes its input through."""

    def __init__(self, p):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise _weft.Error(f"[weft.torch] WeftDropout: p = {p} is outside [0, 1) (the "
                              "probability of zeroing an element)")
        self.p = p

    def forward(self, x):
        mask = _weft.nn.dropout_mask(list(x.shape), self.p) if self.training else None
        return x if mask is None else x * _torch.from_dlpack(mask)

