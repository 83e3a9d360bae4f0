#!/usr/bin/env python3
"""weft.flow.beam_search and weft.flow.greedy on the newcomer's toy decoder of issue 44 (reverse a
digit string: 10 digits, an end and a start token; h' = tanh(h W + E[token]), log_probs =
log_softmax(h' U)): a batch of examples against one example at a time, and against the same
model's searches written in C++ (bench/flow_reverse.cpp, given with --cpp), whose answers must be
the same. The weights are random: speed depends on the decoded lengths, which each example's
bound (its string's length + 1) and the end token decide, not on what the weights have learnt.
The encoder (a fixed NumPy function of the digits) is outside the timed part. One thread; CPU
time (the machine may be shared).

    PYTHONPATH=build/test/python /usr/bin/python3 python/bench/flow_search.py \\
        --cpp build/test/bench/weft_bench_flow_reverse --examples 64 --width 4 --rounds 5
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np

import weft
from weft import flow

VOCABULARY, END, START = 12, 10, 11


class ReverseDecoder:
    def __init__(self, hidden, seed):
        rng = np.random.default_rng(seed)
        scale = 1.0 / np.sqrt(hidden)
        self.e = rng.normal(0, 1.0, (VOCABULARY, hidden)).astype(np.float32)
        self.w = rng.normal(0, 1.5 * scale, (hidden, hidden)).astype(np.float32)
        self.u = rng.normal(0, 3.0 * scale, (hidden, VOCABULARY)).astype(np.float32)
        self.u[:, END] *= 0.25  # the end token wins now and then, most sequences reach their bound
        E, W, U = (weft.Parameter(n, a) for n, a in (("E", self.e), ("W", self.w), ("U", self.u)))
        self.loom = flow.Loom()
        self.hidden = self.loom.type([hidden], name="hidden")
        self.token = self.loom.type([], "int32", name="token")
        log_probs = self.loom.type([VOCABULARY], name="log_probs")
        self.embed = self.loom.op("embed", [self.token], [self.hidden],
                                  lambda t: weft.embedding_lookup(E, t))
        self.cell = self.loom.op("cell", [self.hidden, self.hidden], [self.hidden],
                                 lambda h, x: weft.tanh(weft.matmul(h, W) + x))
        self.head = self.loom.op("head", [self.hidden], [log_probs],
                                 lambda h: weft.log_softmax(weft.matmul(h, U)))

    def step(self, ctx, h, token):
        h = ctx.call(self.cell, h, ctx.call(self.embed, token))
        return h, ctx.call(self.head, h)

    def decode(self, starts, bounds, width):
        engine = flow.Engine(self.loom)
        initial = engine.import_rows(starts, self.hidden)
        options = dict(start=START, end=END, max_length=bounds, token_type=self.token)
        if width == 0:
            return [h.tokens for h in flow.greedy(engine, self.step, initial, **options)]
        found = flow.beam_search(engine, self.step, initial, width=width, **options)
        return [h[0].tokens for h in found]


def examples(n, hidden, seed):
    """Digit strings of 3 to 8 digits, their bounds, and their encodings (the initial states)."""
    rng = np.random.default_rng(seed + 1)
    positions = rng.normal(0, 1, (8, 10, hidden)).astype(np.float32)
    strings = [rng.integers(0, 10, rng.integers(3, 9)) for _ in range(n)]
    starts = np.stack([np.tanh(sum(positions[i, d] for i, d in enumerate(s))) for s in strings])
    return starts.astype(np.float32), [len(s) + 1 for s in strings]


def timed(fn):
    """CPU seconds of this process (one thread): what the machine's other load does not change."""
    began = time.process_time()
    fn()
    return time.process_time() - began


def python_rounds(model, starts, bounds, width, rounds):
    batched, alone = [], []
    for _ in range(rounds):
        batched.append(timed(lambda: model.decode(starts, bounds, width)))
        alone.append(timed(lambda: [model.decode(starts[i:i + 1], bounds[i:i + 1], width)
                                    for i in range(len(bounds))]))
    return batched, alone


def cpp_rounds(binary, model, starts, bounds, width, rounds):
    with tempfile.TemporaryDirectory() as folder:
        for name, array in (("E.f32", model.e), ("W.f32", model.w), ("U.f32", model.u),
                            ("h0.f32", starts)):
            np.ascontiguousarray(array, np.float32).tofile(os.path.join(folder, name))
        np.asarray(bounds, np.int32).tofile(os.path.join(folder, "bounds.i32"))
        out = subprocess.run([binary, folder, str(starts.shape[1]), str(VOCABULARY),
                              str(len(bounds)), str(width), str(rounds)],
                             check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def report(name, seconds, n):
    median = statistics.median(seconds)
    return median, f"{name}: {n / median:,.0f} sequences/s (median of {len(seconds)}: " + \
        ", ".join(f"{s * 1e3:.1f}" for s in seconds) + " ms)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=64)
    parser.add_argument("--width", type=int, default=4, help="beam width (0: greedy)")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cpp", help="the weft_bench_flow_reverse program, for the C++ baseline")
    args = parser.parse_args()
    weft.train.set_num_threads(1)
    model = ReverseDecoder(args.hidden, args.seed)
    starts, bounds = examples(args.examples, args.hidden, args.seed)
    answers = model.decode(starts, bounds, args.width)  # also the untimed warm-up
    model.decode(starts[:1], bounds[:1], args.width)
    lengths = [len(t) for t in answers]
    print(f"width {args.width or 'greedy'}, {args.examples} examples, hidden {args.hidden}: "
          f"lengths {min(lengths)}..{max(lengths)} (mean {np.mean(lengths):.1f})")
    batched, alone = python_rounds(model, starts, bounds, args.width, args.rounds)
    b, line = report("weft.flow batched", batched, args.examples)
    print(line)
    a, line = report("weft.flow one at a time", alone, args.examples)
    print(line)
    print(f"batched / one at a time: {a / b:.2f}x")
    if args.cpp:
        cpp = cpp_rounds(args.cpp, model, starts, bounds, args.width, args.rounds)
        assert cpp["tokens"] == answers, "the C++ search decoded other sequences"
        c, line = report("C++ search batched", cpp["batched"], args.examples)
        print(line + " (same answers)")
        ca, line = report("C++ one at a time", cpp["alone"], args.examples)
        print(line)
        print(f"weft.flow batched time / C++ batched time: {b / c:.2f}x; C++ batched / one at a "
              f"time: {ca / c:.2f}x")


if __name__ == "__main__":
    main()
