"""TensorFlow Fold's result types (td.TensorType, TupleType, ...) as Python values, and their
conversion to and from the engine's weft.blocks.Type. They behave as TF Fold's did: equality,
hashing and ordering by repr, `size`, `terminal_types()`, `flatten` / `unflatten`; the engine
only ever sees its own Type (to_engine) and blocks report theirs in TF Fold's spelling
(from_engine), so `block.output_type == td.TensorType([])` reads as it did."""

import collections
import itertools

import numpy as np

from . import _weft

_Engine = _weft.blocks.Type
_DTYPES = ("float32", "float64", "int32", "int64", "bool")

# TF Fold's loom.TypeShape: a tensor type as the loom keys its values (dtype, shape, tag).
TypeShape = collections.namedtuple("TypeShape", ["dtype", "shape", "tag"])


class ResultType:
    """Base of the types; equality, hashing and ordering follow repr(), as in TF Fold."""

    def __eq__(self, other):
        if isinstance(other, _Engine):
            other = from_engine(other)
        return isinstance(other, ResultType) and repr(self) == repr(other)

    def __ne__(self, other):
        return not self == other

    def __lt__(self, other):
        return repr(self) < repr(other)

    def __hash__(self):
        return hash(repr(self))

    def terminal_types(self):
        return iter(())

    def for_each_terminal(self, fn, instance):
        return [fn(t, v) for t, v in zip(self.terminal_types(), self.flatten(instance))]


class VoidType(ResultType):
    """No value (None): no terminal types, flattens to []."""

    size = 0

    def __repr__(self):
        return "VoidType()"

    def flatten(self, instance):
        return []

    def unflatten(self, flat, shaped_like):
        return None


class _Terminal(ResultType):
    """A type whose values are terminals: it flattens to the value itself."""

    def terminal_types(self):
        return iter((self,))

    def flatten(self, instance):
        return [instance]

    def unflatten(self, flat, shaped_like):
        return next(flat)


class PyObjectType(_Terminal):
    """Any Python value (Weft: JSON-like data, the engine's Input); terminal, never a tensor."""

    size = None

    def __repr__(self):
        return "PyObjectType()"


class TensorType(_Terminal):
    """A tensor of `shape` (no batch axis) and `dtype`; size is the element count."""

    def __init__(self, shape, dtype="float32"):
        self._shape = tuple(int(d) for d in shape)
        if any(d < 0 for d in self._shape):
            raise TypeError("shape %s has negative dimensions" % (self._shape,))
        self._dtype = np.dtype(dtype).name
        if self._dtype not in _DTYPES:
            raise TypeError("dtype %s is not supported (%s)" % (self._dtype, ", ".join(_DTYPES)))

    shape = property(lambda self: self._shape)
    dtype = property(lambda self: self._dtype)
    ndim = property(lambda self: len(self._shape))
    size = property(lambda self: int(np.prod(self._shape, dtype=np.int64)))

    def __repr__(self):
        return "TensorType(%r, %r)" % (self._shape, self._dtype)

    @property
    def _type_shape(self):
        return TypeShape(self._dtype, self._shape, "")

    def __array__(self, dtype=None, copy=None):
        return np.zeros(self._shape, dtype or self._dtype)


class TupleType(ResultType):
    """A fixed-length tuple of types; len, indexing and slicing (a slice is a TupleType)."""

    def __init__(self, *items):
        if len(items) == 1 and not isinstance(items[0], ResultType):
            items = tuple(items[0])
        self._items = tuple(convert_to_type(t) for t in items)

    def __repr__(self):
        return "TupleType(%s)" % ", ".join(repr(t) for t in self._items)

    def __len__(self):
        return len(self._items)

    def __iter__(self):
        return iter(self._items)

    def __getitem__(self, key):
        if isinstance(key, slice):
            return TupleType(*self._items[key])
        return self._items[key]

    @property
    def size(self):
        sizes = [t.size for t in self._items]
        return None if any(s is None for s in sizes) else sum(sizes)

    def terminal_types(self):
        return itertools.chain.from_iterable(t.terminal_types() for t in self._items)

    def flatten(self, instance):
        return [x for t, v in zip(self._items, instance) for x in t.flatten(v)]

    def unflatten(self, flat, shaped_like):
        like = shaped_like if shaped_like is not None else [None] * len(self._items)
        return tuple(t.unflatten(flat, s) for t, s in zip(self._items, like))


class SequenceType(ResultType):
    """A list of any length of one element type; unsized."""

    size = None

    def __init__(self, elem_type):
        self._element = convert_to_type(elem_type)

    element_type = property(lambda self: self._element)

    def __repr__(self):
        return "%s(%r)" % (type(self).__name__, self._element)

    def terminal_types(self):
        return self._element.terminal_types()

    def flatten(self, instance):
        return [x for item in instance for x in self._element.flatten(item)]

    def unflatten(self, flat, shaped_like):
        return [self._element.unflatten(flat, s) for s in shaped_like]


class BroadcastSequenceType(SequenceType):
    """One value repeated without end (itertools.repeat), made by Broadcast."""

    def flatten(self, instance):
        return self._element.flatten(next(iter(instance)))

    def unflatten(self, flat, shaped_like):
        return itertools.repeat(self._element.unflatten(flat, next(iter(shaped_like))))


def convert_to_type(type_like):
    """TF Fold's shorthands: a ResultType; a tuple (recursively) -> TupleType; [d0, d1, ...,
    dtype?] -> TensorType; a dtype name -> scalar; an int n -> TensorType((n,)); an engine Type."""
    if isinstance(type_like, ResultType):
        return type_like
    if isinstance(type_like, _Engine):
        return from_engine(type_like)
    if isinstance(type_like, tuple):
        return TupleType(*[convert_to_type(t) for t in type_like])
    if isinstance(type_like, (list, np.ndarray)):
        items = list(type_like)
        if items and isinstance(items[-1], (str, np.dtype, type)):
            return TensorType(items[:-1], items[-1])
        return TensorType(items)
    if isinstance(type_like, (str, np.dtype)) or (isinstance(type_like, type) and
                                                  issubclass(type_like, np.generic)):
        return TensorType((), type_like)
    if isinstance(type_like, (int, np.integer)) and not isinstance(type_like, bool):
        return TensorType((int(type_like),))
    raise TypeError("cannot convert %r to a type" % (type_like,))


def canonicalize_type(type_like):
    """Tuples and sequences made only of PyObjectType collapse to PyObjectType (recursively)."""
    t = convert_to_type(type_like)
    if isinstance(t, TupleType):
        items = [canonicalize_type(i) for i in t]
        if items and all(isinstance(i, PyObjectType) for i in items):
            return PyObjectType()
        return TupleType(*items)
    if isinstance(t, SequenceType):
        element = canonicalize_type(t.element_type)
        if isinstance(element, PyObjectType):
            return PyObjectType()
        return type(t)(element)
    return t


def to_engine(type_like):
    """The engine's Type for a TF Fold type (or type-like, or engine Type)."""
    if isinstance(type_like, _Engine):
        return type_like
    t = convert_to_type(type_like)
    if isinstance(t, TensorType):
        return _Engine.tensor(list(t.shape), t.dtype)
    if isinstance(t, TupleType):
        return _Engine.tuple([to_engine(i) for i in t])
    if isinstance(t, BroadcastSequenceType):
        return _Engine.broadcast(to_engine(t.element_type))
    if isinstance(t, SequenceType):
        return _Engine.sequence(to_engine(t.element_type))
    if isinstance(t, VoidType):
        return _Engine.void()
    return _Engine.input()


def from_engine(engine_type):
    """The TF Fold type of an engine Type (None stays None: not known yet)."""
    if engine_type is None:
        return None
    kind = engine_type.kind
    if kind == "tensor":
        return TensorType(engine_type.shape, engine_type.dtype)
    if kind == "tuple":
        return TupleType(*[from_engine(i) for i in engine_type.items])
    if kind == "sequence":
        return SequenceType(from_engine(engine_type.element))
    if kind == "broadcast":
        return BroadcastSequenceType(from_engine(engine_type.element))
    if kind == "void":
        return VoidType()
    return PyObjectType()
