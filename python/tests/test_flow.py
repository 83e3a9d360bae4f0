"""weft.flow from Python: generator programs batched by the C++ engine equal each program run
alone (results and gradients), an exception in one program fails that example only with a
message naming it, a program that never stops is ended at the step bound, and the blocks Loop
runs from Python batched as one at a time."""

import numpy as np
import pytest

import weft
from weft import blocks as td
from weft import flow

N = 4


class Decoder:
    """h <- tanh(h W); score = h v. A program decodes until its score passes 0.6."""

    def __init__(self, seed=3):
        rng = np.random.default_rng(seed)
        self.w = weft.Parameter("w", rng.uniform(-1.3, 1.3, (N, N)).astype("float32"))
        self.v = weft.Parameter("v", rng.uniform(-1, 1, (N, 1)).astype("float32"))
        self.loom = flow.Loom()
        self.hidden = self.loom.type([N])
        score = self.loom.type([1])
        self.cell = self.loom.op("cell", [self.hidden], [self.hidden],
                                 lambda h: weft.tanh(weft.matmul(h, self.w)))
        self.head = self.loom.op("head", [self.hidden], [score],
                                 lambda h: weft.matmul(h, self.v))

    def program(self, ctx, start, fail_on=None):
        h = ctx.constant(self.hidden, start)
        scores = []
        for _ in range(40):
            h = ctx.call(self.cell, [h])
            s = ctx.call(self.head, h)
            score, row = yield ctx.read(s, h)
            scores.append(float(score[0]))
            if fail_on is not None and len(scores) == fail_on:
                raise ZeroDivisionError("the program divided by zero")
            if score[0] > 0.6 or row.max() > 0.95:
                break
        return scores, h


def zero_grad(model):
    for p in (model.w, model.v):
        p.zero_grad()


def starts(n, seed=7):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, N).astype("float32") for _ in range(n)]


def test_generator_programs_batched_equal_one_at_a_time():
    model = Decoder()
    inputs = starts(30)
    tape = weft.Tape()
    engine = flow.Engine(model.loom, tape)
    for x in inputs:
        engine.admit(model.program, x)
    engine.run()
    batched = [engine.result(i) for i in range(len(inputs))]
    lengths = [len(scores) for scores, _ in batched]
    assert len(set(lengths)) >= 3, lengths  # the programs stop after different numbers of steps
    assert engine.stats["steps"] < sum(lengths)  # steps are shared, not one per example
    zero_grad(model)
    tape.backward(weft.sum(engine.gather([h for _, h in batched])))
    grads = [p.grad.numpy().copy() for p in (model.w, model.v)]

    zero_grad(model)
    for x, (scores, h) in zip(inputs, batched):
        alone_tape = weft.Tape()
        alone = flow.Engine(model.loom, alone_tape)
        alone.admit(model.program, x)
        alone.run()
        alone_scores, alone_h = alone.result(0)
        np.testing.assert_allclose(alone_scores, scores, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(alone.value(alone_h), engine.value(h), rtol=1e-6, atol=1e-6)
        alone_tape.backward(weft.sum(alone.gather([alone_h])))
    for batched_grad, p in zip(grads, (model.w, model.v)):
        np.testing.assert_allclose(batched_grad, p.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_an_exception_fails_its_example_only_and_names_it():
    model = Decoder()
    inputs = starts(6)
    engine = flow.Engine(model.loom)
    for i, x in enumerate(inputs):
        engine.admit(model.program, x, 1 if i == 2 else None, name=f"sentence {i}")
    engine.run()
    assert [engine.state(i) for i in range(6)] == ["done"] * 2 + ["failed"] + ["done"] * 3
    with pytest.raises(weft.Error, match=r"example 2 \('sentence 2'\).*ZeroDivisionError: the "
                                         r"program divided by zero "
                                         r"\(at .*test_flow.py:\d+, in program\)"):
        engine.result(2)
    alone = flow.run(model.loom, model.program, [inputs[3]])
    assert engine.result(3)[0] == pytest.approx(alone[0][0], abs=1e-6)
    # flow.run raises the first failure after every program ran, or returns it in place.
    results = flow.run(model.loom, lambda ctx, x: model.program(ctx, x, 1), inputs[:2],
                       errors="return")
    assert all(isinstance(r, weft.Error) and "example" in str(r) for r in results)


def test_a_program_that_never_stops_is_ended_at_the_step_bound():
    model = Decoder()

    def forever(ctx, start):
        h = ctx.constant(model.hidden, start)
        while True:
            h = ctx.call(model.cell, h)
            yield h

    def short(ctx, start):
        h = ctx.call(model.cell, ctx.constant(model.hidden, start))
        row = yield h
        return float(row.sum())

    engine = flow.Engine(model.loom, max_steps=25)
    engine.admit(forever, starts(1)[0], name="the endless one")
    engine.admit(short, starts(1)[0])
    engine.run()
    with pytest.raises(weft.Error, match=r"example 0 \('the endless one'\).*bound of 25 steps"):
        engine.result(0)
    assert engine.state(1) == "done"
    assert isinstance(engine.result(1), float)


def test_misuse_is_reported_by_message():
    model = Decoder()

    def yields_junk(ctx, start):
        yield 42

    def bad_call(ctx, start):
        ctx.call(model.cell, [start])  # a NumPy array, not a Val
        yield

    engine = flow.Engine(model.loom)
    engine.admit(yields_junk, starts(1)[0])
    engine.admit(bad_call, starts(1)[0])
    engine.run()
    with pytest.raises(weft.Error, match="yielded int"):
        engine.result(0)
    with pytest.raises(weft.Error, match="expected a Val"):
        engine.result(1)
    with pytest.raises(weft.Error, match="has not finished|never admitted"):
        engine.result(5)
    kept = []
    engine2 = flow.Engine(model.loom)
    engine2.admit(lambda ctx, x: kept.append(ctx), 0)
    del engine2
    with pytest.raises(weft.Error, match="engine is gone"):
        kept[0].constant(model.hidden, starts(1)[0])


def test_an_operation_body_that_raises_fails_the_step_and_the_engine_says_so():
    model = Decoder()
    loom = model.loom
    broken = loom.op("broken", [model.hidden], [model.hidden], lambda h: 1 / 0)

    def program(ctx, start):
        yield ctx.call(broken, ctx.constant(model.hidden, start))

    engine = flow.Engine(loom)
    engine.admit(program, starts(1)[0])
    with pytest.raises(ZeroDivisionError):
        engine.run()
    with pytest.raises(weft.Error, match="failed as a whole.*make a new engine"):
        engine.run()


def test_a_blocks_loop_batched_equals_one_at_a_time_from_python():
    blocks = weft._weft.blocks
    rng = np.random.default_rng(4)
    w = weft.Parameter("w", rng.uniform(-1.2, 1.2, (3, 3)).astype("float32"))
    r = weft.Parameter("r", rng.uniform(-2, 2, (3, 1)).astype("float32"))

    def step(h, clock):  # state (h, clock) -> ((h', clock'), y): time runs at the model's rate
        h2 = weft.tanh(weft.matmul(h, w))
        return h2, clock + weft.sigmoid(weft.matmul(h2, r)), h2

    vec3, vec1 = blocks.Type.vector(3), blocks.Type.vector(1)
    body = blocks.Function("step", [vec3, vec1], step,
                           output=blocks.Type.tuple(blocks.Type.tuple(vec3, vec1), vec3))
    root = td.Record([("h", td.Vector(3)), ("clock", td.Vector(1))]) >> td.Loop(
        body, td.GetItem(1), max_steps=50, threshold=1.0, emits=True)
    compiler = blocks.Compiler(root)
    assert compiler.needs_flow
    examples = [{"h": rng.uniform(-1, 1, 3).tolist(), "clock": [float(rng.uniform(-1.5, 0.9))]}
                for _ in range(20)]
    out = compiler.forward(examples, weft.Tape())
    rows = list(out.output_examples(2))
    assert len(set(rows.count(e) for e in range(20))) >= 3  # loops of different lengths
    alone = [compiler.forward([e], weft.Tape()) for e in examples]
    for k in (0, 2):
        np.testing.assert_allclose(out.output(k).numpy(),
                                   np.concatenate([a.output(k).numpy() for a in alone]),
                                   atol=1e-6)
    bad = examples[:3]
    bad[1] = {"h": [0.0, 0.0, 0.0], "clock": [-1000.0]}
    with pytest.raises(weft.Error, match="example 1.*bound of 50 steps"):
        compiler.forward(bad, weft.Tape())
