"""weft.torch.Fold, torchfold's API over Weft: README-style trees (leaf / init / child methods),
multi-output methods with split, nobatch arguments, int and tensor arguments and long chains give
the values and gradients (model parameters, tensors passed in) of the same methods run eagerly
one call at a time."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is absent (Debian: python3-torch)")

import weft  # noqa: E402
from weft.torch import Fold, Unfold  # noqa: E402

TOL = dict(rtol=1e-5, atol=1e-5)


class Model(torch.nn.Module):
    """Batched methods, as torchfold asks: each takes [B, ...] tensors (ints as a LongTensor)."""

    def __init__(self, vocab, n):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, n)
        self.cell = torch.nn.Linear(2 * n, n)
        self.lstm = torch.nn.LSTMCell(n, n)
        self.start = torch.nn.Parameter(torch.randn(1, n))
        self.n = n

    def leaf(self, word):
        return self.embed(word)

    def init(self):
        return torch.tanh(self.start)

    def child(self, prev, child):
        return torch.tanh(self.cell(torch.cat([prev, child], 1)))

    def step(self, x, h, c):
        return self.lstm(x, (h, c))  # two outputs: split(2)

    def concat(self, *rows):
        return torch.cat(rows, 0)

    def logits(self, enc, table):
        return enc @ table.t()


def random_tree(rng, depth, vocab):
    if depth == 0 or rng.random() < 0.35:
        return int(rng.integers(0, vocab))
    return [random_tree(rng, depth - 1, vocab) for _ in range(int(rng.integers(1, 4)))]


def encode(f, tree):
    """The README's dfs: a leaf, or init then one child call per child."""
    if isinstance(tree, int):
        return f.add("leaf", tree)
    prev = f.add("init")
    for child in tree:
        prev = f.add("child", prev, encode(f, child))
    return prev


class Eager:
    """Every add() runs at once, one call at a time (torchfold's Unfold)."""

    def __init__(self, model):
        self.model = model

    def add(self, op, *args):
        values = [torch.tensor([a]) if isinstance(a, int) else a for a in args]
        return getattr(self.model, op)(*values)


def grads(model):
    return [p.grad.clone() if p.grad is not None else torch.zeros_like(p)
            for p in model.parameters()]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_readme_trees_match_eager_calls(seed):
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    vocab, n = 11, 6
    model = Model(vocab, n)
    trees = [random_tree(rng, 4, vocab) for _ in range(10)]
    weights = torch.randn(len(trees), n)

    f = Fold()
    roots = [encode(f, t) for t in trees]
    calls = []
    model.child = lambda prev, child: calls.append(len(prev)) or Model.child(model, prev, child)
    (enc,) = f.apply(model, [roots])
    del model.child
    assert len(calls) == len({s for s, ops in f.steps.items() if "child" in ops})  # per step
    assert sum(calls) == sum(len(ops["child"]) for ops in f.steps.values())
    (enc * weights).sum().backward()
    got_values, got_grads = enc.detach().clone(), grads(model)

    model.zero_grad()
    eager = Eager(model)
    want = torch.cat([encode(eager, t) for t in trees])
    (want * weights).sum().backward()
    torch.testing.assert_close(got_values, want.detach(), **TOL)
    for g, w in zip(got_grads, grads(model)):
        torch.testing.assert_close(g, w, **TOL)


def test_split_tensor_arguments_and_their_gradients():
    torch.manual_seed(4)
    n, lengths = 5, [2, 3, 5, 1]
    model = Model(3, n)
    inputs = [[torch.randn(1, n, requires_grad=True) for _ in range(k)] for k in lengths]
    starts = [(torch.randn(1, n), torch.randn(1, n)) for _ in lengths]

    f = Fold()
    finals = []
    for xs, (h, c) in zip(inputs, starts):
        for x in xs:
            h, c = f.add("step", x, h, c).split(2)
        finals.append(h)
    (h_all,) = f.apply(model, [finals])
    h_all.square().sum().backward()
    got = [x.grad.clone() for xs in inputs for x in xs] + grads(model)

    for xs in inputs:
        for x in xs:
            x.grad = None
    model.zero_grad()
    eager = Eager(model)
    finals = []
    for xs, (h, c) in zip(inputs, starts):
        for x in xs:
            h, c = eager.add("step", x, h, c)
        finals.append(h)
    want_h = torch.cat(finals)
    want_h.square().sum().backward()
    torch.testing.assert_close(h_all.detach(), want_h.detach(), **TOL)
    want = [x.grad for xs in inputs for x in xs] + grads(model)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **TOL)


def test_nobatch_argument_and_long_chains():
    torch.manual_seed(5)
    model = Model(10, 4)
    f = Fold()
    words = [f.add("leaf", i % 10) for i in range(15)]
    table = f.add("concat", *words).nobatch()
    logits = [f.add("logits", words[i % 10], table) for i in range(40)]
    chain = words[0]
    for _ in range(300):  # 300 steps deep
        chain = f.add("child", chain, words[1])
    out, end = f.apply(model, [logits, [chain]])
    assert out.shape == (40, 15) and end.shape == (1, 4)
    (out.sum() + end.sum()).backward()
    got = grads(model)

    model.zero_grad()
    eager = Eager(model)
    rows = [eager.add("leaf", i % 10) for i in range(15)]
    full = eager.add("concat", *rows)
    want_out = torch.cat([eager.add("logits", rows[i % 10], full) for i in range(40)])
    want_end = rows[0]
    for _ in range(300):
        want_end = eager.add("child", want_end, rows[1])
    (want_out.sum() + want_end.sum()).backward()
    torch.testing.assert_close(out.detach(), want_out.detach(), **TOL)
    torch.testing.assert_close(end.detach(), want_end.detach(), **TOL)
    for g, w in zip(got, grads(model)):
        torch.testing.assert_close(g, w, **TOL)


def test_errors_name_the_method():
    model = Model(4, 3)
    with pytest.raises(weft.Error, match="arguments are Fold nodes, ints or torch tensors"):
        Fold().add("leaf", "word")
    f = Fold()
    f.add("missing", 1)
    with pytest.raises(AttributeError, match="missing"):
        f.apply(model, [[f.add("missing", 1)]])
    f = Fold()
    node = f.add("leaf", 1)
    f.add("child", node, f.add("leaf", 2))
    bad = f.add("logits", node, f.add("init"))
    with pytest.raises(weft.Error, match="body 'logits' raised RuntimeError"):
        torch_model = Model(4, 3)
        torch_model.logits = lambda a, b: a @ b  # [1, 3] @ [1, 3]: shapes do not agree
        f.apply(torch_model, [[bad]])


def test_unfold_runs_the_same_program_one_call_at_a_time():
    torch.manual_seed(6)
    rng = np.random.default_rng(6)
    model = Model(9, 5)
    trees = [random_tree(rng, 3, 9) for _ in range(6)]
    f, u = Fold(), Unfold(model)
    (batched,) = f.apply(model, [[encode(f, t) for t in trees]])
    (alone,) = u.apply(model, [[encode(u, t) for t in trees]])
    torch.testing.assert_close(batched.detach(), alone.detach(), **TOL)
    with pytest.raises(weft.Error, match="another module"):
        u.apply(Model(9, 5), [[encode(u, trees[0])]])
