"""Property-based tests of the Python surface (Hypothesis): random shapes (huge, negative, empty),
dtypes, strided, non-contiguous, read-only and memory-mapped arrays, and Python values of every kind and nesting depth into
weft.zeros, weft.tensor, from_numpy, Parameter, Block.eval, predict and the blocks' constructors.
The property: the call either succeeds with the right result or raises one of the documented
exception types (weft.Error, a ValueError; TypeError for arguments of the wrong kind) with a
message of its own, never pybind11's internals and never a crash. Derandomized (the same examples
on every run, so a CI failure reproduces) and sized to run in seconds."""

import math
import os
import tempfile

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="Hypothesis is absent (Debian: python3-hypothesis)")
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis.configuration import set_hypothesis_home_dir  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

import weft  # noqa: E402
from weft import blocks as td  # noqa: E402

# Hypothesis caches (its Unicode tables) outside the source tree, which ctest runs in.
set_hypothesis_home_dir(os.path.join(tempfile.gettempdir(), "weft-hypothesis"))
settings.register_profile("weft", derandomize=True, deadline=None, database=None, max_examples=200,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile("weft")

DOCUMENTED = (weft.Error, TypeError)
# The TF Fold spellings of weft.blocks raise what TF Fold raised for the same mistakes
# (docs/coming_from_tensorflow_fold.md): also ValueError, RuntimeError and AssertionError, and
# OverflowError where it converts a size with int() (int(inf)).
FOLD_ERRORS = (*DOCUMENTED, ValueError, RuntimeError, AssertionError, OverflowError)
DTYPES = ["float32", "float64", "int32", "int64", "bool", "float16", "int8", "uint8", "complex64", ""]
# Allocations the tests may really make; shapes between this and a 64-bit overflow are skipped
# (they are valid requests that would only exhaust the machine).
MAX_ELEMENTS = 1 << 16


def expect_documented_error(error, documented=DOCUMENTED):
    assert isinstance(error, documented), f"{type(error).__name__}: {error}"
    message = str(error)
    assert message and "Unable to cast Python instance" not in message, message


def elements(shape):
    return math.prod(shape) if all(d >= 0 for d in shape) else None


extents = st.one_of(st.integers(-3, 6), st.integers(2**31 - 2, 2**31 + 2), st.integers(2**62 - 1, 2**63 - 1),
                    st.integers(-(2**63), -1), st.integers(2**63, 2**70))
shapes = st.lists(extents, max_size=7)


def allocatable(shape):
    n = elements(shape)
    return n is None or n <= MAX_ELEMENTS or n >= 2**63 or any(d >= 2**63 for d in shape) or len(shape) > 6


ITEMSIZE = {"float32": 4, "float64": 8, "int32": 4, "int64": 8, "bool": 1, "": 4}


def valid_request(shape, dtype):
    if dtype not in ITEMSIZE or len(shape) > 6 or any(d < 0 or d >= 2**63 for d in shape):
        return False
    return math.prod(shape) * ITEMSIZE[dtype] < 2**63 or 0 in shape


@given(shapes, st.sampled_from(DTYPES))
def test_zeros_of_any_shape(shape, dtype):
    assume(allocatable(shape))
    try:
        t = weft.zeros(shape, dtype or "float32")
    except DOCUMENTED as e:
        expect_documented_error(e)
        assert not valid_request(shape, dtype), f"{shape} {dtype}: {e}"
        return
    assert valid_request(shape, dtype)
    assert t.shape == tuple(shape) and t.dtype == (dtype or "float32")
    assert t.size == math.prod(shape)
    if t.size:  # (NumPy refuses views of empty shapes whose nominal byte count overflows)
        assert not np.asarray(t).any()


@given(shapes)
def test_block_types_and_tensor_blocks_of_any_shape(shape):
    assume(allocatable(shape))
    for make in (lambda: td.Type.tensor(shape), lambda: td.AsTensor(shape).output_type,
                 lambda: td.Zeros(td.Type.tensor(shape)).output_type):
        try:
            made = make()
        except DOCUMENTED as e:
            expect_documented_error(e)
            assert not valid_request(shape, "float32"), str(e)
            continue
        assert made.shape == tuple(shape)


def arrays_of_every_layout():
    dtypes = st.sampled_from([np.float32, np.float64, np.float16, np.int32, np.int64, np.int8, np.uint8,
                              np.uint64, np.bool_, np.complex64, ">f4"])
    base = hnp.arrays(dtypes, hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5))
    views = st.sampled_from(["as is", "transposed", "every other", "reversed", "fortran", "unaligned",
                             "read-only", "read-only memmap", "writable memmap", "bytes"])
    return st.tuples(base, views).map(lambda p: relayout(*p))


MAPPED = tempfile.TemporaryDirectory(prefix="weft-properties-")
mapped_files = iter(range(1 << 62))


def mapped(array, mode):
    """The array's values in a file mapped with np.memmap: "r" maps it read-only (writes would fault)."""
    if array.nbytes == 0 or array.dtype.itemsize == 0:  # (an empty file cannot be mapped)
        return array
    path = os.path.join(MAPPED.name, "%d.bin" % next(mapped_files))
    array.tofile(path)
    return np.memmap(path, dtype=array.dtype, mode=mode, shape=array.shape)


def relayout(array, view):
    if view == "read-only":
        array = array.copy()
        array.flags.writeable = False
        return array
    if view in ("read-only memmap", "writable memmap"):
        return mapped(array, "r" if view.startswith("read-only") else "r+")
    if view == "bytes":  # the memory of an immutable bytes object
        return np.frombuffer(array.tobytes(), array.dtype).reshape(array.shape)
    if view == "transposed":
        return array.T
    if view == "every other" and array.ndim:
        return array[::2]
    if view == "reversed" and array.ndim:
        return array[::-1]
    if view == "fortran":
        return np.asfortranarray(array)
    if view == "unaligned" and array.size:
        raw = np.zeros(array.nbytes + 1, np.uint8)[1:]
        return raw.view(array.dtype).reshape(array.shape) if array.dtype.itemsize else array
    return array


def viewable(array, dtypes):
    return (array.dtype.isnative and array.dtype.name in dtypes and array.flags.c_contiguous
            and array.flags.writeable and array.ctypes.data % array.dtype.itemsize == 0)


def check_writable_copy(array):
    """weft.tensor copies whatever memory it reads, read-only and mapped included."""
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # float64 -> float32 may overflow to inf
            view = np.asarray(weft.tensor(array))
    except DOCUMENTED as e:
        expect_documented_error(e)
        return
    assert view.shape == array.shape and view.flags.writeable


@given(arrays_of_every_layout())
def test_from_numpy_is_a_view_or_a_named_refusal(array):
    check_writable_copy(array)
    try:
        t = weft.from_numpy(array)
    except DOCUMENTED as e:
        expect_documented_error(e)
        assert not viewable(array, ("float32", "float64", "int32", "int64", "bool")), f"{array.dtype}: {e}"
        return
    assert viewable(array, ("float32", "float64", "int32", "int64", "bool"))
    assert t.shape == array.shape and t.data_ptr == array.ctypes.data
    np.testing.assert_array_equal(np.asarray(t), array)


@given(arrays_of_every_layout())
def test_parameter_views_or_refuses_arrays_and_adam_updates_the_view(array):
    # Read-only memory (a read-only memmap, bytes) must be refused here: Adam writes the update.
    try:
        p = weft.Parameter("p", array)
    except DOCUMENTED as e:
        expect_documented_error(e)
        assert not viewable(array, ("float32",)), str(e)
        return
    assert viewable(array, ("float32",)) and p.value.data_ptr == array.ctypes.data  # never a copy
    before = array.copy()
    with weft.Tape() as tape:
        tape.backward(weft.sum(weft.Var(p)))  # a gradient of 1 everywhere: Adam moves each by 0.1
    weft.train.Adam([p]).step(0.1)
    moved = np.isfinite(before) & (np.abs(before) < 1e3)  # (larger ones round to themselves)
    assert (array[moved] != before[moved]).all()  # the update reached the caller's array


# Python values of every kind: None, bools, ints of any size, floats (nan, inf), text (lone
# surrogates included), bytes, NumPy scalars, and lists / tuples / dicts of them.
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(-(2**80), 2**80),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6),
                    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), st.binary(max_size=4),
                    st.builds(np.float32, st.floats(-1e6, 1e6, width=32)), st.builds(np.int64, st.integers(-5, 5)))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.tuples(inner, inner),
    st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 3)), inner, max_size=3)), max_leaves=20)


def deepen(value, levels):
    for _ in range(levels):
        value = [value]
    return value


BLOCKS = [td.Identity(), td.GetItem(0), td.GetItem("a"), td.Scalar(), td.Scalar("int64"), td.Scalar("bool"),
          td.Vector(2), td.Vector(2, "int32"), td.Map(td.Scalar()), td.Map(td.Scalar()) >> td.Sum(), td.Length(),
          td.Slice(start=1), td.Nth(), td.OneHot(0, 3), td.Record({"a": td.Scalar()}), td.Optional(td.Scalar())]


@given(values, st.sampled_from(range(len(BLOCKS))), st.sampled_from([0, 0, 1, 200, 300, 5000]))
def test_block_eval_of_any_value(value, which, depth):
    try:
        BLOCKS[which].eval(deepen(value, depth))
    except DOCUMENTED as e:
        expect_documented_error(e)


@pytest.fixture(scope="module")
def calculator():
    return weft.models.create("calculator", hidden=4, max_train=8, max_eval=4, seed=1)


@given(st.lists(st.one_of(values, st.text(max_size=40)), max_size=3), st.sampled_from([0, 300]))
@settings(max_examples=100)
def test_predict_of_any_value(calculator, examples, depth):
    try:
        out = calculator.predict([deepen(e, depth) for e in examples])
    except DOCUMENTED as e:
        expect_documented_error(e)
        return
    assert len(out) == len(examples)


@given(values)
def test_tensor_of_any_value(value):
    try:
        t = weft.tensor(value)
    except (*DOCUMENTED, ValueError) as e:  # NumPy's own ValueError for ragged lists
        assert str(e)
        return
    assert np.asarray(t).shape == np.asarray(value).shape


@given(st.one_of(scalars, st.integers(-(2**70), 2**70)), st.one_of(scalars, st.integers(-(2**70), 2**70)),
       st.sampled_from(DTYPES))
def test_block_constructors_with_any_arguments(a, b, dtype):
    makers = [lambda: td.Vector(a, dtype), lambda: td.OneHot(a, b, dtype), lambda: td.GetItem(a),
              lambda: td.Slice(start=a, stop=b), lambda: td.NGrams(a), lambda: td.Concat(a), lambda: td.Scalar(dtype),
              lambda: td.Metric(a), lambda: td.OneHotFromList([a, b]), lambda: td.Type.vector(a, dtype),
              lambda: td.FromTensor(a), lambda: td.Record({"x": td.Scalar(), "y": a})]
    for make in makers:
        try:
            make()
        except FOLD_ERRORS as e:
            expect_documented_error(e, FOLD_ERRORS)


# ---- weft.flow handles of a foreign engine or Loom (issue 41, item 6) -------------------------
# Two Looms built alike (so their type and operation ids coincide) and engines on each: a handle
# used with an engine or Loom that does not own it must raise weft.Error saying so, never read or
# run what the other owner has under the same id; a handle of the right owner works.

FLOW_USES = ["value", "gather", "call_arg", "yield", "read", "call_op", "constant_type",
             "import_type", "op_type"]
FLOW_OWNERS = ["own", "other_engine", "other_loom", "int", "none", "array"]


def flow_world():
    from weft import flow
    world = {}
    for name in ("a", "b"):
        loom = flow.Loom()
        row = loom.type([2])
        ops = [loom.op(f"sum{k}", [row] * k, [row], lambda *xs: sum(xs[1:], xs[0]))
               for k in (1, 2, 3)]
        world[name] = (loom, row, ops)
    loom_a, row_a, _ = world["a"]
    loom_b, row_b, _ = world["b"]
    world["other_engine"] = flow.Engine(loom_a)
    world["other_engine_vals"] = world["other_engine"].import_rows(-np.ones((3, 2), np.float32), row_a)
    world["other_loom"] = flow.Engine(loom_b)
    world["other_loom_vals"] = world["other_loom"].import_rows(-2 * np.ones((3, 2), np.float32), row_b)
    return world


@pytest.fixture(scope="module")
def flow_handles():
    return flow_world()


def flow_handle(world, kind, owner, own_vals, i):
    junk = {"int": 0, "none": None, "array": np.zeros(2, np.float32)}
    if owner in junk:
        return junk[owner]
    loom = "b" if owner == "other_loom" else "a"
    if kind == "val":
        return own_vals[i] if owner == "own" else world[f"{owner}_vals"][i]
    return world[loom][1] if kind == "type" else world[loom][2][i]


@given(st.sampled_from(FLOW_USES), st.lists(st.sampled_from(FLOW_OWNERS), min_size=1, max_size=3))
@settings(max_examples=150)
def test_flow_handles_of_a_foreign_engine_or_loom_raise(flow_handles, use, owners):
    from weft import flow
    world = flow_handles
    if use in ("value", "constant_type", "import_type"):
        owners = owners[:1]  # these take one handle
    loom, row, ops = world["a"]
    engine = flow.Engine(loom)
    rows = np.arange(6, dtype=np.float32).reshape(3, 2)
    own_vals = engine.import_rows(rows, row)
    kind = {"call_op": "op", "constant_type": "type", "import_type": "type", "op_type": "type"}
    kind = kind.get(use, "val")
    handles = [flow_handle(world, kind, owner, own_vals, i) for i, owner in enumerate(owners)]
    valid = all(o == "own" or (o == "other_engine" and kind != "val") for o in owners)
    if use == "call_op":  # the operation of arity len(owners), called with own values
        handles = [flow_handle(world, "op", owners[0], own_vals, len(owners) - 1)]
        valid = owners[0] in ("own", "other_engine")

    def program(ctx):
        if use == "call_arg":
            return (yield ctx.call(ops[len(handles) - 1], *handles))
        if use == "call_op":
            return (yield ctx.call(handles[0], *own_vals[:len(owners)]))
        if use == "yield":
            return (yield handles)
        if use == "read":
            return (yield ctx.read(*handles))
        return (yield ctx.constant(handles[0], [1.0, 2.0]))

    try:
        if use == "value":
            got = engine.value(handles[0])
            expected = rows[0]
        elif use == "gather":
            got = engine.gather(handles).numpy()
            expected = rows[:len(handles)]
        elif use == "import_type":
            got = engine.value(engine.import_rows(rows, handles[0])[2])
            expected = rows[2]
        elif use == "op_type":
            op = loom.op(f"op{id(handles)}", handles, [row], lambda *xs: xs[0])
            got, expected = op.outputs, 1
        else:
            engine.admit(program)
            engine.run()
            got = engine.result(0)
            expected = {"call_arg": rows[:len(handles)].sum(0), "call_op": rows[:len(owners)].sum(0),
                        "yield": list(rows[:len(handles)]), "read": list(rows[:len(handles)]),
                        "constant_type": np.array([1.0, 2.0], np.float32)}[use]
    except Exception as error:  # noqa: BLE001 -- the property is about which errors
        assert not valid, f"{use} {owners}: {error}"
        expect_documented_error(error)
        first_bad = next(o for o in owners if o != "own" and (o != "other_engine" or kind == "val"))
        if first_bad in ("int", "none", "array"):
            assert use == "call_op" or "expected a" in str(error) or "yielded" in str(error), error
        else:
            assert ("another engine" if kind == "val" else "another Loom") in str(error), error
        return
    assert valid, f"{use} {owners} was accepted"
    np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))
