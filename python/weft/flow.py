"""Programs that decide as they go, from Python: decoders, parsers and searches batched by the
C++ engine (weft/flow/flow.h). A program is a generator function taking a context first:

    loom = flow.Loom()
    hidden = loom.type([8])
    cell = loom.op("cell", [hidden], [hidden], lambda h: weft.tanh(weft.matmul(h, w)))

    def count_up(ctx, start):
        h = ctx.constant(hidden, start)
        for step in range(50):
            h = ctx.call(cell, h)        # issued at once; nothing waits
            row = yield h                # suspends until a step computed h: a NumPy array
            if row.sum() > 1:
                return step              # the example's result

    results = flow.run(loom, count_up, starts)

ctx.call batches with every other program's calls of the same step; only `yield` waits.
`row = yield v` gives one value's array; `rows = yield ctx.read(a, b, ...)` (or ctx.read(vals),
or `yield [a, b]`) a list of arrays, one per value, whatever their number (one value included).
A program may also be a plain function that reads nothing (it runs when admitted).
Engine.run() releases the GIL, taking it only to resume generators and to run operation bodies
written in Python. An exception in one program fails that example only (weft.Error naming it
when its result is asked for); a program that yields more than max_steps times fails the same
way. KeyboardInterrupt and SystemExit stop the run: run() raises them.

greedy() and beam_search() decode with the C++ searches over a step function of yours that
issues one decoding step's calls: see their docstrings, and docs/decoding.md.
"""

from ._weft import flow as _flow

Loom = _flow.Loom
Engine = _flow.Engine
Context = _flow.Context
Val = _flow.Val
Op = _flow.Op
Type = _flow.Type
Hypothesis = _flow.Hypothesis

__all__ = ["Loom", "Engine", "Context", "Val", "Op", "Type", "Hypothesis", "run", "greedy",
           "beam_search"]


def run(loom, program, examples, tape=None, max_steps=10000, errors="raise"):
    """Runs program(ctx, example) for every example as one batch; returns their results in order.

    errors="raise" raises the first failure (a weft.Error naming the example) after every
    program has run; errors="return" puts the weft.Error in that example's place instead.
    """
    if errors not in ("raise", "return"):
        raise ValueError(f"errors must be 'raise' or 'return', not {errors!r}")
    engine = Engine(loom, tape, max_steps=max_steps)
    for example in examples:
        engine.admit(program, example)
    engine.run()
    results = []
    for i in range(engine.num_examples):
        try:
            results.append(engine.result(i))
        except Exception as error:  # the example's own failure, already named
            if errors == "raise":
                raise
            results.append(error)
    return results


def greedy(engine, step, initial, *, start, end, max_length, token_type=None, trace=True,
           errors="raise"):
    """Greedy decoding of every example as one batch; returns one Hypothesis per example.

    step(ctx, state, token) -> (state, log_probs) issues the calls of one decoding step and
    reads nothing: state is what the previous step returned (initial[i] at the first step: a
    Val, a tuple of Vals, anything your step takes), token the previous token (start at the
    first step; an int, or a Val of token_type when given: an int32 type of one element, made
    without a Python constant), log_probs a Val of float32 [vocabulary] (log-probabilities:
    log_softmax of the scores). Each example picks its best token (the lowest among equals)
    until it picks `end` or has max_length tokens (an int, or one per example). The steps of
    all examples run batched on `engine` (a flow.Engine; a Loom makes a new engine).

    With token_type and states made of Vals (tuples and lists of them), the step is traced: its
    first call is recorded and replayed in C++ for every other beam and step, as a C++ decoder
    would run (the Python step is called once per search). A step that asks for ctx.example or
    reads, or returns a state shaped unlike the one it got, is called every time instead; pass
    trace=False when its calls depend on anything else than its arguments (a counter, a random
    choice). errors="raise" raises the first failure (a weft.Error naming the example) after every
    example has run; errors="return" puts the weft.Error in that example's place.
    """
    if isinstance(engine, Loom):
        engine = Engine(engine)
    return _flow._search(engine, step, initial, start, end, max_length, 0, 0.0, token_type, trace,
                         errors)


def beam_search(engine, step, initial, *, start, end, max_length, width=4, length_penalty=0.0,
                token_type=None, trace=True, errors="raise"):
    """Beam search of every example as one batch; returns, per example, its hypotheses best
    first (at most `width`).

    step, initial, start, end, max_length, token_type, trace, errors: as for greedy(). At each step
    every live beam's expansions are ranked by their summed log-probability; the best `width`
    that do not end go on, those among the best `width` that end are kept; the search stops
    when no live beam can still beat the width-th best kept one. Hypotheses are ranked by
    log_prob / len(tokens) ** length_penalty (0: the plain sum, which favours short outputs;
    about 0.6 to 1 evens that out). Width 1 without a length penalty is greedy decoding.
    Every beam of every example steps in one engine step.
    """
    if not isinstance(width, int) or width < 1:
        raise ValueError(f"beam_search: width must be a positive int, not {width!r}")
    if isinstance(engine, Loom):
        engine = Engine(engine)
    return _flow._search(engine, step, initial, start, end, max_length, width,
                         float(length_penalty), token_type, trace, errors)
