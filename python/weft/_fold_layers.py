"""TensorFlow Fold's layers (td.FC, td.Embedding, td.ScopedLayer) on Weft: callables on batched
Vars that create their Parameters on first call, when the input size is known, as TF Fold's did
with variables. `td.Function(layer)` (or `layer` itself in `>>`) makes the block; this module
builds on the block combinators (_blocks), which do not import it. Parameters live with their
layer (layer.parameters()); td.trainable_parameters() lists those of every layer alive, for an
optimizer (TF Fold's tf.trainable_variables())."""

import collections
import itertools
import weakref

import numpy as np

from . import _blocks
from . import _weft
from . import _fold_types as _types

_live_layers = weakref.WeakSet()
_seeds = itertools.count(1)
_names_taken = collections.Counter()


def _unique_name(name):
    """TF's uniquified scope names: 'FC', then 'FC_1', 'FC_2', ... (Parameters are named
    '<layer>/<variable>', and an optimizer needs the names distinct)."""
    count = _names_taken[name]
    _names_taken[name] += 1
    return name if count == 0 else "%s_%d" % (name, count)


def trainable_parameters():
    """The trainable Parameters of every layer alive, in creation order."""
    layers = sorted(_live_layers, key=lambda layer: layer._serial)
    return [p for layer in layers for p in layer.parameters() if p.trainable]


class Layer(_blocks.ConvertibleToBlock):
    """A callable on batched Vars owning Parameters; input_type / output_type as TF Fold's. Where a
    block is expected (`>>`, Record, ...) it stands for td.Function(layer)."""

    def __init__(self, input_type=None, output_type=None, name_or_scope=None):
        self.input_type = None if input_type is None else _types.convert_to_type(input_type)
        self.output_type = None if output_type is None else _types.convert_to_type(output_type)
        self.name = _unique_name(name_or_scope if isinstance(name_or_scope, str)
                                 else type(self).__name__)
        self._serial = next(_seeds)
        self._rng = np.random.default_rng(self._serial)
        self._parameters = {}
        _live_layers.add(self)

    def parameters(self):
        return list(self._parameters.values())

    def to_block(self):
        return _blocks.Function(self)

    def get_variable(self, name, shape, initializer=None, trainable=True):
        """The Parameter `name` of this layer, created on first request (TF's get_variable)."""
        if name not in self._parameters:
            shape = tuple(int(d) for d in shape)
            if initializer is None:
                value = self._rng.uniform(-0.05, 0.05, shape)
            elif callable(initializer):
                value = initializer(shape, self._rng)
            else:
                value = np.broadcast_to(np.asarray(initializer), shape)
            # A variable owns its value (TF copies the initializer's): a writable copy, never a
            # view of the caller's array or of a read-only broadcast.
            self._parameters[name] = _weft.Parameter(
                "%s/%s" % (self.name, name), np.array(value, np.float32, order="C"), trainable)
        return self._parameters[name]


def uniform_unit_scaling(factor):
    """TF's uniform_unit_scaling initializer: U(-a, a) with a = factor * sqrt(3 / fan_in)."""
    def init(shape, rng):
        limit = factor * np.sqrt(3.0 / shape[0])
        return rng.uniform(-limit, limit, shape)
    return init


def _scaling_for(activation):
    name = getattr(activation, "__name__", "")
    return {"relu": 1.43, "relu6": 1.43, "tanh": 1.15, "": 1.0}.get(name, None)


def _keep(x, keep_prob):
    if keep_prob is None or keep_prob >= 1.0:
        return x
    return _weft.nn.mode_dropout(x, 1.0 - keep_prob)


class FC(Layer):
    """y = activation(dropout(x) W + b), then dropout: [n] float32 -> [num_units_out]. TF
    Fold's initializer by default (uniform unit scaling 1.43 for relu, 1.15 tanh, 1.0 linear)."""

    def __init__(self, num_units_out, activation=_weft.relu, initializer=None,
                 input_keep_prob=None, output_keep_prob=None, normalization_fn=None,
                 weight_norm=False, name=None):
        super().__init__(output_type=_types.TensorType([num_units_out]), name_or_scope=name)
        self.num_units_out = num_units_out
        self.activation = activation
        self.initializer = initializer
        self.input_keep_prob, self.output_keep_prob = input_keep_prob, output_keep_prob
        self.normalization_fn = normalization_fn

    def __call__(self, x):
        n_in = x.shape[-1]
        if self.input_type is None:
            self.input_type = _types.TensorType([n_in])
        init = self.initializer
        if init is None:
            factor = _scaling_for(self.activation)
            init = uniform_unit_scaling(factor) if factor else (
                lambda shape, rng: np.clip(rng.normal(0, 0.01, shape), -0.02, 0.02))
        weights = self.get_variable("weights", (n_in, self.num_units_out), init)
        bias = self.get_variable("bias", (self.num_units_out,), 0.0)
        y = _weft.linear(_keep(x, self.input_keep_prob), weights, bias)
        if self.normalization_fn is not None:
            y = self.normalization_fn(y)
        if self.activation is not None:
            y = self.activation(y)
        return _keep(y, self.output_keep_prob)


class Embedding(Layer):
    """int scalar -> [num_units_out]: row abs(x) mod num_buckets of a learned table (mod_inputs;
    without it an id out of range is an error). An array initializer fixes the table."""

    def __init__(self, num_buckets, num_units_out, initializer=None, name=None, trainable=True,
                 mod_inputs=True):
        super().__init__(_types.TensorType([], "int32"), _types.TensorType([num_units_out]),
                         name)
        self.num_buckets, self.num_units_out = num_buckets, num_units_out
        self.initializer, self.trainable, self.mod_inputs = initializer, trainable, mod_inputs
        if isinstance(initializer, np.ndarray) and initializer.shape != (num_buckets,
                                                                         num_units_out):
            raise ValueError("initializer shape %s is not (num_buckets, num_units_out) = %s" %
                             (initializer.shape, (num_buckets, num_units_out)))

    def __call__(self, ids):
        init = self.initializer
        if init is None:
            limit = np.sqrt(6.0 / (self.num_buckets + self.num_units_out))
            init = lambda shape, rng: rng.uniform(-limit, limit, shape)  # noqa: E731
        table = self.get_variable("weights", (self.num_buckets, self.num_units_out), init,
                                  self.trainable)
        rows = np.asarray(ids.value if hasattr(ids, "value") else ids).astype(np.int64)
        if self.mod_inputs:
            rows = np.abs(rows) % self.num_buckets
        return _weft.embedding_lookup(table, _weft.tensor(rows.astype(np.int32)))


class ScopedLayer(Layer):
    """A Python function with parameters as a layer: layer_fn(*args, scope=layer) may call
    scope.get_variable(name, shape, initializer) and gets the same Parameters on every call
    (TF Fold's ScopedLayer passed a reused variable scope). A Layer passes through."""

    def __init__(self, layer_fn, name_or_scope=None):
        super().__init__(getattr(layer_fn, "input_type", None),
                         getattr(layer_fn, "output_type", None),
                         name_or_scope or getattr(layer_fn, "__name__", "ScopedLayer"))
        self.layer_fn = layer_fn

    def __call__(self, *args):
        if isinstance(self.layer_fn, Layer):
            return self.layer_fn(*args)
        return self.layer_fn(*args, scope=self)

    def parameters(self):
        inner = self.layer_fn.parameters() if isinstance(self.layer_fn, Layer) else []
        return inner + super().parameters()
