"""weft.torch.Adam: a torch optimizer whose step is Weft's fused Adam kernel (one pass over each
tensor instead of torch's several), taking dense gradients and sparse COO ones (a Weft table with
row-sparse gradients, nn.Embedding(sparse=True)) in one optimizer, the sparse ones updated lazily
as `weft train --sparse-updates lazy` updates them. Users import it from ``weft.torch``.
"""

import torch as _torch

from . import _weft


class Adam(_torch.optim.Optimizer):
    """Adam (Kingma & Ba) over torch tensors, each update one fused Weft pass.

    Dense gradients get torch.optim.Adam's rule (the same formula: eps added after the bias
    correction of sqrt(v); weight_decay is L2, added to the gradient). A sparse COO gradient gets
    the lazy rule of `weft train --sparse-updates lazy`: only its rows move, their moments decay
    only then, weight decay reaches only them, and the bias correction counts this parameter's
    steps (torch.optim.SparseAdam's rule, but with Adam's placement of eps). Parameters are
    float32 CPU tensors, contiguous; the state ("step", an int, and the torch tensors "exp_avg",
    "exp_avg_sq") is saved and loaded by state_dict as torch's Adam's is."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        if not 0.0 <= lr < float("inf"):
            raise _weft.Error(f"[weft.torch.Adam] lr must be finite and >= 0, got {lr}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay))
        self._rules = {}  # (beta1, beta2, eps, weight_decay) -> a Weft optimizer (its rule)
        self._views = {}  # (id(tensor's owner), role) -> (key, tensor, Weft view)
        for group in self.param_groups:
            self._rule(group)  # a bad beta or eps fails here, not at the first step
            for p in group["params"]:
                _check_parameter(p)

    def _rule(self, group):
        beta1, beta2 = group["betas"]
        key = (beta1, beta2, group["eps"], group["weight_decay"])
        if key not in self._rules:
            try:
                spec = _weft.train.OptimizerSpec(kind="adam", beta1=beta1, beta2=beta2,
                                                 epsilon=group["eps"],
                                                 weight_decay=group["weight_decay"])
            except _weft.Error as e:
                raise _weft.Error(f"[weft.torch.Adam] {e}") from None
            self._rules[key] = _weft.train.make_optimizer(spec, [])
        return self._rules[key]

    def _view(self, owner, role, tensor):
        """Weft's view of a torch tensor, kept while the tensor (same memory, shape) is the
        same: a parameter's, its moments' and a gradient that Weft's own buffer backs."""
        entry = self._views.get((id(owner), role))
        if entry is not None and entry[1] is tensor:
            return entry[2]
        key = (tensor.data_ptr(), tuple(tensor.shape))
        if entry is None or entry[0] != key:
            entry = (key, tensor, _weft.from_dlpack(tensor.detach()))
        else:  # the same memory under another tensor (Weft's gradient buffer, a new view)
            entry = (key, tensor, entry[2])
        self._views[(id(owner), role)] = entry
        return entry[2]

    @_torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with _torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            rule = self._rule(group)
            for p in group["params"]:
                if p.grad is not None:
                    self._update(rule, group["lr"], p)
        return loss

    def _update(self, rule, lr, p):
        state = self.state[p]
        if not state:
            state["step"] = 0
            state["exp_avg"] = _torch.zeros_like(p, memory_format=_torch.contiguous_format)
            state["exp_avg_sq"] = _torch.zeros_like(p, memory_format=_torch.contiguous_format)
        state["step"] += 1
        slots = [self._view(p, "m", state["exp_avg"]), self._view(p, "v", state["exp_avg_sq"])]
        grad = p.grad
        if grad.is_sparse:
            indices, rows = _distinct_rows(grad)
        else:
            indices, rows = None, self._view(p, "grad", grad.contiguous())
        try:
            rule.update_tensor(lr, int(state["step"]), self._view(p, "value", p), rows, indices, slots)
        except _weft.Error as e:
            raise _weft.Error(f"[weft.torch.Adam] parameter {list(p.shape)}: {e}") from None


def _distinct_rows(grad):
    """Weft's (int32 indices, rows) of a sparse COO gradient, each row once (a row given twice
    is one row, its gradients summed). torch's gradient accumulation drops the coalesced flag of
    weft.torch's gradients, whose indices are distinct and sorted: those are taken as they are
    (torch's coalesce() would sort and copy them again)."""
    indices = grad._indices()[0]
    if not grad.is_coalesced() and not (indices.numel() < 2 or
                                        bool((indices[1:] > indices[:-1]).all())):
        grad = grad.coalesce()
        indices = grad._indices()[0]
    return (_weft.from_dlpack(indices.to(_torch.int32)),
            _weft.from_dlpack(grad._values().contiguous()))


def _check_parameter(p):
    if p.dtype != _torch.float32 or p.device.type != "cpu" or not p.is_contiguous():
        raise _weft.Error(f"[weft.torch.Adam] parameters must be contiguous float32 CPU tensors, "
                          f"got {p.dtype} {list(p.shape)} on {p.device}"
                          f"{'' if p.is_contiguous() else ' (not contiguous)'}")
