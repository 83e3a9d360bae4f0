#!/usr/bin/env python3
"""Weave rate (tree nodes per second, one thread) of a Python-defined Tree-LSTM model, with every
per-node decision in native blocks, and with Python callables in weaving (a OneOf key function
and an InputTransform per leaf): the cost of taking the GIL and converting a node's value to
Python at every node. Weaving only (no kernels), the same random binary trees for both.

    /usr/bin/python3 python/bench/weave_rate.py [--trees 2000] [--leaves 64]
"""

import argparse
import random
import time

import weft
from weft import blocks as td
from weft.blocks import Type


def random_tree(leaves, rng):
    if leaves == 1:
        return {"k": 0, "w": rng.randrange(1000)}
    left = rng.randint(1, leaves - 1)
    return {"k": 1, "c": [random_tree(left, rng), random_tree(leaves - left, rng)]}


def model(n, python_callables):
    table = weft.Parameter("embedding", weft.zeros([1000, n]))
    vec = Type.vector(n)
    decl = td.ForwardDeclaration(Type.input(), vec)
    word = td.GetItem("w")
    if python_callables:
        word = word >> td.InputTransform(lambda w: w % 1000, "bucket")
    leaf = word >> td.Scalar("int32") >> td.Function(
        "leaf", [Type.scalar("int32")], lambda ids: weft.embedding_lookup(table, ids.value))
    node = td.GetItem("c") >> td.Record([decl(), decl()]) >> td.Function(
        "cell", [vec, vec], lambda a, b: weft.tanh(a + b))
    key = (lambda t: t["k"]) if python_callables else td.GetItem("k")
    root = td.OneOf(key, [leaf, node])
    decl.resolve_to(root)
    return td.Compiler(root, threads=1), table


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trees", type=int, default=2000)
    p.add_argument("--leaves", type=int, default=64)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    rng = random.Random(0)
    trees = td.Inputs([random_tree(args.leaves, rng) for _ in range(args.trees)])  # converted once
    nodes = args.trees * (2 * args.leaves - 1)
    print(f"{args.trees} trees of {args.leaves} leaves = {nodes} nodes per weave, 1 thread")
    for python_callables in (False, True):
        compiler, _ = model(16, python_callables)
        compiler.weave(trees)  # warm-up
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            batch = compiler.weave(trees)
            times.append(time.perf_counter() - start)
        best = sorted(times)[len(times) // 2]
        label = "Python key + InputTransform" if python_callables else "native blocks only"
        print(f"{label:<28} {nodes / best / 1e6:8.2f} M nodes/s  ({batch.num_calls / best / 1e6:.2f} M loom "
              f"calls/s, median of {args.repeats})")


if __name__ == "__main__":
    main()
