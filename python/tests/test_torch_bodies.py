"""weft.torch, torch bodies in Weft: random tree programs whose cells are torch modules (blocks
Functions, a weft.flow operation) against the same torch code run eagerly per example (outputs,
the inputs' gradients on Weft's tape, the torch parameters' .grad); bodies that raise or return
the wrong thing fail naming the body; one torch call per batched call; no growth over steps."""

import gc
import weakref

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is absent (Debian: python3-torch)")

import weft  # noqa: E402
import weft.torch as wt  # noqa: E402
from weft import blocks as td  # noqa: E402
from weft import flow  # noqa: E402
from weft.blocks import Type  # noqa: E402

TOL = dict(rtol=1e-5, atol=1e-5)  # float32: Weft's differentiable values are float32


def random_tree(rng, depth, vocab):
    if depth == 0 or rng.random() < 0.3:
        return {"word": int(rng.integers(0, vocab))}
    return {"children": [random_tree(rng, depth - 1, vocab), random_tree(rng, depth - 1, vocab)]}


class Cell(torch.nn.Module):
    """A binary Tree-LSTM-like cell over [B, n] rows: two children's (h, c) -> (h, c)."""

    def __init__(self, n):
        super().__init__()
        self.gates = torch.nn.Linear(2 * n, 5 * n)
        self.n = n

    def forward(self, h1, c1, h2, c2):
        g = self.gates(torch.cat([h1, h2], 1))
        i, f1, f2, o, u = g.split(self.n, 1)
        c = torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(f1) * c1 + torch.sigmoid(f2) * c2
        return torch.sigmoid(o) * torch.tanh(c), c


class Leaf(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.proj = torch.nn.Linear(n, n)

    def forward(self, x):
        return torch.tanh(self.proj(x)), x


def make_program(seed, n, vocab):
    """A Tree-LSTM: a Weft-native embedding (its gradient comes back through the torch bodies to
    Weft's tape) then torch leaf and cell modules."""
    torch.manual_seed(seed)
    store = weft.nn.ParameterStore(seed=seed)
    emb = weft.nn.Embedding(store, "emb", vocab, n)
    leaf, cell = Leaf(n), Cell(n)
    state = Type.tuple(Type.vector(n), Type.vector(n))
    decl = td.ForwardDeclaration(Type.input(), state)
    leaf_block = (td.GetItem("word") >> td.Scalar("int32") >> td.EmbeddingBlock(emb)
                  >> wt.Function("leaf", [Type.vector(n)], leaf, state))
    node = (td.GetItem("children") >> td.Record([decl(), decl()])
            >> wt.Function("cell", [state, state], cell, state))
    model = td.OneOf(lambda t: "word" in t, {True: leaf_block, False: node})
    decl.resolve_to(model)
    return td.Compiler(model >> td.GetItem(0), threads=1), store, emb, leaf, cell


def eager(tree, table, leaf, cell):
    """The same model in plain torch, one example, one node at a time."""
    if "word" in tree:
        return leaf(table[tree["word"]].unsqueeze(0))
    (h1, c1), (h2, c2) = (eager(t, table, leaf, cell) for t in tree["children"])
    return cell(h1, c1, h2, c2)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_tree_programs_match_eager_torch(seed):
    rng = np.random.default_rng(seed)
    n, vocab = int(rng.integers(2, 9)), 7
    compiler, store, emb, leaf, cell = make_program(seed, n, vocab)
    trees = [random_tree(rng, int(rng.integers(0, 6)), vocab)
             for _ in range(int(rng.integers(1, 12)))]
    weights = torch.randn(len(trees), n)

    tape = weft.Tape()
    with tape:
        h = compiler.forward(trees, tape).output()
        loss = weft.sum(h * tape.constant(weights.numpy()))
    tape.backward(loss)
    weft_h = torch.from_dlpack(h.value).clone()
    weft_grads = [p.grad.clone() for p in list(leaf.parameters()) + list(cell.parameters())]
    emb_grad = np.asarray(store.get("emb/table").grad).copy()

    for p in list(leaf.parameters()) + list(cell.parameters()):
        p.grad = None
    table = torch.tensor(np.asarray(store.get("emb/table").value), requires_grad=True)
    eager_h = torch.cat([eager(t, table, leaf, cell)[0] for t in trees])
    (eager_h * weights).sum().backward()

    torch.testing.assert_close(weft_h, eager_h.detach(), **TOL)
    for got, want in zip(weft_grads, list(leaf.parameters()) + list(cell.parameters())):
        torch.testing.assert_close(got, want.grad, **TOL)
    np.testing.assert_allclose(emb_grad, table.grad.numpy(), **TOL)  # back through the bodies


def test_bodies_backward_through_the_engine_not_torch_s_python_front(monkeypatch):
    """Each torch body's backward goes straight to autograd's engine (torch.autograd.backward's
    Python front costs ~5 us a call, one call per body and batch): the front is never called
    during Weft's backward, and the gradients are still eager torch's."""
    rng = np.random.default_rng(5)
    n, vocab = 4, 7
    compiler, store, emb, leaf, cell = make_program(5, n, vocab)
    trees = [random_tree(rng, 3, vocab) for _ in range(6)]
    tape = weft.Tape()
    with tape:
        h = compiler.forward(trees, tape).output()
        loss = weft.sum(h)
    fronts = []
    public = torch.autograd.backward
    monkeypatch.setattr(torch.autograd, "backward",
                        lambda *a, **k: fronts.append(1) or public(*a, **k))
    tape.backward(loss)
    monkeypatch.undo()
    assert fronts == []
    weft_grads = [p.grad.clone() for p in list(leaf.parameters()) + list(cell.parameters())]
    for p in list(leaf.parameters()) + list(cell.parameters()):
        p.grad = None
    table = torch.tensor(np.asarray(store.get("emb/table").value))
    torch.cat([eager(t, table, leaf, cell)[0] for t in trees]).sum().backward()
    for got, want in zip(weft_grads, list(leaf.parameters()) + list(cell.parameters())):
        torch.testing.assert_close(got, want.grad, **TOL)


def test_one_torch_call_per_batched_call_and_memory_is_shared():
    seen = []

    def body(x):
        seen.append((x.shape[0], x.data_ptr()))
        return x * 2

    f = wt.Function("double", [Type.vector(3)], body, Type.vector(3))
    compiler = td.Compiler(td.Map(td.Vector(3) >> f) >> td.Sum())
    tape = weft.Tape()
    out = compiler.forward([[[1, 2, 3]] * 4, [[0, 1, 0]] * 6], tape).output()
    assert [rows for rows, _ in seen] == [10]  # ten nodes, one call
    np.testing.assert_allclose(out.numpy(), [[8, 16, 24], [0, 12, 0]])
    x = tape.variable(np.ones((2, 3), np.float32))
    y = wt.call(lambda t: t, x)  # an identity body hands back Weft's own memory
    assert torch.from_dlpack(y.value).data_ptr() == torch.from_dlpack(x.value).data_ptr()


def test_input_gradients_of_a_direct_call_match_torch():
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 3)
    x0 = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    tape = weft.Tape()
    with tape:
        x = tape.variable(x0)
        y, z = wt.call(lambda t: (torch.tanh(lin(t)), t * t), x)
        loss = weft.sum(y * y) + weft.sum(z)
    tape.backward(loss)
    xt = torch.tensor(x0, requires_grad=True)
    lin.zero_grad()
    yt = torch.tanh(lin(xt))
    ((yt * yt).sum() + (xt * xt).sum()).backward()
    np.testing.assert_allclose(np.asarray(x.grad), xt.grad.numpy(), **TOL)
    w_grad = lin.weight.grad.clone()
    lin.zero_grad()
    tape2 = weft.Tape()
    with tape2:
        x = tape2.variable(x0)
        y, z = wt.call(lambda t: (torch.tanh(lin(t)), t * t), x)
        tape2.backward(weft.sum(z))  # only the second output has a gradient
    np.testing.assert_allclose(np.asarray(x.grad), 2 * x0, **TOL)
    assert lin.weight.grad is None or not lin.weight.grad.any()
    assert w_grad.abs().sum() > 0


def test_a_flow_operation_with_a_torch_body_matches_eager_torch():
    torch.manual_seed(3)
    n = 4
    cell = torch.nn.GRUCell(n, n)
    loom = flow.Loom()
    hidden = loom.type([n])
    step = wt.op(loom, "step", [hidden, hidden], [hidden], lambda x, h: cell(x, h))
    starts = [np.random.default_rng(i).standard_normal(n).astype(np.float32) for i in range(6)]

    def steps_until_positive(ctx, start):  # decides as it goes: the lengths differ
        h = ctx.constant(hidden, start)
        for k in range(1, 7):
            h = ctx.call(step, h, h)
            row = yield h
            if row[0] > 0:
                break
        return k, h

    tape = weft.Tape()
    with tape:
        engine = flow.Engine(loom, tape)
        for s in starts:
            engine.admit(steps_until_positive, s)
        engine.run()
        results = [engine.result(i) for i in range(len(starts))]
        final = engine.gather([h for _, h in results])
        weights = torch.randn(len(starts), n)
        tape.backward(weft.sum(final * tape.constant(weights.numpy())))
    got = [p.grad.clone() for p in cell.parameters()]
    assert engine.stats["batched_calls"] < engine.stats["calls"]  # batched across examples

    cell.zero_grad()
    rows, lengths = [], []
    for s in starts:  # eager torch, one example at a time
        h = torch.tensor(s).unsqueeze(0)
        for k in range(1, 7):
            h = cell(h, h)
            if h[0, 0] > 0:
                break
        rows.append(h)
        lengths.append(k)
    assert [k for k, _ in results] == lengths
    eager = torch.cat(rows)
    torch.testing.assert_close(torch.from_dlpack(final.value), eager.detach(), **TOL)
    (eager * weights).sum().backward()
    for g, p in zip(got, cell.parameters()):
        torch.testing.assert_close(g, p.grad, **TOL)


def test_bodies_that_fail_are_named():
    x_block = td.Vector(2)

    def boom(x):
        raise RuntimeError("no luck")

    kept = []

    cases = [
        (boom, "body 'boom' raised RuntimeError: no luck"),
        (lambda x: x[:, :1], r"body 'bad_shape'.*\[2, 1\].*declares \[2, 2\]"),
        (lambda x: x.double(), r"body 'bad_dtype'.*torch.float64"),
        (lambda x: x.sum(), r"body 'no_batch'.*batch axis"),
        (lambda x: 3, r"body 'not_tensor'.*int, not a torch.Tensor"),
        (lambda x: kept.append(x) or x * 2, r"body 'keeps' kept input 0 \[2, 2\] after the call"),
    ]
    for fn, message in cases:
        name = getattr(fn, "__name__", "")
        name = "boom" if name == "boom" else message.split("'")[1]
        f = wt.Function(name, [Type.vector(2)], fn, Type.vector(2))
        with pytest.raises(weft.Error, match=message):
            td.Compiler(x_block >> f).forward([[1, 2], [3, 4]], weft.Tape())


def test_a_body_raising_keyboard_interrupt_stops_the_run():
    def body(x):
        raise KeyboardInterrupt

    f = wt.Function("stop", [Type.vector(2)], body, Type.vector(2))
    with pytest.raises(KeyboardInterrupt):
        td.Compiler(td.Vector(2) >> f).forward([[1, 2]], weft.Tape())


def _interrupting_hook(t):
    raise KeyboardInterrupt  # Ctrl-C landing while torch runs a Python hook from C++


def test_ctrl_c_inside_torch_s_hooks_stops_the_run():
    """torch hands a KeyboardInterrupt raised in a hook it calls from C++ back as RuntimeError
    ("KeyboardInterrupt: ..."); it must stop the run as KeyboardInterrupt, in a body's forward
    and in torch's backward inside Weft's, not come out as the body's error."""

    def pack_interrupted(x):
        with torch.autograd.graph.saved_tensors_hooks(_interrupting_hook, lambda t: t):
            return torch.tanh(x)

    def unpack_interrupted(x):
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t, _interrupting_hook):
            return torch.tanh(x)

    tape = weft.Tape()
    with tape:
        x = tape.variable(np.ones((2, 2), np.float32))  # recorded: torch saves tensors
        with pytest.raises(KeyboardInterrupt):
            wt.call(pack_interrupted, x, name="stop_forward")
        loss = weft.sum(wt.call(unpack_interrupted, x, name="stop_backward"))
    with pytest.raises(KeyboardInterrupt):
        tape.backward(loss)


def test_backward_errors_are_named():
    class Bad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise RuntimeError("broken gradient")

    tape = weft.Tape()
    with tape:
        x = tape.variable(np.ones((2, 2), np.float32))
        y = wt.call(Bad.apply, x, name="bad_grad")
        loss = weft.sum(y)
    message = r"^\[torch\] body 'bad_grad': the backward raised RuntimeError"
    with pytest.raises(weft.Error, match=message):
        tape.backward(loss)


def test_many_steps_hold_nothing():
    """The torch graphs, inputs and outputs of a step go with the tape's clear()."""
    n = 6
    compiler, store, emb, leaf, cell = make_program(7, n, 5)
    rng = np.random.default_rng(7)
    trees = [random_tree(rng, 4, 5) for _ in range(8)]
    tape = weft.Tape()

    def step():
        with tape:
            h = compiler.forward(trees, tape).output()
            tape.backward(weft.sum(h))
        tape.clear()

    for _ in range(5):
        step()
    gc.collect()
    before = len([o for o in gc.get_objects() if isinstance(o, torch.Tensor)])
    for _ in range(200):
        step()
    gc.collect()
    after = len([o for o in gc.get_objects() if isinstance(o, torch.Tensor)])
    assert after <= before


def test_tensors_a_body_saves_go_with_the_tape_without_a_collection():
    """What torch autograd saves inside a body (its inputs, its outputs) is freed as soon as the
    tape is cleared, with no cycle left for the garbage collector: on every torch, whether or not
    it needs weft.torch's detached-alias hooks (recent PyTorch holds a saved tensor's Python
    object, so there an output saved by its own graph would be a cycle)."""
    lin = torch.nn.Linear(3, 3)
    seen = []

    def body(x, y):  # mul saves both inputs, sigmoid and tanh save their outputs
        out = torch.sigmoid(lin(x * y)), torch.tanh(y)
        seen.extend(weakref.ref(t) for t in (x, y, *out))
        return out

    tape = weft.Tape()
    gc.disable()
    try:
        with tape:
            x = tape.variable(np.ones((4, 3), np.float32))
            y = tape.variable(np.full((4, 3), 0.5, np.float32))
            a, b = wt.call(body, x, y, name="saves")
            tape.backward(weft.sum(a) + weft.sum(b))
        assert np.asarray(x.grad).any() and lin.weight.grad is not None
        del a, b
        tape.clear()
        assert [r() is None for r in seen] == [True] * 4
    finally:
        gc.enable()


def test_bodies_record_exactly_when_the_tape_does_whatever_torch_s_grad_mode():
    """A body runs with torch autograd on exactly when Weft's tape records gradients: a recording
    tape inside torch.no_grad() still gets the body's gradients; a tape that records none runs
    the body without autograd even where torch's grad mode is on."""
    lin = torch.nn.Linear(2, 2)
    modes = []

    def body(x):
        modes.append(torch.is_grad_enabled())
        return lin(x)

    x0 = np.array([[1.0, 2.0]], np.float32)
    for torch_mode in (False, True):
        with torch.set_grad_enabled(torch_mode):
            lin.zero_grad()
            tape = weft.Tape()
            with tape:
                x = tape.variable(x0)
                tape.backward(weft.sum(wt.call(body, x, name="records")))
            xt = torch.tensor(x0, requires_grad=True)
            with torch.enable_grad():
                lin(xt).sum().backward()
            np.testing.assert_allclose(np.asarray(x.grad), xt.grad.numpy(), **TOL)
            quiet = weft.Tape()
            quiet.grad_enabled = False
            with quiet:
                y = wt.call(body, quiet.variable(x0), name="records")
            assert not y.requires_grad
            assert torch.is_grad_enabled() == torch_mode  # the caller's mode is left as it was
    assert modes == [True, False, True, False]


def test_tf_fold_spelling_infers_types_and_nests_tuples():
    torch.manual_seed(8)
    lin = torch.nn.Linear(2, 3)
    f = wt.Function(lambda a, b: (lin(a + b), a * b))  # types from composition, as td.Function
    block = td.Record([td.Vector(2), td.Vector(2)]) >> f
    assert repr(block.output_type) == "TupleType(TensorType((3,), 'float32'), " \
                                      "TensorType((2,), 'float32'))"
    pairs = [[[1, 2], [3, 4]], [[0, 1], [1, 0]], [[-1, 2], [0.5, 0]]]
    tape = weft.Tape()
    with tape:
        out = td.Compiler(block).forward(pairs, tape)
        tape.backward(weft.sum(out.output(0)) + weft.sum(out.output(1)))
    got = [p.grad.clone() for p in lin.parameters()]
    lin.zero_grad()
    a, b = (torch.tensor([p[k] for p in pairs], dtype=torch.float32) for k in (0, 1))
    want0, want1 = lin(a + b), a * b
    (want0.sum() + want1.sum()).backward()
    torch.testing.assert_close(torch.from_dlpack(out.output(0).value), want0.detach(), **TOL)
    torch.testing.assert_close(torch.from_dlpack(out.output(1).value), want1, **TOL)
    for g, p in zip(got, lin.parameters()):
        torch.testing.assert_close(g, p.grad, **TOL)


def test_weft_dropout_draws_weft_s_masks():
    """wt.WeftDropout in a torch body multiplies by the mask Weft's mode_dropout draws from the
    same Rng at the same point; eval() and no training forward_mode pass the input through."""
    x = torch.rand(6, 7) + 0.5
    drop = wt.WeftDropout(0.3)
    with weft.forward_mode(True, weft.Rng(11)):
        got = [drop(x), drop(x)]
    tape = weft.Tape()
    with weft.forward_mode(True, weft.Rng(11)), tape:
        xv = tape.constant(weft.from_dlpack(x))
        want = [weft.nn.mode_dropout(xv, 0.3), weft.nn.mode_dropout(xv, 0.3)]
    for g, w in zip(got, want):
        torch.testing.assert_close(g, torch.from_dlpack(w.value), rtol=0, atol=0)
    assert not torch.equal(got[0], got[1]) and (got[0] == 0).any()
    assert torch.equal(drop(x), x)  # no forward_mode: no dropout
    with weft.forward_mode(True, weft.Rng(11)):
        assert torch.equal(drop.eval()(x), x)
    with pytest.raises(weft.Error, match=r"WeftDropout: p = 1.0 is outside \[0, 1\)"):
        wt.WeftDropout(1.0)
