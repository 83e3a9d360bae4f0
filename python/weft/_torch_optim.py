"""weft.torch.Adam: a torch optimizer whose step is Weft's fused Adam kernel (one pass over each
tensor instead of torch's several), taking dense gradients and sparse COO ones (a Weft table with
row-sparse gradients, nn.Embedding(sparse=True)) in one optimizer, the sparse ones updated lazily
as `weft train --sparse-updates lazy` updates them. Users import it from ``weft.torch``.
"""

import torch as _torch

from . import _weft


class Adam(_torch.optim.Optimizer):
    """Adam (Kingma & Ba) over torch tensors: one Weft call a step updates them all, each
    tensor by one fused pass.

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
        self._tensors = _weft.torch_glue.TorchUpdate()  # the Weft views of the tensors
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

    @_torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with _torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if params:
                self._update(group, params)
        return loss

    def _update(self, group, params):
        """One Weft call updates all of the group's tensors (torch_glue.TorchUpdate: the views
        of values and moments kept between steps, the kernels run without the GIL)."""
        states = [self.state[p] for p in params]
        for p, state in zip(params, states):
            if not state:
                state["step"] = 0
                state["exp_avg"] = _torch.zeros_like(p, memory_format=_torch.contiguous_format)
                state["exp_avg_sq"] = _torch.zeros_like(p, memory_format=_torch.contiguous_format)
            state["step"] += 1
        self._tensors.step(self._rule(group), group["lr"], params, [p.grad for p in params],
                           [int(s["step"]) for s in states],
                           [(s["exp_avg"], s["exp_avg_sq"]) for s in states])


def _check_parameter(p):
    if p.dtype != _torch.float32 or p.device.type != "cpu" or not p.is_contiguous():
        raise _weft.Error(f"[weft.torch.Adam] parameters must be contiguous float32 CPU tensors, "
                          f"got {p.dtype} {list(p.shape)} on {p.device}"
                          f"{'' if p.is_contiguous() else ' (not contiguous)'}")
