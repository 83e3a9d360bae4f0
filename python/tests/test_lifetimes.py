"""Every object handed to Python keeps alive what it refers to: each test builds a result, drops
every other name for its parents (del + gc.collect()), then uses it and checks its values against
ones computed while the parents were alive. Before the bindings held them, these read freed
memory (SIGSEGV, or garbage such as metric names failing with basic_string::_M_create)."""

import gc

import numpy as np
import pytest

import weft
from weft import blocks as td
from weft.blocks import Type


def collect():
    for _ in range(3):
        gc.collect()


def test_a_var_keeps_its_tape():
    def make():
        with weft.Tape() as t:
            return weft.tanh(t.constant(weft.tensor(np.full((2, 2), 0.5, np.float32))))

    v = make()
    collect()
    assert v.shape == (2, 2)
    np.testing.assert_allclose(v.numpy(), np.tanh(np.full((2, 2), 0.5)), rtol=1e-6)
    # Still usable as an op input on that tape.
    np.testing.assert_allclose((v * 2.0).numpy(), 2 * np.tanh(np.full((2, 2), 0.5)), rtol=1e-6)


def test_vars_from_ops_operators_and_split_keep_their_tape():
    def make():
        t = weft.Tape()
        x = t.variable(np.arange(6, dtype=np.float32).reshape(2, 3))
        parts = weft.split(x * 1.0 + 1.0, 3, axis=1)
        return parts, weft.sum(x)

    parts, total = make()
    collect()
    assert [p.numpy().ravel().tolist() for p in parts] == [[1, 4], [2, 5], [3, 6]]
    assert total.item() == 15.0


def test_a_var_from_before_clear_is_refused():
    t = weft.Tape()
    old = t.constant(np.ones(2, np.float32))
    t.clear()
    t.constant(np.zeros(3, np.float32))  # a new node 0 with another value
    with pytest.raises(weft.Error, match="before its tape was cleared"):
        old + 1.0
    with pytest.raises(weft.Error, match="before its tape was cleared"):
        weft.tanh(old)


def leaf_model():
    return td.Map(td.Scalar() >> td.Function("twice", [Type.scalar()], lambda x: x * 2.0)) >> td.Sum()


def test_a_batch_result_keeps_its_compiler_and_tape():
    out = td.Compiler(leaf_model()).forward([[1, 2], [3, 4, 5]], weft.Tape()).output()
    collect()
    np.testing.assert_allclose(out.numpy(), [6.0, 24.0])

    result = td.Compiler(td.Scalar() >> td.Metric("m")).forward([1.5, 2.5], weft.Tape())
    collect()
    assert result.metric_names == ["m"]
    np.testing.assert_allclose(result.metric("m").values.numpy(), [1.5, 2.5])


def test_a_metric_and_its_values_outlive_the_result():
    values = td.Compiler(td.Scalar() >> td.Metric("m")).forward([1.5, 2.5], weft.Tape()).metric("m")
    collect()
    assert values.examples == [0, 1]
    np.testing.assert_allclose(values.values.numpy(), [1.5, 2.5])


def test_a_woven_batch_keeps_its_compiler_and_runs_later():
    batch = td.Compiler(leaf_model()).weave([[1], [2, 3]])
    collect()
    assert len(batch) == 2 and batch.depth >= 1 and batch.num_calls > 0


def test_a_run_result_keeps_batch_compiler_and_tape():
    compiler = td.Compiler(leaf_model())
    result = compiler.run(compiler.weave([[1], [2, 3]]), weft.Tape())
    del compiler
    collect()
    np.testing.assert_allclose(result.output().numpy(), [2.0, 10.0])


def test_a_forward_declaration_keeps_the_block_it_resolves_to():
    n = 4
    state = Type.vector(n)
    decl = td.ForwardDeclaration(Type.input(), state)
    leaf = td.GetItem("v") >> td.Vector(n) >> td.Function("leaf", [state], lambda x: x * 1.0)
    pair = td.GetItem("children") >> td.Record([decl(), decl()]) >> td.Function(
        "pair", [state, state], lambda a, b: a + b)
    # Written as the README writes it: the OneOf has no other name.
    decl.resolve_to(td.OneOf(lambda t: "children" in t, {False: leaf, True: pair}))
    del leaf, pair
    collect()
    compiler = td.Compiler(decl())
    tree = {"children": [{"v": [1] * n}, {"children": [{"v": [2] * n}, {"v": [3] * n}]}]}
    np.testing.assert_allclose(compiler.forward([tree], weft.Tape()).output().numpy(), [[6.0] * n])


def test_a_compiled_model_keeps_its_blocks_and_parameters():
    def make():
        store = weft.nn.ParameterStore(seed=1)
        fc = weft.nn.FC(store, "fc", 2, 3)
        weight, bias = fc.weight.numpy().copy(), fc.bias.numpy().copy()
        return td.Compiler(td.Vector(2) >> td.FCBlock(fc)), weight, bias

    compiler, weight, bias = make()
    collect()
    out = compiler.forward([[1.0, 0.0]], weft.Tape()).output().numpy()
    np.testing.assert_allclose(out, np.maximum(weight[0] + bias, 0)[None, :], rtol=1e-6)


def test_a_parameter_view_keeps_its_array():
    def make():
        return weft.Parameter("w", np.arange(4, dtype=np.float32))

    p = make()
    collect()
    assert p.numpy().tolist() == [0, 1, 2, 3]
    t = weft.from_numpy(np.arange(3, dtype=np.int32))
    collect()
    assert t.tolist() == [0, 1, 2]
