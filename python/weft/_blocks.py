"""The block combinators of weft.blocks: the C++ engine's blocks (weft._weft.blocks) with TF Fold's
spellings and value conventions on top: tuples and dicts as Records, TF Fold's type objects,
Function(fn) with inferred and nested types, Composition scopes, eval(tolist=) with metrics.
Weft's own spellings (Function(name, inputs, body), OneOf(key, cases), Composition.add, ...)
keep working. The TF Fold modules that build on these (_fold_compiler: Compiler and Session;
_fold_layers: FC, Embedding, ScopedLayer) import this one, never the other way round; the
public module weft.blocks gathers them all."""

import collections
import contextlib
import functools
import itertools
import threading
import warnings

import numpy as np

from . import _weft
from . import _fold_types as _types
from ._fold_data import metric_rows, with_data
from ._fold_types import PyObjectType
from ._fold_util import parse_message_to_tree

_cb = _weft.blocks

# The engine's classes that TF Fold code meets unchanged (or that only Weft has).
Type = _cb.Type
Block = _cb.Block
Inputs = _cb.Inputs
WovenBatch = _cb.WovenBatch
MetricValues = _cb.MetricValues
BatchResult = _cb.BatchResult
Wire = _cb.Wire
Collect = _cb.Collect
Collected = _cb.Collected
Broadcast = _cb.Broadcast
Zip = _cb.Zip
Nth = _cb.Nth
Gather = _cb.Gather
GatherLists = _cb.GatherLists
FCBlock = _cb.FCBlock
EmbeddingBlock = _cb.EmbeddingBlock
LSTMBlock = _cb.LSTMBlock
GRUBlock = _cb.GRUBlock
TreeLSTMBlock = _cb.TreeLSTMBlock
ChildSumForgetBlock = _cb.ChildSumForgetBlock
ChildSumNodeBlock = _cb.ChildSumNodeBlock
AsTensor = _cb.AsTensor
max_depth = _cb.max_depth

# The engine's own accessors, kept before Block's are replaced by TF Fold's below (the compiler
# module reads them from here).
_engine_in_type = _cb.Block.input_type.fget
_engine_out_type = _cb.Block.output_type.fget
_engine_set_in = _cb.Block.set_input_type
_engine_set_out = _cb.Block.set_output_type
_engine_eval = _cb.Block.eval
_engine_max_depth = _cb.Block.max_depth


# ---- Values: TF Fold's Python data in, TF Fold's Python results out -----------------------------


def _fold_value(engine_type, value, tolist):
    """An engine eval result in TF Fold's form: tuples as tuples, a Broadcast as
    itertools.repeat, tensors as NumPy arrays (or lists / Python numbers with tolist)."""
    kind = engine_type.kind
    if kind == "tensor":
        return value.tolist() if tolist else value
    if kind == "tuple":
        return tuple(_fold_value(t, v, tolist) for t, v in zip(engine_type.items, value))
    if kind == "sequence":
        return [_fold_value(engine_type.element, v, tolist) for v in value]
    if kind == "broadcast":
        return itertools.repeat(_fold_value(engine_type.element, value[0], tolist))
    return value


def _eval(self, inp=None, feed_dict=None, session=None, tolist=False, use_while_loop=True):
    """The block's value on one input, as TF Fold's Block.eval (feed_dict, session and
    use_while_loop are accepted and ignored: there is no graph); with metrics, (value, metrics)."""
    block = _finalized(self)
    if _engine_in_type(block) is None:
        _engine_set_in(block, Type.input())
    value = with_data(lambda v: _engine_eval(block, v), inp)
    out_type = _engine_out_type(block)
    value = _fold_value(out_type, value, tolist)
    if out_type.kind == "input" and getattr(self, "_tuple_of_objects", False):
        value = tuple(value)
    metrics = _metrics(block, inp, tolist)
    return value if metrics is None else (value, metrics)


def _max_depth(self, inp=None):
    return with_data(lambda v: _engine_max_depth(_finalized(self), v), inp)


# ---- The Block protocol TF Fold code uses ---------------------------------------------------------


def _set_input_type(self, input_type):
    _engine_set_in(self, _types.to_engine(input_type))
    return self


def _set_output_type(self, output_type):
    _engine_set_out(self, _types.to_engine(output_type))
    return self


def _set_io_types(self, other):
    if other.input_type is not None:
        _set_input_type(self, other.input_type)
    if other.output_type is not None:
        _set_output_type(self, other.output_type)
    return self


def _validate(self, compiler_ctx=None):
    """TF Fold's check before compiling: every type known, compositions complete."""
    block = _finalized(self)
    if _engine_in_type(block) is None:
        raise TypeError("Cannot determine input type for %s." % _kind_name(self))
    if _engine_out_type(block) is None:
        raise TypeError("Cannot determine output type for %s." % _kind_name(self))


def _kind_name(block):
    return _engine_repr(block).strip("<>").split(" ")[0]


Block.input_type = property(lambda self: _types.from_engine(_engine_in_type(self)))
Block.output_type = property(lambda self: _types.from_engine(_engine_out_type(self)))
Block.set_input_type = _set_input_type
Block.set_output_type = _set_output_type
Block.set_io_types = _set_io_types
Block.eval = _eval
Block.max_depth = _max_depth
Block._validate = _validate
Block.__rshift__ = lambda self, other: Pipe(self, other)
Block.__rrshift__ = lambda self, other: Pipe(other, self)


def _reads(self, *others):
    """Inside `with composition.scope():`, this block reads the others' outputs; returns it."""
    _current_scope("reads").connect(others, self)
    return self


Block.reads = _reads
Block.__getitem__ = lambda self, key: _Output(self, key)
_engine_repr = Block.__repr__
Block.__repr__ = lambda self: getattr(self, "_fold_repr", None) or _engine_repr(self)


class ConvertibleToBlock:
    """A base of objects that stand for a block where one is expected (td.Layer): convert_to_block
    gives their to_block(), and `x >> block`, `block >> x` compose them."""

    def to_block(self):
        raise NotImplementedError

    def __rshift__(self, other):
        return Pipe(self, other)

    def __rrshift__(self, other):
        return Pipe(other, self)


def convert_to_block(block_like):
    """TF Fold's conversions: a Block as it is; a dict, list or tuple of block-likes -> Record; an
    np.ndarray, weft Tensor or Parameter -> FromTensor; a layer (a ConvertibleToBlock, such as a
    td.Layer) -> its to_block(), a Function."""
    if isinstance(block_like, Composition):
        return block_like._finish()
    if isinstance(block_like, Block):
        return block_like
    if isinstance(block_like, (dict, list, tuple)):
        return Record(block_like)
    if isinstance(block_like, (np.ndarray, _weft.Tensor, _weft.Parameter)):
        return FromTensor(block_like)
    if isinstance(block_like, ConvertibleToBlock):
        return block_like.to_block()
    raise TypeError("%r cannot be converted to a block" % (block_like,))


def _finalized(block):
    return block._finish() if isinstance(block, Composition) else block


def _blocks(block_likes):
    return [convert_to_block(b) for b in block_likes]


# ---- Tensors --------------------------------------------------------------------------------------


class Tensor(_cb.AsTensor):
    """PyObject -> TensorType(shape, dtype): the value as a constant (td.Tensor)."""

    def __init__(self, shape, dtype="float32", name=None):
        shape = tuple(int(d) for d in shape)
        super().__init__(list(shape), np.dtype(dtype).name)
        self._fold_repr = _fold_repr("Tensor", name, dtype=np.dtype(dtype).name, shape=shape)


def _fold_repr(kind, name, **fields):
    """TF Fold's repr of a block: <td.Kind 'name' field=value ...>."""
    parts = ["td." + kind] + (["%r" % name] if name else [])
    return "<%s>" % " ".join(parts + ["%s=%r" % kv for kv in fields.items()])


def Scalar(dtype="float32", name=None):  # noqa: N802  (TF Fold's names are capitalised)
    block = Tensor([], dtype)
    block._fold_repr = _fold_repr("Scalar", name, dtype=np.dtype(dtype).name)
    return block


def Vector(size, dtype="float32", name=None):  # noqa: N802
    block = Tensor([size], dtype)
    block._fold_repr = _fold_repr("Vector", name, dtype=np.dtype(dtype).name, size=size)
    return block


class FromTensor(_cb.FromTensor):
    """Void -> the tensor: a NumPy array or weft Tensor (a constant) or a Parameter (trained)."""

    def __init__(self, tensor, name=None):
        if isinstance(tensor, np.ndarray):  # its dtype kept (float64 stays float64), 0-d too
            copy = np.array(tensor, order="C")
            if copy.dtype.name not in ("float32", "float64", "int32", "int64", "bool"):
                copy = copy.astype(np.float32 if copy.dtype.kind == "f" else np.int64)
            tensor = _weft.from_numpy(copy)
        elif not isinstance(tensor, (_weft.Tensor, _weft.Parameter)):
            raise TypeError("%s is not a tensor or np.ndarray" % (tensor,))
        super().__init__(tensor)
        self._name = name


def Zeros(output_type, name=None):  # noqa: N802
    return _cb.Zeros(_types.to_engine(output_type))


class OneHot(_cb.OneHot):
    def __init__(self, start, stop=None, dtype="float32", name=None):
        super().__init__(start, stop, dtype)
        self._name = name


def OneHotFromList(elements, dtype="float32", strict=True, name=None):  # noqa: N802
    if len(set(map(repr, elements))) != len(elements):
        raise AssertionError("OneHotFromList was passed duplicate elements.")
    return _cb.OneHotFromList(list(elements), dtype, strict)


def Length(dtype="float32", name=None):  # noqa: N802
    return _cb.Length(np.dtype(dtype).name)


# ---- Functions ------------------------------------------------------------------------------------


def _nest_arguments(engine_type, flat):
    """The arguments of a TF Fold function body: the input tuple's items, nested as the type
    nests them (the engine hands one batched Var per terminal tensor)."""
    it = iter(flat)

    def build(t):
        return tuple(build(i) for i in t.items) if t.kind == "tuple" else next(it)

    return build(engine_type) if engine_type.kind == "tuple" else (build(engine_type),)


def _flat_outputs(result):
    if isinstance(result, (tuple, list)):
        return [v for r in result for v in _flat_outputs(r)]
    return [result]


def _structure(result):
    """The nesting of a body's result: None for one value, else a tuple of item structures."""
    if isinstance(result, (tuple, list)):
        return tuple(_structure(r) for r in result)
    return None


def _nest_types(structure, flat):
    it = iter(flat)

    def build(s):
        return next(it) if s is None else Type.tuple([build(i) for i in s])

    return build(structure)


class Function(_cb.Function):
    """Function(tf_fn, name=None): a batched function of the input tuple's items (TF Fold), types
    inferred from composition, nested tuples in and out; or Weft's Function(name, inputs, body,
    output=None)."""

    def __init__(self, tf_fn=None, *args, name=None, infer_output_type=True, **kwargs):
        if isinstance(tf_fn, str):  # Weft's spelling
            super().__init__(tf_fn, *args, **kwargs)
            return
        if not callable(tf_fn):
            raise TypeError("tf_fn is not callable: %s" % (tf_fn,))
        handle, structure = [], [None]  # the engine block; the result's nesting, once seen

        in_type = getattr(tf_fn, "input_type", None)
        fixed = _types.to_engine(in_type) if in_type else None  # inferred ones: read when called

        def body(*flat):
            result = tf_fn(*_nest_arguments(fixed or _engine_in_type(handle[0]), flat))
            structure[0] = _structure(result)
            outputs = _flat_outputs(result)
            for v in outputs:
                if not isinstance(v, (_weft.Var, _weft.Parameter)):
                    raise TypeError("%s is not a TF tensor" % (v,))  # TF Fold's words: a Var
            return outputs

        fn_name = name or getattr(tf_fn, "__name__", None) or type(tf_fn).__name__
        super().__init__(fn_name, [fixed] if fixed else [], body,
                         nesting=lambda flat: _nest_types(structure[0], flat))
        handle.append(_cb.Pipe(self))
        self.tf_fn = tf_fn


def _infer_tf_output_type_from_input_type(fn, input_type):
    """The output type of td.Function(fn) on input_type (fn runs once on zeros)."""
    return Function(fn).set_input_type(input_type).output_type


class Concat(_cb.Concat):
    """Tuple of tensors -> their concatenation along concat_dim (the batch axis excluded)."""

    def __init__(self, concat_dim=0, flatten=False, name=None, dim=None):
        super().__init__(concat_dim if dim is None else dim, flatten)
        self._name = name


# ---- Plumbing -------------------------------------------------------------------------------------


class Identity(_cb.Identity):
    def __init__(self, name=None):
        super().__init__()
        self._name = name


class InputTransform(_cb.InputTransform):
    def __init__(self, py_fn, name=None, fn=None):
        py_fn = fn if fn is not None else py_fn
        if not callable(py_fn):
            raise TypeError("py_fn is not callable: %s" % (py_fn,))
        super().__init__(py_fn, name or "")


def SerializedMessageToTree(message_type_name):  # noqa: N802
    """Serialized protobufs -> nested dicts and lists (see parse_message_to_tree)."""
    if not isinstance(message_type_name, str):
        raise TypeError("message type name must be a string; %s has %s" %
                        (message_type_name, type(message_type_name)))
    return InputTransform(functools.partial(parse_message_to_tree, message_type_name),
                          name=message_type_name)


def GetItem(key, name=None):  # noqa: N802
    if isinstance(key, slice):
        return _cb.Slice(key.start, key.stop, key.step)
    return _cb.GetItem(key)


def Slice(*args, **kwargs):  # noqa: N802
    """x[start:stop:step] (keywords only, as TF Fold: Slice(2) would be ambiguous)."""
    if args:
        raise TypeError("Slice does not accept positional arguments; allowed keyword arguments "
                        "are start, stop, and step")
    kwargs.pop("name", None)
    return _cb.Slice(kwargs.pop("start", None), kwargs.pop("stop", None), kwargs.pop("step", None))


def Pipe(*blocks, name=None):  # noqa: N802
    """Pipe(a, b, c) = a >> b >> c; Identity blocks are dropped, Pipe() is Identity."""
    converted = _blocks(blocks)
    for before, after in zip(converted, converted[1:]):
        if getattr(after, "_from_dict", False) and (_engine_out_type(before) or Type.input()
                                                    ).kind == "tuple":
            raise RuntimeError("Record block created with an unordered dict cannot take ordered "
                               "inputs (its keys are sorted; use a list of pairs): %s" %
                               _types.from_engine(_engine_out_type(before)))
    return _cb.Pipe(*converted) if blocks else Identity()


def Void(name=None):  # noqa: N802
    return _cb.Void()


class _AllOf(_cb.AllOf):
    _tuple_of_objects = True  # a tuple of Python values reads back as a tuple, not a list


class _Record(_cb.Record):
    _tuple_of_objects = True


def AllOf(*blocks, name=None):  # noqa: N802
    """T -> (b1(x), ..., bn(x)); AllOf() is Void (its value None)."""
    if len(blocks) == 1 and isinstance(blocks[0], list):
        blocks = tuple(blocks[0])  # Weft's AllOf([a, b])
    if not blocks:
        return _cb.Void()
    return _AllOf(_blocks(blocks))


def _record_fields(named_children):
    if isinstance(named_children, collections.OrderedDict):
        return list(named_children.items())
    if isinstance(named_children, dict):
        fields = sorted(named_children.items(), key=lambda kv: kv[0])
        if [k for k, _ in fields] != list(named_children):
            # Written {"h": ..., "clock": ...}, the Record gives (clock, h): GetItem(1) is h.
            warnings.warn("td.Record sorts a dict's keys, as TensorFlow Fold did: its fields are "
                          f"({', '.join(repr(k) for k, _ in fields)}), not in the order written; "
                          "pass a list of (key, block) pairs to keep that order", stacklevel=3)
        return fields
    items = list(named_children)
    if items and all(isinstance(i, tuple) and len(i) == 2 and isinstance(i[0], (str, int, slice))
                     for i in items):
        return items
    return list(enumerate(items))


def Record(named_children, name=None):  # noqa: N802
    """Tuple(b_k(x[k]) for each key k): a dict's keys sorted (as TF Fold), an OrderedDict or list
    of (key, block) pairs in order, a tuple or list of blocks keyed 0..n-1; a slice key slices."""
    fields = _record_fields(named_children)
    if any(isinstance(k, slice) for k, _ in fields):
        return _AllOf([GetItem(k) >> convert_to_block(b) for k, b in fields])
    block = _Record([(str(k), convert_to_block(b)) for k, b in fields])
    block._from_dict = isinstance(named_children, dict) and not isinstance(
        named_children, collections.OrderedDict)
    return block


# ---- Sequences ------------------------------------------------------------------------------------


def Map(elem_block, name=None):  # noqa: N802
    return _cb.Map(convert_to_block(elem_block))


def Fold(combine_block, start_block, name=None):  # noqa: N802
    return _cb.Fold(convert_to_block(combine_block), convert_to_block(start_block))


def RNN(cell, initial_state=None, initial_state_from_input=False, name=None):  # noqa: N802
    if initial_state_from_input and initial_state is not None:
        raise ValueError("Cannot specify initial_state if initial_state_from_input is True.")
    if initial_state is None:
        return _cb.RNN(convert_to_block(cell), initial_state_from_input=initial_state_from_input)
    return _cb.RNN(convert_to_block(cell), convert_to_block(initial_state),
                   initial_state_from_input)


def Loop(body, stop, max_steps=100, threshold=0.5, at_bound="fail", emits=False,  # noqa: N802
         collect_stops=False, teacher_forced=False, name=None):
    """A loop whose length the model decides (Weft's; TF Fold had none): while stop(state) <=
    threshold, state = body(state), at most max_steps times. See weft._weft.blocks.Loop."""
    return _cb.Loop(convert_to_block(body), convert_to_block(stop), max_steps=max_steps,
                    threshold=threshold, at_bound=at_bound, emits=emits,
                    collect_stops=collect_stops, teacher_forced=teacher_forced)


def Reduce(combine_block, default_block=None, name=None):  # noqa: N802
    if default_block is None:
        return _cb.Reduce(convert_to_block(combine_block))
    return _cb.Reduce(convert_to_block(combine_block), convert_to_block(default_block))


def Sum(name=None, in_order=False):  # noqa: N802
    """TF Fold's Sum (balanced pairing, depth ceil(log2 n)); in_order=True adds a float32
    sequence's elements one after another in ONE batched call per depth, whatever the lengths
    (depth 1: sums over neighbour lists of any sizes batch together). That order is the CPU's: on
    CUDA the segment sum adds with atomics, in no fixed order."""
    return _cb.Sum(in_order=bool(in_order))


def Min(name=None):  # noqa: N802
    return _cb.Min()


def Max(name=None):  # noqa: N802
    return _cb.Max()


def Mean(name=None):  # noqa: N802
    return _cb.Mean()


def ZipWith(elem_block, name=None):  # noqa: N802
    return _cb.ZipWith(convert_to_block(elem_block))


def NGrams(n, name=None):  # noqa: N802
    if n <= 0:
        raise ValueError("n must be positive: %s" % (n,))
    return _cb.NGrams(n)


# ---- Choice, recursion, metrics -------------------------------------------------------------------


def OneOf(key_fn, case_blocks=None, pre_block=None, name=None, cases=None):  # noqa: N802
    """case_blocks[key_fn(x)](pre_block(x)): key_fn a Python function or a block; case_blocks a
    dict (any JSON-like keys, True / False too), a list of pairs, or a tuple / list of blocks."""
    case_blocks = cases if case_blocks is None else case_blocks
    if not isinstance(key_fn, Block) and not callable(key_fn):
        raise TypeError("key_fn is not callable: %s" % (key_fn,))
    if not case_blocks:
        raise ValueError("case_blocks must be non-empty")
    if isinstance(case_blocks, dict):
        cases_in = {k: convert_to_block(b) for k, b in case_blocks.items()}
    elif all(isinstance(c, tuple) and len(c) == 2 and not isinstance(c[0], Block)
             for c in case_blocks):
        cases_in = {k: convert_to_block(b) for k, b in case_blocks}
    else:
        cases_in = _blocks(case_blocks)
    if isinstance(key_fn, Block):
        key_fn = convert_to_block(key_fn)
    else:
        key_fn = _python_case_key(key_fn, cases_in)
    pre = None if pre_block is None else convert_to_block(pre_block)
    return _cb.OneOf(key_fn, cases_in, pre)


def _python_case_key(key_fn, cases):
    """The key as Python would look it up in the cases: True finds case 1, a negative index
    counts from the end of a tuple of cases, 1.0 finds key 1 (the engine compares JSON values,
    where true and 1 differ)."""
    canonical = {k: k for k in cases} if isinstance(cases, dict) else None
    n = len(cases)

    def key(x):
        k = key_fn(x)
        if canonical is not None:
            try:
                return canonical.get(k, k)
            except TypeError:  # unhashable: no case has it (the engine says so)
                return k
        if isinstance(k, (bool, np.bool_, np.integer)):
            k = int(k)
        return k + n if isinstance(k, int) and -n <= k < 0 else k

    return key


def Optional(some_case, none_case=None, name=None):  # noqa: N802
    if none_case is None:
        return _cb.Optional(convert_to_block(some_case))
    return _cb.Optional(convert_to_block(some_case), convert_to_block(none_case))


class ForwardDeclaration(_cb.ForwardDeclaration):
    """Recursion: fwd = ForwardDeclaration(input_type, output_type) (either may be None: then
    it is inferred from the uses and the block resolved to); use fwd() inside the model, then
    fwd.resolve_to(model)."""

    def __init__(self, input_type=None, output_type=None, name=None):
        if output_type is None:  # the input type is then inferred as well
            super().__init__()
        else:
            super().__init__(_types.to_engine(PyObjectType() if input_type is None else input_type),
                             _types.to_engine(output_type))
        self._name = name

    def resolve_to(self, target_block):
        target = convert_to_block(target_block)
        _cb.ForwardDeclaration.resolve_to(self, target)
        # The engine's references hold the target weakly (a recursive model would otherwise own
        # itself); TF Fold programs resolve to temporaries, so Python keeps targets alive.
        _resolved_targets.append(target)


_resolved_targets = []


def Metric(metric_name):  # noqa: N802
    return _cb.Metric(metric_name)


def _metrics(block, inp, tolist):
    """The metric rows one input gives ({name: rows}), or None when the block has no metrics."""
    try:
        compiler = _cb.Compiler(_cb.Pipe(block, _cb.Void()), threads=1)
    except Exception:  # noqa: BLE001  (nothing compiles: then it has no metrics to report)
        return None
    if not compiler.metric_names:
        return None
    result = with_data(lambda v: compiler.forward([v], _weft.Tape()), inp)
    metrics = {}
    for name in compiler.metric_names:
        metrics[name] = metric_rows(result.metric(name), tolist)
    return metrics


# ---- Composition ----------------------------------------------------------------------------------

_scopes = threading.local()


def _current_scope(what):
    stack = getattr(_scopes, "stack", None)
    if not stack:
        raise ValueError("%s() must be called inside `with composition.scope():`" % what)
    return stack[-1]


class _Output:
    """block[i] / composition.input[i]: item i of a block's (or the input's) tuple value."""

    def __init__(self, source, key):
        self.source, self.key = source, key

    def __getitem__(self, key):
        return _Output(self, key)


class _Endpoint:
    """A composition's input or output, as TF Fold spells them (c.input, c.output; Weft's
    c.input() still gives the engine's input wire)."""

    def __init__(self, composition, is_input):
        self.composition, self.is_input = composition, is_input

    def __call__(self):
        return _cb.Composition.input(self.composition)

    def __getitem__(self, key):
        return _Output(self, key)

    def reads(self, *sources):
        if self.is_input:
            raise ValueError("cannot write to composition input")
        self.composition.connect(sources, self)
        return self

    def __repr__(self):
        return "<td.Composition.%s>" % ("input" if self.is_input else "output")


class Composition(_cb.Composition):
    """A DAG of blocks: `with c.scope(): b.reads(a)`, or c.connect(a, b), or Weft's
    c.add(block, reads) / c.set_output(wire). Composition(children=None, name=None) as TF Fold's;
    a string alone is the name (Composition("root")). Blocks join the engine's composition as soon as
    what they read is there, so type errors show at once; c.connect may come in any order."""

    def __init__(self, children=None, name=None):
        if isinstance(children, str):  # Composition("root"): a name (as Weft's C++ spelling)
            if name is not None:
                raise TypeError("Composition(children, name): children is the string %r; give "
                                "the name once, e.g. Composition(name=%r)" % (children, name))
            children, name = None, children
        super().__init__(name or "")
        self.input = _Endpoint(self, True)
        self.output = _Endpoint(self, False)
        self._children = [convert_to_block(c) for c in (children or [])]
        self._wires = {}  # id(child) -> engine wire, once added
        self._pending = []  # (sources, child) waiting for their sources
        self._reads = set()  # ids of the children (and output) already connected
        self._read_from = set()  # ids of the children something reads
        self._has_output = False

    @contextlib.contextmanager
    def scope(self):
        stack = getattr(_scopes, "stack", None)
        if stack is None:
            stack = _scopes.stack = []
        stack.append(self)
        try:
            yield self
        finally:
            stack.pop()

    def connect(self, source, dest):
        sources = source if isinstance(source, tuple) else (source,)
        if isinstance(dest, _Endpoint) and dest.is_input:
            raise ValueError("cannot write to composition input")
        for s in sources:
            self._check_endpoint(s)
            if isinstance(s, _Endpoint) and not s.is_input:
                raise ValueError("cannot read from composition output")
            while isinstance(s, _Output):
                s = s.source
            self._read_from.add(id(s))
        self._check_endpoint(dest)
        key = id(dest)
        if key in self._reads:
            raise ValueError("input of block is already connected: %r" % (dest,))
        self._reads.add(key)
        if isinstance(dest, Block) and all(dest is not c for c in self._children):
            self._children.append(dest)
        self._pending.append((sources, dest))
        self._add_ready()

    def _check_endpoint(self, x):
        if isinstance(x, _Output):
            return self._check_endpoint(x.source)
        if isinstance(x, _Endpoint) and x.composition is not self:
            raise ValueError("%r is the input or output of a different composition" % (x,))

    def _wire(self, source):
        if isinstance(source, _Output):
            inner = self._wire(source.source)
            return None if inner is None else inner[source.key]
        if isinstance(source, _Endpoint):
            return _cb.Composition.input(self)
        return self._wires.get(id(source))

    def _add_ready(self):
        progress = True
        while progress:
            progress = False
            for entry in list(self._pending):
                sources, dest = entry
                wires = [self._wire(s) for s in sources]
                if any(w is None for w in wires):
                    continue
                self._pending.remove(entry)
                progress = True
                reads = wires[0] if len(wires) == 1 else wires
                if isinstance(dest, _Endpoint):
                    _cb.Composition.set_output(self, reads)
                    self._has_output = True
                else:  # a child composition may still be under construction: finished later
                    self._wires[id(dest)] = _cb.Composition.add(self, dest, reads)

    def _finish(self):
        """Adds the children that read nothing (Void input) and checks the DAG is complete."""
        for child in self._children:
            if id(child) not in self._wires and id(child) not in self._reads:
                self._wires[id(child)] = _cb.Composition.add(self, _finalized(child))
            else:
                _finalized(child)
        if self._pending:
            raise ValueError("Composition cannot have cycles.")
        if not self._has_output:
            raise TypeError("Composition block has no output")
        unused = [c for c in self._children if id(c) not in self._read_from and
                  (_engine_out_type(c) is not None and _engine_out_type(c).kind != "void")]
        if unused:
            raise TypeError("children have unused outputs: %s" % ", ".join(map(repr, unused)))
        return self

    def add(self, block, reads=None):
        """Weft's spelling: runs block on the wires it reads; returns its output wire."""
        return _cb.Composition.add(self, convert_to_block(block), reads)

    def set_output(self, wire):
        self._has_output = True
        return _cb.Composition.set_output(self, wire)
