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

__all__ = ["call", "Function", "op", "fold", "Blocks", "parameters_of", "Fold", "Unfold",
           "WeftStep", "Adam", "WeftDropout"]

from ._torch_bodies import (  # noqa: F401  (weft.torch's public names)
    Function,
    WeftStep,
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
            self.outputs = [result.output(k) for k in range(result.num_outputs)]
            for name in self.metrics:
                rows = result.metric(name)
                self.outputs.append(rows.values)
                self.labels[name] = _torch.from_dlpack(rows.label_tensor()).long()
        return [_torch.from_dlpack(v.value) for v in self.outputs]

    def backward(self, grads):
        """Weft's gradients land in its parameters' own buffers, and torch's `.grad` becomes a
        view of that buffer (no copy): where `.grad` is already that view (not zeroed, or
        zeroed in place), Weft accumulates into it and torch is handed nothing to add. A table
        with row-sparse gradients (sparse_grad: Embedding(..., sparse_gradient=True)) hands
        torch a sparse COO gradient of the rows the batch used, as nn.Embedding(sparse=True)."""
        in_place = []
        for p, view in zip(self.weft_params, self.torch_params):
            g = None if p.sparse_grad else view.grad
            in_place.append(g is not None and p.grad is not None and
                            g.data_ptr() == _torch.from_dlpack(p.grad).data_ptr())
            if not in_place[-1]:
                p.zero_grad()
        backward_outputs(self.tape, self.outputs, grads)
        out = []
        for p, accumulated in zip(self.weft_params, in_place):
            if p.sparse_grad:
                out.append(_sparse_torch_grad(p))
                continue
            g = None if accumulated else p.grad
            out.append(None if g is None else _torch.from_dlpack(g))
        self.release()
        return out

    def release(self):
        """The tape goes back to the folder's pool, cleared (the batch's values, the torch
        bodies' graphs: gone; the outputs handed to torch keep their own memory)."""
        self.tape.clear()
        self.tapes.append(self.tape)


def _sparse_torch_grad(param):
    """A row-sparse Weft gradient as a coalesced torch sparse COO tensor of the table's shape.
    The rows are copied: Weft's may live in the tape's buffers, which the next step reuses
    while torch may still hold this gradient (accumulation over several backward passes)."""
    rows = param.grad_rows()
    if rows is None:
        raise _weft.Error(
            f"[weft.torch] parameter '{param.name}' asks for row-sparse gradients (sparse_grad, "
            "Embedding(..., sparse_gradient=True)), but this step reached it through an op other "
            "than a row lookup, so its gradient is dense; use the table only through lookups "
            "(Embedding, gather_rows), or set its sparse_grad to False (and use a dense optimizer)")
    indices, values = rows
    grad = _torch.sparse_coo_tensor(_torch.from_dlpack(indices).long().unsqueeze(0),
                                    _torch.from_dlpack(values).clone(), tuple(param.shape),
                                    **_UNCHECKED)
    return grad._coalesced_(True)  # Weft's rows are coalesced: sorted, distinct indices


# Weft's rows satisfy the sparse invariants; PyTorch 2 warns unless told whether to check them.
_UNCHECKED = ({"check_invariants": False}
              if "check_invariants" in (_torch.sparse_coo_tensor.__doc__ or "") else {})


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

