#!/usr/bin/env python3
"""Greedy decoding with weft.flow: one Python generator per example, batched by the C++ engine.
The weights are random (this shows the mechanics, not a trained model): each sentence ends when
its program picks the end token, so the sentences have different lengths, yet every step runs
one batched call per operation for all the sentences still going.

    /usr/bin/python3 python/examples/flow_decoder.py --sentences 64
"""

import argparse
import time

import numpy as np

import weft
from weft import flow

HIDDEN, VOCAB, END = 16, 12, 0


def make_decoder(seed):
    rng = np.random.default_rng(seed)
    w = weft.Parameter("w", rng.normal(0, 0.6, (HIDDEN, HIDDEN)).astype(np.float32))
    e = weft.Parameter("e", rng.normal(0, 0.6, (VOCAB, HIDDEN)).astype(np.float32))
    v = weft.Parameter("v", rng.normal(0, 1.0, (HIDDEN, VOCAB)).astype(np.float32))
    loom = flow.Loom()
    hidden, onehot, logits = loom.type([HIDDEN]), loom.type([VOCAB]), loom.type([VOCAB])
    cell = loom.op("cell", [hidden, onehot], [hidden],
                   lambda h, x: weft.tanh(weft.matmul(h, w) + weft.matmul(x, e)))
    head = loom.op("head", [hidden], [logits], lambda h: weft.matmul(h, v))
    eye = np.eye(VOCAB, dtype=np.float32)

    def greedy(ctx, start, max_length=30):
        h, token, sentence = ctx.constant(hidden, start), 1, []
        for _ in range(max_length):
            h = ctx.call(cell, h, ctx.constant(onehot, eye[token]))
            scores = yield ctx.call(head, h)  # waits for this step's batch
            token = int(scores.argmax())
            if token == END:
                break
            sentence.append(token)
        return sentence

    return loom, greedy


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    loom, greedy = make_decoder(args.seed)
    starts = np.random.default_rng(args.seed + 1).normal(0, 1, (args.sentences, HIDDEN))
    starts = starts.astype(np.float32)

    flow.run(loom, greedy, list(starts))  # warm-up: the first run calibrates the GEMM kernels
    began = time.perf_counter()
    engine = flow.Engine(loom)
    for start in starts:
        engine.admit(greedy, start)
    engine.run()
    batched = [engine.result(i) for i in range(args.sentences)]
    batched_s = time.perf_counter() - began

    began = time.perf_counter()
    alone = [flow.run(loom, greedy, [start])[0] for start in starts]
    alone_s = time.perf_counter() - began
    assert alone == batched, "batched decoding must equal one sentence at a time"

    lengths = [len(s) for s in batched]
    print(f"{args.sentences} sentences, lengths {min(lengths)}..{max(lengths)} "
          f"(mean {np.mean(lengths):.1f}); first: {batched[0]}")
    print(f"batched: {engine.stats['steps']} steps, {engine.stats['batched_calls']} batched calls "
          f"for {engine.stats['calls']} calls, {batched_s * 1e3:.1f} ms; one at a time "
          f"{alone_s * 1e3:.1f} ms ({alone_s / batched_s:.1f}x)")


if __name__ == "__main__":
    main()
