"""Autodiff from Python: every op of ops.def is bound, gradients against finite differences, and
errors arrive as weft.Error with the C++ message."""

import numpy as np
import pytest

import weft


def numeric_grad(f, x, eps=1e-2):
    """Central differences of a scalar function of a float32 array, in float64."""
    g = np.zeros(x.shape, dtype=np.float64)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + eps
        hi = f(x)
        x[i] = old - eps
        lo = f(x)
        x[i] = old
        g[i] = (hi - lo) / (2 * eps)
    return g


def check_grad(build, *shapes, seed=0, tol=2e-2):
    """build(*vars) -> scalar Var; checks every input's gradient."""
    rng = np.random.default_rng(seed)
    inputs = [rng.uniform(-1, 1, size=s).astype(np.float32) for s in shapes]
    tape = weft.Tape()
    vars_ = [tape.variable(a) for a in inputs]
    out = build(*vars_)
    tape.backward(out)
    for k, a in enumerate(inputs):
        def f(x, k=k):
            t = weft.Tape()
            vs = [t.constant(inputs[j] if j != k else x) for j in range(len(inputs))]
            return float(build(*vs).item())
        expected = numeric_grad(f, a.copy())
        np.testing.assert_allclose(vars_[k].grad.numpy(), expected, rtol=tol, atol=tol)


def test_every_op_is_bound():
    names = weft.op_names()
    assert len(names) >= 30 and "lstm_cell_state" in names
    for name in names:
        assert callable(getattr(weft, name)), name


def test_gradients_match_finite_differences():
    check_grad(lambda a: weft.sum(weft.tanh(a) * a), (3, 4))
    check_grad(lambda a, w, b: weft.sum(weft.sigmoid(weft.linear(a, w, b))), (2, 3), (3, 4), (4,))
    for fused in (weft.linear_tanh, weft.linear_sigmoid):
        check_grad(lambda a, w, b, f=fused: weft.sum(f(a, w, b)), (2, 3), (3, 4), (4,))
    check_grad(lambda a, b: weft.sum(weft.matmul(a, b, transpose_b=True)), (2, 3), (4, 3))
    check_grad(lambda a, b: weft.sum(weft.batch_matmul(a, b, transpose_a=True)), (2, 3, 2), (2, 3, 4))
    check_grad(lambda a: weft.mean(weft.softmax_cross_entropy(a, [0, 2, 1])), (3, 4))
    check_grad(lambda a, b: weft.sum(a / (weft.exp(b) + 1.0)), (2, 3), (2, 3))
    check_grad(lambda g, c: weft.sum(weft.lstm_cell_state(g, c)), (2, 16), (2, 8))
    # A tree cell's gates [f_1 f_2 | i | g | o]: the state from the first 16 columns in place
    # (hidden 4), the output from the last 4.
    check_grad(
        lambda g, c: weft.sum(weft.lstm_hidden(g, 16, weft.lstm_cell_state(g, c, hidden=4))),
        (2, 20),
        (2, 8),
    )
    check_grad(
        lambda x, w, b, c: weft.sum(weft.linear_lstm_cell_state(x, w, b, c)), (2, 3), (3, 16), (16,), (2, 8)
    )
    check_grad(lambda a: weft.l2_loss(weft.segment_mean(a, [0, 1, 1, 0], 2)), (4, 3))
    # Item 0 attends over its memory's 3 rows, item 1 over its first only.
    check_grad(lambda q, m: weft.sum(weft.ragged_attention(q, m, [3, 1]) * q), (2, 2, 3), (2, 3, 3))
    check_grad(lambda a: weft.sum(weft.concat(weft.split(a, 2)[::-1]) * a), (2, 6))


def test_dtypes_compare_select_and_cast():
    tape = weft.Tape()
    a = tape.constant(weft.tensor([5, -7, 2**40], dtype="int64"))
    b = tape.constant(weft.tensor([2, 2, 3], dtype="int64"))
    assert np.asarray((a / b).value).tolist() == [2, -4, 2**40 // 3]  # floor division
    mask = weft.greater(a, b)
    assert mask.value.dtype == "bool"
    assert np.asarray(mask.value).tolist() == [True, False, True]
    assert np.asarray(weft.where(mask, a, b).value).tolist() == [5, 2, 2**40]
    wide = weft.cast(a, "float64")
    assert np.asarray(wide.value).dtype == np.float64
    with pytest.raises(weft.Error, match="operands have different dtypes"):
        weft.add(a, wide)
    check_grad(lambda x, y: weft.sum(weft.where(weft.greater(x, y), x * 2.0, weft.minimum(x, y))),
               (3, 4), (3, 4))
    check_grad(lambda x: weft.sum(weft.abs(x) * weft.maximum(x, x * 0.5)), (2, 5))


def test_parameters_accumulate_and_share_numpy_memory():
    w_array = np.ones((3, 2), dtype=np.float32)
    w = weft.Parameter("w", w_array)
    assert w.value.data_ptr == w_array.ctypes.data  # a view, no copy
    tape = weft.Tape()
    with tape:
        x = tape.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
        loss = weft.sum(weft.matmul(x, w))
    tape.backward(loss)
    np.testing.assert_allclose(w.grad.numpy(), [[3, 3], [5, 5], [7, 7]])
    opt = weft.train.SGD([w])
    opt.step(0.5)
    assert w_array[0, 0] == pytest.approx(1 - 1.5)  # the optimizer updated the array in place
    w.zero_grad()
    assert np.all(w.grad.numpy() == 0)


def test_errors_carry_the_cpp_message():
    tape = weft.Tape()
    a = tape.constant(np.zeros((3, 4), np.float32))
    b = tape.constant(np.zeros((5, 2), np.float32))
    with pytest.raises(weft.Error, match=r"\[matmul\] inner dimensions differ: lhs \[3, 4\] vs rhs \[5, 2\]"):
        weft.matmul(a, b)
    with pytest.raises(ValueError):
        weft.add(a, b)
    tape.clear()
    assert len(tape) == 0


def test_forward_mode_with_an_rng_turns_dropout_on_inside_only():
    """Regression: forward_mode(training, rng) raised TypeError (a keep_alive tied the Rng to
    the bool argument)."""
    x = weft.Tape().variable(np.ones((4, 50), np.float32))
    assert not weft.nn.is_training()
    with weft.forward_mode(True, weft.Rng(3)):
        assert weft.nn.is_training()
        dropped = weft.nn.mode_dropout(x, 0.5).numpy()
    assert not weft.nn.is_training()
    assert set(np.unique(dropped)) <= {0.0, 2.0} and (dropped == 0).any()
    np.testing.assert_array_equal(weft.nn.mode_dropout(x, 0.5).numpy(), np.ones((4, 50)))
