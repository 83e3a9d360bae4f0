"""TensorFlow Fold's compile-and-run flow on Weft: td.Compiler.create, build_feed_dict and the
loom inputs, output_tensors / metric_tensors, and td.Session, whose run(fetches, feed_dict)
stands for a TF session's (one forward pass of the fed examples, NumPy results). Built on the
block combinators (_blocks), which do not import it."""

import collections

import numpy as np

from . import _weft
from . import _fold_types as _types
from ._blocks import _engine_in_type, _engine_out_type, _engine_set_in  # (before TF Fold's types)
from ._blocks import convert_to_block
from ._fold_data import metric_rows, with_data

_cb = _weft.blocks


class _Fetch:
    """compiler.output_tensors[k] / metric_tensors[name]: what Session.run fetches (TF Fold's
    tensors; here the values one forward pass of the fed examples gives)."""

    def __init__(self, compiler, kind, key):
        self.compiler, self.kind, self.key = compiler, kind, key

    def value(self, result, tolist=False):
        if self.kind == "output":
            value = np.asarray(result.output(self.key).value)
            return value.tolist() if tolist else value
        return np.asarray(metric_rows(result.metric(self.key), tolist))

    def eval(self, feed_dict=None, session=None):
        return Session().run(self, feed_dict)

    def __repr__(self):
        return "<td.Compiler %s %r>" % (self.kind, self.key)


class _LoomInput:
    """compiler.loom_input_tensor: the feed_dict key whose value is the batch's examples."""

    def __init__(self, compiler):
        self.compiler = compiler

    def __repr__(self):
        return "<td.Compiler loom_input_tensor>"


class Compiler(_cb.Compiler):
    """Compiles a root block: TF Fold's Compiler.create(root) and build_feed_dict, and Weft's
    Compiler(root, threads=0, max_depth=0, ...) with weave / run / forward (faster: no feed)."""

    def __init__(self, root, threads=0, max_depth=0, strategy="by_depth",
                 examples_per_thread=256):
        super().__init__(convert_to_block(root), threads, max_depth or 0, strategy,
                         examples_per_thread)
        self.loom_input_tensor = _LoomInput(self)
        self.output_tensors = [_Fetch(self, "output", k) for k in range(len(self.output_types))]
        self.metric_tensors = collections.OrderedDict(
            (name, _Fetch(self, "metric", name)) for name in self.metric_names)

    @classmethod
    def create(cls, root_block_like, max_depth=None, loom_input_tensor=None, input_tensor=None,
               parallel_iterations=None, back_prop=None, swap_memory=None):
        """TF Fold's constructor: the root's input must be PyObject or Void and its outputs
        tensors or (nested) tuples of tensors, else TypeError."""
        root = convert_to_block(root_block_like)
        if _engine_in_type(root) is None:
            _engine_set_in(root, _cb.Type.input())
        if _engine_in_type(root).kind not in ("input", "void"):
            raise TypeError("root block input type %s is not PyObjectType or VoidType" %
                            _types.from_engine(_engine_in_type(root)))
        out = _engine_out_type(root)
        _check_root_output(out)
        try:
            return cls(root, max_depth=max_depth or 0)
        except _weft.Error as error:
            if "no outputs" not in str(error):
                raise
            raise TypeError("root must have at least one output or metric tensor: %s" %
                            _types.from_engine(out)) from error

    def build_loom_input_batched(self, examples, batch_size=None, metric_labels=False,
                                 ordered=False):
        """The examples in batches of batch_size (one when None), each woven when fed."""
        return EdibleIterator(_Batch(chunk) for chunk in _batches(examples, batch_size))

    def build_loom_inputs(self, examples, metric_labels=False, chunk_size=100, ordered=False):
        """One loom input per example (TF Fold's mergeable per-example messages)."""
        batches = (_Batch([example]) for example in examples)
        if metric_labels:
            return ((b, self._metric_labels(b)) for b in batches)
        return EdibleIterator(batches)

    def build_feed_dict(self, examples, batch_size=None, metric_labels=False, ordered=False):
        """{loom_input_tensor: examples}, for Session.run (the weave happens there); with
        metric_labels, also {metric name: the labels of its rows}."""
        feed_dict = {self.loom_input_tensor: list(examples)}
        if metric_labels:
            return feed_dict, self._metric_labels(feed_dict[self.loom_input_tensor])
        return feed_dict

    def _metric_labels(self, examples):
        if not self.metric_names:
            return {}
        result = _forward_fed(self, {self.loom_input_tensor: examples})
        return {name: result.metric(name).labels for name in self.metric_names
                if result.metric(name).labels}


class _Batch(list):
    """Examples fed as one loom input (what build_loom_input_batched yields)."""


class EdibleIterator:
    """TF Fold's EdibleIterator: iterates lazily; .value is every item, read once."""

    def __init__(self, iterable):
        self._iterator, self._value = iter(iterable), None

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._iterator)

    @property
    def value(self):
        if self._value is None:
            self._value = list(self._iterator)
        return self._value


def _check_root_output(out):
    """TF Fold's refusals of a root: sequences or Python objects among its outputs."""
    if out is None:
        raise TypeError("root output type is unknown (set_output_type)")
    kinds = _terminal_kinds(out)
    if kinds & {"sequence", "broadcast"}:
        raise TypeError("root output may not contain sequences: %s" % _types.from_engine(out))
    if "input" in kinds:
        raise TypeError("root outputs must all be tensors: %s" % _types.from_engine(out))


def _terminal_kinds(engine_type):
    if engine_type.kind == "tuple":
        return set().union(*[_terminal_kinds(t) for t in engine_type.items])
    return {engine_type.kind}


def _batches(examples, batch_size):
    examples = list(examples)
    size = batch_size or max(len(examples), 1)
    for start in range(0, len(examples), size):
        yield examples[start:start + size]


class Session:
    """What TF Fold ran fetches in: run(fetches, feed_dict) forwards the fed examples once per
    compiler (no gradients kept) and returns the fetches' values in the fetches' structure."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def run(self, fetches, feed_dict=None):
        results = {}

        def fetch(f):
            if isinstance(f, (list, tuple)):
                return type(f)(fetch(x) for x in f)
            if isinstance(f, dict):
                return {k: fetch(v) for k, v in f.items()}
            if not isinstance(f, _Fetch):
                raise TypeError("cannot fetch %r (fetch compiler.output_tensors or "
                                "compiler.metric_tensors)" % (f,))
            if id(f.compiler) not in results:
                results[id(f.compiler)] = _forward_fed(f.compiler, feed_dict or {})
            return f.value(results[id(f.compiler)])

        return fetch(fetches)


def _forward_fed(compiler, feed_dict):
    fed = feed_dict.get(compiler.loom_input_tensor)
    if fed is None:
        raise ValueError("feed_dict has no examples for this compiler (build_feed_dict)")
    tape = _weft.Tape()
    if isinstance(fed, _cb.WovenBatch):
        return compiler.run(fed, tape)
    return with_data(lambda v: compiler.forward(v, tape), _examples_fed(fed))


def _examples_fed(fed):
    """The examples of what was fed: a list of examples, or loom inputs (build_loom_input_batched
    / build_loom_inputs, alone, in lists or as EdibleIterators): their examples in order."""
    if isinstance(fed, EdibleIterator):
        fed = fed.value
    if isinstance(fed, _Batch):
        return list(fed)
    fed = list(fed)
    if fed and all(_is_loom_input(f) for f in fed):
        return [example for f in fed for example in _examples_fed(f)]
    return fed


def _is_loom_input(value):
    if isinstance(value, (_Batch, EdibleIterator)):
        return True
    return isinstance(value, list) and bool(value) and all(isinstance(v, _Batch) for v in value)
