#!/usr/bin/env python3
"""Tree to sequence with torch bodies: a Tree-LSTM encoder (a torch cell in a Weft block) and a
GRU decoder (torch bodies of weft.flow operations), trained by torch.optim.Adam to read out a
random binary tree's leaves in order. Weft batches the encoder by depth and the decoder by step
across trees whose outputs differ in length; teacher forcing for training, greedy decoding
(each program decides its own length) for evaluation.

    /usr/bin/python3 python/examples/torch/tree2seq.py --steps 300
"""

import argparse
import sys

import numpy as np
import torch

import weft
import weft.torch as wt
from weft import blocks as td
from weft import flow
from weft.blocks import Type

VOCAB, END = 8, 0  # tokens 1..7 are leaves; 0 ends a sequence


def random_tree(rng, depth):
    if depth == 0 or rng.random() < 0.3:
        return int(rng.integers(1, VOCAB))
    return [random_tree(rng, depth - 1), random_tree(rng, depth - 1)]


def leaves(tree):
    return [tree] if isinstance(tree, int) else leaves(tree[0]) + leaves(tree[1])


class Tree2Seq(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, n)
        self.compose = torch.nn.Linear(2 * n, n)
        self.decoder = torch.nn.GRUCell(n, n)
        self.head = torch.nn.Linear(n, VOCAB)
        tree = td.ForwardDeclaration(Type.input(), Type.vector(n))
        leaf = td.Scalar("int32") >> wt.Function(
            "leaf", [Type.scalar("int32")], lambda ids: torch.tanh(self.embed(ids.long())),
            Type.vector(n))
        pair = td.Record([tree(), tree()]) >> wt.Function(
            "compose", [Type.vector(n), Type.vector(n)],
            lambda a, b: torch.tanh(self.compose(torch.cat([a, b], 1))), Type.vector(n))
        tree.resolve_to(td.OneOf(lambda t: isinstance(t, list), {True: pair, False: leaf}))
        self.encoder = td.Compiler(tree(), threads=1)
        self.loom = flow.Loom()
        self.hidden, self.token = self.loom.type([n]), self.loom.type([], "int32")
        logits = self.loom.type([VOCAB])
        self.step = wt.op(self.loom, "step", [self.hidden, self.token], [self.hidden],
                          lambda h, tok: self.decoder(self.embed(tok.long()), h))
        self.scores = wt.op(self.loom, "scores", [self.hidden], [logits], self.head)

    def _engine(self, trees, tape):
        roots = self.encoder.forward(trees, tape).output()  # the encoder, batched by depth
        engine = flow.Engine(self.loom, tape)
        return engine, engine.import_rows(roots, self.hidden)

    def loss(self, trees, tape):
        """Teacher forcing: every target token's cross-entropy, on Weft's tape."""
        with tape:
            engine, starts = self._engine(trees, tape)
            targets = [leaves(t) + [END] for t in trees]

            def forced(ctx, h, target):  # reads nothing: every call issued in one go
                out, prev = [], END
                for token in target:
                    h = ctx.call(self.step, h, ctx.constant(self.token, np.int32(prev)))
                    out.append(ctx.call(self.scores, h))
                    prev = token
                return out

            for h, target in zip(starts, targets):
                engine.admit(forced, h, target)
            engine.run()
            rows = engine.gather([v for i in range(len(trees)) for v in engine.result(i)])
            labels = np.asarray([tok for target in targets for tok in target], np.int32)
            return weft.sum(weft.softmax_cross_entropy(rows, labels)) * (1.0 / len(trees))

    def greedy(self, trees, max_length=40):
        tape = weft.Tape()
        tape.grad_enabled = False
        with tape:
            engine, starts = self._engine(trees, tape)

            def decode(ctx, h):  # decides its own length
                out, prev = [], END
                for _ in range(max_length):
                    h = ctx.call(self.step, h, ctx.constant(self.token, np.int32(prev)))
                    prev = int((yield ctx.call(self.scores, h)).argmax())
                    if prev == END:
                        break
                    out.append(prev)
                return out

            for h in starts:
                engine.admit(decode, h)
            engine.run()
            return [engine.result(i) for i in range(len(trees))]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--depth", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    model = Tree2Seq(args.hidden)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for step in range(1, args.steps + 1):
        trees = [random_tree(rng, args.depth) for _ in range(args.batch_size)]
        tape = weft.Tape()
        opt.zero_grad()
        loss = model.loss(trees, tape)
        tape.backward(loss)  # through the decoder's and the encoder's torch bodies
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        losses.append(loss.item())
        if step % max(1, args.steps // 10) == 0:
            print(f"step {step}: loss {np.mean(losses[-10:]):.3f}", flush=True)
    test = [random_tree(rng, args.depth) for _ in range(200)]
    decoded = model.greedy(test)
    exact = np.mean([d == leaves(t) for d, t in zip(decoded, test)])
    print(f"exact sequences on 200 new trees: {exact:.3f}")
    return losses, exact, model


if __name__ == "__main__":
    main(sys.argv[1:])
