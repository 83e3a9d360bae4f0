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


def endless(model):
    """A program that never stops: a new value to wait for at every step."""
    def forever(ctx, start):
        h = ctx.constant(model.hidden, start)
        while True:
            h = ctx.call(model.cell, h)
            yield h
    return forever


def test_a_program_that_never_stops_is_ended_at_the_step_bound():
    model = Decoder()
    forever = endless(model)

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


def test_read_answers_a_list_whatever_the_number_of_values():
    """`yield ctx.read(...)` gives a list of arrays, one per value, for any number of values
    (before, one value gave a bare array, so a beam shrinking to one live value paired it with
    the array's elements); `yield v` gives the one value's array."""
    model = Decoder()

    def program(ctx, start):
        h = ctx.call(model.cell, ctx.constant(model.hidden, start))
        s = ctx.call(model.head, h)
        answers = {"bare": (yield h)}
        answers["one"] = yield ctx.read(h)
        answers["two"] = yield ctx.read(s, h)
        answers["list_of_one"] = yield ctx.read([s])
        answers["yield_list_of_one"] = yield [h]
        answers["none"] = yield ctx.read()
        live = [h, s, h]
        while live:  # a beam whose live values shrink one by one
            rows = yield ctx.read(*live)
            assert isinstance(rows, list) and len(rows) == len(live)
            live.pop()
        return answers, h, s

    engine = flow.Engine(model.loom)
    engine.admit(program, starts(1)[0])
    engine.run()
    answers, h, s = engine.result(0)
    h_row, s_row = engine.value(h), engine.value(s)
    assert isinstance(answers["bare"], np.ndarray)
    np.testing.assert_array_equal(answers["bare"], h_row)
    for key, expected in (("one", [h_row]), ("two", [s_row, h_row]), ("list_of_one", [s_row]),
                          ("yield_list_of_one", [h_row]), ("none", [])):
        assert isinstance(answers[key], list), key
        assert len(answers[key]) == len(expected), key
        for got, want in zip(answers[key], expected):
            np.testing.assert_array_equal(got, want)


def test_max_steps_bounds_a_program_that_reads_a_computed_value_forever():
    """Every resume counts against max_steps, waiting or not: before, `while True: r = yield x`
    with x computed never returned (the program resumed at once, forever, in one step)."""
    model = Decoder()
    rounds = []

    def spins(ctx, start):
        x = ctx.call(model.cell, ctx.constant(model.hidden, start))
        yield x  # one step computes x; from here on every read is answered at once
        while True:
            yield x
            rounds.append(1)
            if len(rounds) > 10000:  # the old engine's endless loop, ended so the test can fail
                raise RuntimeError("not bounded")

    engine = flow.Engine(model.loom, max_steps=10)
    engine.admit(spins, starts(1)[0], name="spinner")
    engine.run()
    assert engine.state(0) == "failed"
    with pytest.raises(weft.Error, match=r"example 0 \('spinner'\).*bound of 10 steps") as error:
        engine.result(0)
    assert "EngineOptions" not in str(error.value) and "max_steps" in str(error.value)
    assert len(rounds) == 9  # 10 yields in all
    assert engine.stats["steps"] == 1


def test_python_errors_name_python_options_not_cpp_ones():
    model = Decoder()
    engine = flow.Engine(model.loom, max_steps=3)
    engine.admit(endless(model), starts(1)[0])
    engine.run()
    for text in (engine.error(0),):
        assert "max_steps" in text and "::" not in text, text
    with pytest.raises(weft.Error, match="max_steps") as error:
        flow.Engine(model.loom, max_steps=0)
    assert "::" not in str(error.value)
    blocks = weft._weft.blocks
    body = blocks.Function("step", [blocks.Type.vector(1)], lambda x: x + 0.0,
                           output=blocks.Type.vector(1))
    compiler = blocks.Compiler(td.Vector(1) >> td.Loop(body, td.Identity(), max_steps=3,
                                                       threshold=1.0))
    with pytest.raises(weft.Error, match="bound of 3 steps") as error:
        compiler.forward([[0.0]], weft.Tape())
    assert "::" not in str(error.value) and "at_bound" in str(error.value)
    pending = []
    engine = flow.Engine(model.loom)
    engine.admit(lambda ctx: pending.append(ctx.constant(model.hidden, starts(1)[0])))
    with pytest.raises(weft.Error, match="not computed yet: yield it") as error:
        engine.value(pending[0])
    assert "co_await" not in str(error.value)


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
def test_keyboard_interrupt_and_system_exit_stop_the_run(stop):
    """Before, Ctrl-C or sys.exit() inside a program failed that example and run() went on."""
    model = Decoder()
    steps_seen = []

    def program(ctx, start, stop_at=None):
        h = ctx.constant(model.hidden, start)
        for step in range(20):
            h = ctx.call(model.cell, h)
            yield h
            steps_seen.append(step)
            if step == stop_at:
                raise stop()
        return "done"

    engine = flow.Engine(model.loom)
    engine.admit(program, starts(1)[0])
    engine.admit(program, starts(1)[0], 2, name="stopper")
    engine.admit(program, starts(1)[0])
    with pytest.raises(stop):
        engine.run()
    assert engine.state(1) == "failed"
    with pytest.raises(weft.Error, match=r"'stopper'.*interrupted by " + stop.__name__):
        engine.result(1)
    assert engine.state(0) == "running" and max(steps_seen) < 19  # stopped, not run to the end
    engine.run()  # the others go on when asked
    assert engine.result(0) == "done" and engine.result(2) == "done"

    def plain(ctx):
        raise stop()

    with pytest.raises(stop):  # raised while admitting (a plain function) stops as well
        engine.admit(plain)


def test_sigint_during_a_flow_run_raises_keyboard_interrupt():
    """A real SIGINT mid-run (Python notes it wherever it lands: in a program, in an operation
    body, or in C++ between steps) ends run() with KeyboardInterrupt. Before, the program that
    saw it failed and the others ran to their end."""
    import os
    import signal
    model = Decoder()

    def program(ctx, start, steps, signal_at=None):
        h = ctx.constant(model.hidden, start)
        for step in range(steps):
            h = ctx.call(model.cell, h)
            yield h
            if step == signal_at:
                os.kill(os.getpid(), signal.SIGINT)
        return steps

    engine = flow.Engine(model.loom)
    for i in range(4):
        engine.admit(program, starts(1)[0], 2000, 3 if i == 1 else None)
    with pytest.raises(KeyboardInterrupt):
        engine.run()
    assert engine.stats["steps"] < 100  # stopped within a step or two, not at the end


def test_handles_of_another_engine_or_loom_are_refused():
    model, other = Decoder(), Decoder()
    engine_a, engine_b = flow.Engine(model.loom), flow.Engine(model.loom)
    a_vals = engine_a.import_rows(np.stack(starts(3)), model.hidden)
    b_vals = engine_b.import_rows(np.stack(starts(3, seed=9)), model.hidden)
    assert a_vals[0].id == b_vals[0].id and a_vals[0] != b_vals[0]
    with pytest.raises(weft.Error, match="belongs to another engine"):
        engine_b.value(a_vals[0])
    with pytest.raises(weft.Error, match="belongs to another engine"):
        engine_b.gather([b_vals[0], a_vals[1]])

    def uses(ctx, what):
        if what == "val":
            yield ctx.call(model.cell, a_vals[0])
        elif what == "read":
            yield a_vals[0]
        elif what == "read_list":
            yield ctx.read(b_vals[0], a_vals[0])
        elif what == "op":
            yield ctx.call(other.cell, b_vals[0])
        elif what == "type":
            yield ctx.constant(other.hidden, starts(1)[0])
        elif what == "own":
            return float((yield ctx.call(model.cell, b_vals[0])).sum())

    kinds = ["val", "read", "read_list", "op", "type", "own"]
    for kind in kinds:
        engine_b.admit(uses, kind, name=kind)
    engine_b.run()
    expected = {"val": "belongs to another engine", "read": "belongs to another engine",
                "read_list": "belongs to another engine", "op": "operation 'cell'.*another Loom",
                "type": "type 0 is a type of another Loom"}
    for i, kind in enumerate(kinds[:-1]):
        with pytest.raises(weft.Error, match=rf"\('{kind}'\).*{expected[kind]}"):
            engine_b.result(i)
    assert isinstance(engine_b.result(len(kinds) - 1), float)
    with pytest.raises(weft.Error, match="another Loom"):
        engine_b.import_rows(np.stack(starts(2)), other.hidden)
    with pytest.raises(weft.Error, match="type 0 is a type of another Loom"):
        model.loom.op("mixed", [model.hidden], [other.hidden], lambda h: h)
    with pytest.raises(weft.Error, match="expected a type"):
        engine_b.import_rows(np.stack(starts(2)), 0)  # a bare id says nothing of its Loom


def test_import_rows_of_a_var_of_another_tape_fails_at_once():
    model = Decoder()
    tape, other_tape = weft.Tape(), weft.Tape()
    engine = flow.Engine(model.loom, tape)
    foreign = other_tape.constant(np.stack(starts(2)))
    with pytest.raises(weft.Error, match="another tape than this engine's"):
        engine.import_rows(foreign, model.hidden)
    own = engine.import_rows(tape.constant(np.stack(starts(2))), model.hidden)
    engine.admit(lambda ctx: float((yield ctx.call(model.cell, own[1])).sum()))
    engine.run()
    assert isinstance(engine.result(0), float)  # the engine is still whole
    bare = flow.Engine(model.loom)  # its own tape: a Var of any tape the user has is foreign
    with pytest.raises(weft.Error, match="pass the rows as an array"):
        bare.import_rows(foreign, model.hidden)


def test_a_context_kept_after_its_program_ended_refuses_calls():
    model = Decoder()
    kept = {}

    def generator(ctx, start):
        kept[ctx.example] = ctx
        yield ctx.call(model.cell, ctx.constant(model.hidden, start))

    def plain(ctx, start):
        kept[ctx.example] = ctx
        return ctx.constant(model.hidden, start)

    engine = flow.Engine(model.loom)
    engine.admit(generator, starts(1)[0])
    engine.admit(plain, starts(1)[0])
    engine.admit(generator, starts(1)[0])
    # The plain function has returned: its context is closed before the engine even steps.
    with pytest.raises(weft.Error, match=r"example 1 .*used after its program ended"):
        kept[1].constant(model.hidden, starts(1)[0])
    engine.run()
    for i, ctx in sorted(kept.items()):
        with pytest.raises(weft.Error, match=rf"example {i} .*used after its program ended"):
            ctx.constant(model.hidden, starts(1)[0])
        with pytest.raises(weft.Error, match="used after its program ended"):
            ctx.read()
    assert engine.stats["calls"] == 2  # the two generators' cells: nothing from closed contexts


def test_after_an_operation_body_raised_result_says_the_step_failed():
    model = Decoder()
    broken = model.loom.op("broken", [model.hidden], [model.hidden], lambda h: 1 / 0)

    def program(ctx, start):
        yield ctx.call(broken, ctx.constant(model.hidden, start))

    engine = flow.Engine(model.loom)
    engine.admit(program, starts(1)[0])
    with pytest.raises(ZeroDivisionError):
        engine.run()
    with pytest.raises(weft.Error, match="did not finish: a step of this engine failed as a "
                                         "whole.*ZeroDivisionError") as error:
        engine.result(0)
    assert "run() the engine first" not in str(error.value)
