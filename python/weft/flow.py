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
`a, b = yield ctx.read(a, b)` (or `yield [a, b]`) waits for several values at once. A program
may also be a plain function that reads nothing (it runs when admitted). Engine.run() releases
the GIL, taking it only to resume generators and to run operation bodies written in Python.
An exception in one program fails that example only (weft.Error naming it when its result is
asked for); a program that waits more than max_steps steps fails the same way.
"""

from ._weft import flow as _flow

Loom = _flow.Loom
Engine = _flow.Engine
Context = _flow.Context
Val = _flow.Val
Op = _flow.Op

__all__ = ["Loom", "Engine", "Context", "Val", "Op", "run"]


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
