"""Weft from Python: dynamic batching of differently shaped inputs (TensorFlow Fold, natively).

The hot path is C++ (the extension module ``weft._weft``): tensors, autodiff, the loom, blocks,
layers, optimizers, the Trainer and the registered models. This package re-exports it and adds
the few Python conveniences (context managers).

    import weft
    from weft import blocks as td          # TF Fold users' habit
    x = weft.from_numpy(array)             # no copy; np.asarray(x) is a view again
    with weft.Tape() as tape: ...          # ops record on the current tape
    model = weft.models.create("sentiment", hidden=150)
    model.fit(epochs=2); model.predict(["(3 (2 a) (4 (3 lovely) (2 film)))"])
"""

import contextlib as _contextlib
import sys as _sys

from . import _weft
from ._weft import (  # noqa: F401  (the public API)
    Error,
    Parameter,
    Rng,
    Tape,
    Tensor,
    TypeError,
    Var,
    __version__,
    batch_invariant,
    build_commit,
    cast,
    current_tape,
    denormal_mode,
    equal,
    from_dlpack,
    from_numpy,
    greater,
    greater_equal,
    less,
    less_equal,
    not_equal,
    op_names,
    set_batch_invariant,
    set_denormal_mode,
    tensor,
    zeros,
)
from ._weft import models, nn, train  # noqa: F401

# Every op of ops.def as weft.<name>.
for _name in _weft.op_names():
    globals()[_name] = getattr(_weft, _name)
del _name

__all__ = ["Error", "TypeError", "Tensor", "Parameter", "Var", "Tape", "Rng", "tensor",
           "from_numpy", "from_dlpack", "zeros", "current_tape", "op_names", "blocks", "flow", "nn",
           "train", "models", "forward_mode", "cast", "equal", "not_equal", "less", "less_equal",
           "greater", "greater_equal", "set_denormal_mode", "denormal_mode",
           "build_commit"] + list(_weft.op_names())

# `import weft.nn` and `from weft.nn import FC` work like ordinary subpackages (weft.blocks is
# one: TF Fold's spellings over the engine's blocks).
for _sub in ("nn", "train", "models"):
    _sys.modules[__name__ + "." + _sub] = getattr(_weft, _sub)
del _sub


@_contextlib.contextmanager
def _name_scope(self, prefix):
    """`with store.scope("tree_lstm"):` prefixes the names of parameters created inside."""
    self._push_scope(prefix)
    try:
        yield self
    finally:
        self._pop_scope()


nn.ParameterStore.scope = _name_scope


@_contextlib.contextmanager
def forward_mode(training, rng=None):
    """`with weft.forward_mode(training=True, rng=weft.Rng(1)):` turns dropout on in the layers
    (nn.FC, the cells) run inside, on this thread; outside, layers run in inference mode."""
    nn._push_mode(training, rng)
    try:
        yield
    finally:
        nn._pop_mode()


nn.forward_mode = forward_mode

from . import blocks  # noqa: E402,F401  (after nn: its layers use weft.nn)
from . import flow  # noqa: E402,F401
