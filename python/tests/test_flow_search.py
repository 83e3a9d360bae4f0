"""weft.flow.greedy and weft.flow.beam_search over a step written in Python: batched equals one
example at a time, width 1 equals greedy, a beam wider than every hypothesis equals exhaustive
search (NumPy's log-probabilities of every sequence), states of any shape, the token as an int or
a Val, and failures that name their example (KeyboardInterrupt stops the search)."""

import itertools

import numpy as np
import pytest

import weft
from weft import flow

H, V, END, START = 5, 4, 0, 3


def log_softmax(x):
    x = x - x.max()
    return x - np.log(np.exp(x).sum())


class Tiny:
    """h' = tanh(h W + E[token]); log_probs = log_softmax(h' U): a decoder NumPy can follow."""

    def __init__(self, seed=0):
        rng = np.random.default_rng(seed)
        self.e = rng.normal(0, 1, (V, H)).astype("float32")
        self.w = rng.normal(0, 1, (H, H)).astype("float32")
        self.u = rng.normal(0, 1.5, (H, V)).astype("float32")
        params = [weft.Parameter(n, a) for n, a in (("E", self.e), ("W", self.w), ("U", self.u))]
        E, W, U = params
        self.loom = flow.Loom()
        self.hidden = self.loom.type([H])
        self.token = self.loom.type([], "int32")
        self.logp = self.loom.type([V])
        self.embed = self.loom.op("embed", [self.token], [self.hidden],
                                  lambda t: weft.embedding_lookup(E, t))
        self.cell = self.loom.op("cell", [self.hidden, self.hidden], [self.hidden],
                                 lambda h, x: weft.tanh(weft.matmul(h, W) + x))
        self.head = self.loom.op("head", [self.hidden], [self.logp],
                                 lambda h: weft.log_softmax(weft.matmul(h, U)))

    def step(self, ctx, h, token):  # token: a Val of self.token
        h = ctx.call(self.cell, h, ctx.call(self.embed, token))
        return h, ctx.call(self.head, h)

    def numpy_step(self, h, token):
        h = np.tanh(h.astype(np.float64) @ self.w + self.e[token])
        return h, log_softmax(h @ self.u)

    def search(self, starts, kind="beam", **options):
        engine = flow.Engine(self.loom)
        initial = engine.import_rows(np.stack(starts), self.hidden)
        options.setdefault("token_type", self.token)
        if kind == "greedy":
            return flow.greedy(engine, self.step, initial, start=START, end=END, **options)
        return flow.beam_search(engine, self.step, initial, start=START, end=END, **options)


def starts(n, seed=1):
    return list(np.random.default_rng(seed).normal(0, 1, (n, H)).astype("float32"))


def same(a, b):
    assert a.tokens == b.tokens and a.ended == b.ended
    assert a.log_prob == pytest.approx(b.log_prob, abs=1e-5)
    assert a.score == pytest.approx(b.score, abs=1e-5)


def same_beams(a, b):
    """Two searches' hypotheses, example by example."""
    for x, y in zip(a, b, strict=True):
        for h, k in zip(x, y, strict=True):
            same(h, k)


@pytest.mark.parametrize("kind,options", [("beam", {"width": 3}),
                                          ("beam", {"width": 4, "length_penalty": 0.8}),
                                          ("greedy", {})])
def test_batched_equals_one_at_a_time(kind, options):
    model = Tiny()
    xs = starts(16)
    bounds = [2 + i % 5 for i in range(16)]  # a bound per example
    batched = model.search(xs, kind, max_length=bounds, **options)
    lengths = set()
    for x, bound, result in zip(xs, bounds, batched):
        alone = model.search([x], kind, max_length=bound, **options)[0]
        hypotheses = result if kind == "beam" else [result]
        for b, a in zip(hypotheses, alone if kind == "beam" else [alone], strict=True):
            same(b, a)
            assert len(b.tokens) <= bound
            lengths.add(len(b.tokens))
    assert len(lengths) >= 3


def test_width_one_equals_greedy_and_greedy_follows_numpy():
    model = Tiny(seed=2)
    xs = starts(20, seed=3)
    greedy = model.search(xs, "greedy", max_length=6)
    beam = model.search(xs, "beam", max_length=6, width=1)
    for x, g, b in zip(xs, greedy, beam):
        assert len(b) == 1
        same(g, b[0])
        h, token, log_prob, tokens = x, START, 0.0, []
        while len(tokens) < 6 and token != END or not tokens:
            h, lp = model.numpy_step(h, token)
            token = int(lp.argmax())
            tokens.append(token)
            log_prob += lp[token]
            if token == END:
                break
        assert g.tokens == tokens and g.ended == (tokens[-1] == END)
        assert g.log_prob == pytest.approx(log_prob, abs=1e-4)
    assert len({len(g.tokens) for g in greedy}) >= 2


def exhaustive(model, start, max_length, length_penalty):
    """Every hypothesis a search can give: ended at its first END, or max_length tokens long."""
    found = {}

    def walk(h, token, tokens, log_prob):
        if tokens and (tokens[-1] == END or len(tokens) == max_length):
            score = log_prob / len(tokens) ** length_penalty if length_penalty else log_prob
            found[tuple(tokens)] = (log_prob, score, tokens[-1] == END)
            return
        h, lp = model.numpy_step(h, token)
        for t in range(V):
            walk(h, t, tokens + [t], log_prob + lp[t])

    walk(start, START, [], 0.0)
    return found


@pytest.mark.parametrize("length_penalty", [0.0, 0.7])
def test_a_beam_wider_than_every_hypothesis_equals_exhaustive_search(length_penalty):
    model = Tiny(seed=4)
    xs = starts(3, seed=5)
    max_length = 4
    results = model.search(xs, "beam", max_length=max_length, width=500,
                           length_penalty=length_penalty)
    for x, hypotheses in zip(xs, results):
        every = exhaustive(model, x, max_length, length_penalty)
        assert len(hypotheses) == len(every) == sum((V - 1) ** k for k in range(max_length)) + \
            (V - 1) ** max_length
        for h in hypotheses:
            log_prob, score, ended = every[tuple(h.tokens)]
            assert h.ended == ended
            assert h.log_prob == pytest.approx(log_prob, abs=1e-4)
            assert h.score == pytest.approx(score, abs=1e-4)
        scores = [h.score for h in hypotheses]
        assert scores == sorted(scores, reverse=True)
        best = max(every.items(), key=lambda item: item[1][1])
        assert tuple(hypotheses[0].tokens) == best[0]
    narrow = model.search(xs, "beam", max_length=max_length, width=2,
                          length_penalty=length_penalty)
    assert all(len(h) == 2 for h in narrow)


def test_states_of_any_shape_and_the_token_as_an_int():
    """A state may be a tuple of Vals; without token_type the step gets the token as an int."""
    model = Tiny(seed=6)
    xs = starts(8, seed=7)

    def step(ctx, state, token):
        h, steps = state
        assert isinstance(token, int) and isinstance(steps, int)
        x = ctx.call(model.embed, ctx.constant(model.token, token))
        h = ctx.call(model.cell, h, x)
        return (h, steps + 1), ctx.call(model.head, h)

    engine = flow.Engine(model.loom)
    initial = [(v, 0) for v in engine.import_rows(np.stack(xs), model.hidden)]
    as_int = flow.beam_search(engine, step, initial, start=START, end=END, max_length=5, width=3)
    as_val = model.search(xs, "beam", max_length=5, width=3)
    same_beams(as_int, as_val)


def test_failures_name_their_example_and_interrupts_stop_the_search():
    model = Tiny(seed=8)
    xs = starts(4, seed=9)
    engine = flow.Engine(model.loom)
    initial = engine.import_rows(np.stack(xs), model.hidden)

    def step(ctx, h, token):
        if ctx.example == 2:
            raise ZeroDivisionError("example two")
        return model.step(ctx, h, token)

    options = dict(start=START, end=END, max_length=4, token_type=model.token)
    results = flow.beam_search(engine, step, initial, errors="return", **options)
    assert isinstance(results[2], weft.Error)
    assert "example 2" in str(results[2]) and "ZeroDivisionError: example two" in str(results[2])
    for i in (0, 1, 3):
        same_beams([results[i]], model.search([xs[i]], max_length=4))
    engine = flow.Engine(model.loom)
    initial = engine.import_rows(np.stack(xs), model.hidden)
    with pytest.raises(weft.Error, match=r"example 2 .*ZeroDivisionError"):
        flow.greedy(engine, step, initial, **options)

    def bad(returns):
        def step(ctx, h, token):
            return returns(ctx, model.step(ctx, h, token))
        return step

    other = flow.Engine(model.loom)
    foreign = other.import_rows(np.zeros((1, V), np.float32), model.logp)[0]
    for returns, message in (
            (lambda ctx, out: out[1], r"must return \(state, log_probs\), got Val"),
            (lambda ctx, out: (out[0], ctx.constant(model.token, 1)),
             r"log_probs are of type int32 \[\]; a search needs float32 \[vocabulary\]"),
            (lambda ctx, out: (out[0], foreign), "belongs to another engine"),
            (lambda ctx, out: (out[0], 3.0), "expected a Val")):
        engine = flow.Engine(model.loom)
        initial = engine.import_rows(np.stack(xs[:2]), model.hidden)
        with pytest.raises(weft.Error, match=message):
            flow.beam_search(engine, bad(returns), initial, **options)
    engine = flow.Engine(model.loom)
    initial = engine.import_rows(np.stack(xs), model.hidden)
    with pytest.raises(weft.Error, match="token_type must be an int32 type of one element"):
        flow.greedy(engine, model.step, initial, start=START, end=END, max_length=3,
                    token_type=model.hidden)
    with pytest.raises(weft.Error, match="3 bounds for 4 examples"):
        flow.greedy(engine, model.step, initial, start=START, end=END, max_length=[1, 2, 3])
    with pytest.raises(weft.Error, match="max_length of example 1 must be positive"):
        flow.greedy(engine, model.step, initial, start=START, end=END, max_length=[1, 0, 3, 3])
    with pytest.raises(ValueError, match="width must be a positive int"):
        flow.beam_search(engine, model.step, initial, width=0, **options)

    def interrupted(ctx, h, token):
        if ctx.example == 1:
            raise KeyboardInterrupt
        return model.step(ctx, h, token)

    with pytest.raises(KeyboardInterrupt):
        flow.beam_search(engine, interrupted, initial, **options)
    # The interrupted search's programs were retired; the engine serves the next search.
    again = flow.beam_search(engine, model.step, initial, width=2, **options)
    same_beams(again[3:], model.search([xs[3]], max_length=4, width=2))


def test_a_search_shares_steps_across_examples_and_beams():
    model = Tiny(seed=10)
    xs = starts(32, seed=11)
    engine = flow.Engine(model.loom)
    initial = engine.import_rows(np.stack(xs), model.hidden)
    results = flow.beam_search(engine, model.step, initial, start=START, end=END, max_length=6,
                               width=4, token_type=model.token)
    assert len(results) == 32
    # One step per token position, not per example or beam: every beam of every example shares it.
    assert engine.stats["steps"] <= 6
    assert engine.stats["calls"] > 32 * 3 * 4


def test_a_traced_step_equals_the_step_called_every_time():
    """With token_type and states of Vals the step is called once and replayed in C++; the
    replay must issue what the step would: tuple states, a constant, a parameter and a value the
    step captured, against trace=False (the step called for every beam and step)."""
    model = Tiny(seed=12)
    xs = starts(10, seed=13)
    bias = weft.Parameter("bias", np.linspace(-0.5, 0.5, H).astype("float32"))
    add = model.loom.op("add", [model.hidden, model.hidden], [model.hidden], lambda a, b: a + b)
    calls = []

    def run(trace, kind):
        engine = flow.Engine(model.loom)
        rows = engine.import_rows(np.stack(xs), model.hidden)
        shared = engine.import_rows(np.full((1, H), 0.25, np.float32), model.hidden)[0]

        def step(ctx, state, token):
            calls.append(1)
            h, (memory,) = state
            x = ctx.call(add, ctx.call(model.embed, token), ctx.parameter(model.hidden, bias))
            x = ctx.call(add, x, ctx.constant(model.hidden, np.full(H, 0.1, np.float32)))
            h = ctx.call(model.cell, ctx.call(add, h, ctx.call(add, memory, shared)), x)
            return (h, (memory,)), ctx.call(model.head, h)

        memories = engine.import_rows(np.stack(xs)[::-1] * 0.5, model.hidden)
        initial = [(r, (m,)) for r, m in zip(rows, memories)]
        options = dict(start=START, end=END, max_length=5, token_type=model.token, trace=trace)
        if kind == "greedy":
            return [[h] for h in flow.greedy(engine, step, initial, **options)]
        return flow.beam_search(engine, step, initial, width=3, **options)

    for kind in ("beam", "greedy"):
        calls.clear()
        traced = run(True, kind)
        assert len(calls) == 2  # traced, confirmed by a second call, replayed after
        untraced = run(False, kind)
        assert len(calls) > 20
        same_beams(traced, untraced)


def test_a_step_that_asks_for_its_example_is_not_traced():
    """A step whose calls depend on ctx.example would be replayed wrongly for other examples: it
    is called every time instead, and its answers equal each example decoded alone."""
    model = Tiny(seed=14)
    xs = starts(6, seed=15)
    offsets = np.random.default_rng(16).normal(0, 1, (6, H)).astype("float32")
    add = model.loom.op("add", [model.hidden, model.hidden], [model.hidden], lambda a, b: a + b)

    def stepper(which):
        def step(ctx, h, token):
            offset = ctx.constant(model.hidden, offsets[which(ctx)])
            h = ctx.call(model.cell, ctx.call(add, h, offset), ctx.call(model.embed, token))
            return h, ctx.call(model.head, h)
        return step

    engine = flow.Engine(model.loom)
    initial = engine.import_rows(np.stack(xs), model.hidden)
    together = flow.beam_search(engine, stepper(lambda ctx: ctx.example), initial, start=START,
                                end=END, max_length=5, width=3, token_type=model.token)
    for i, x in enumerate(xs):
        engine = flow.Engine(model.loom)
        alone = flow.beam_search(engine, stepper(lambda ctx: i), engine.import_rows(x[None], model.hidden),
                                 start=START, end=END, max_length=5, width=3,
                                 token_type=model.token)[0]
        same_beams([together[i]], [alone])


def test_a_captured_val_that_was_also_the_state_is_not_taken_for_the_state():
    """Every example starts from one Val that the step also uses by name: on the first call the
    two look alike, so the trace is checked against a call from other Vals before it is
    replayed; here they differ, and the step is called every time."""
    model = Tiny(seed=17)
    add = model.loom.op("add", [model.hidden, model.hidden], [model.hidden], lambda a, b: a + b)
    engine = flow.Engine(model.loom)
    origin = engine.import_rows(np.full((1, H), 0.3, np.float32), model.hidden)[0]

    def step(ctx, h, token):
        h = ctx.call(model.cell, ctx.call(add, h, origin), ctx.call(model.embed, token))
        return h, ctx.call(model.head, h)

    options = dict(start=START, end=END, max_length=5, width=3, token_type=model.token)
    traced = flow.beam_search(engine, step, [origin] * 4, **options)
    engine = flow.Engine(model.loom)
    origin = engine.import_rows(np.full((1, H), 0.3, np.float32), model.hidden)[0]
    called = flow.beam_search(engine, step, [origin] * 4, trace=False, **options)
    same_beams(traced, called)
