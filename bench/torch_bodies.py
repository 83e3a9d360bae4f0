#!/usr/bin/env python3
"""weft.torch's speed and memory on the SST Tree-LSTM (python/examples/torch/sst_tree_lstm.py),
one thread, training steps of `--batch-size` trees under Adam, after an untimed warm-up, rounds
interleaved:

  torch-bodies   Weft batching, torch modules as the leaf / composer / classifier bodies
  weft-cells     Weft's own cells inside the torch model (weft.torch.Blocks)
  torchfold-api  the same torch modules through weft.torch.Fold (torchfold's API)
  eager          the same torch modules, one tree and one node at a time (no batching)

Before timing, torch-bodies, torchfold-api and eager are checked equal (loss and gradient norm,
dropout off) on the same weights and trees. --rss-steps N runs N torch-bodies steps and prints
the resident memory every N/10 steps (flat: nothing kept across steps).

    PYTHONPATH=build/test/python /usr/bin/python3 bench/torch_bodies.py --trees 500 --rounds 3
"""

import argparse
import os
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python" / "examples" / "torch"))
sys.path.insert(0, str(HERE.parent / "python" / "examples"))

import sst_tree_lstm as sst  # noqa: E402
from tree_lstm_sst import read_trees  # noqa: E402
from weft.torch import Fold  # noqa: E402


def eager_loss(model, trees):
    """Every node's cross-entropy, one node at a time (the modules of TorchTreeLSTM)."""
    logits, labels = [], []

    def node(t):
        if t["pair"] == 0:
            h, c = model.leaf(torch.tensor([t["id"]], dtype=torch.int32))
        else:
            (h1, c1), (h2, c2) = node(t["children"][0]), node(t["children"][1])
            h, c = model.composer(h1, c1, h2, c2)
        logits.append(model.classifier(model.dropout(h)))
        labels.append(t["label"])
        return h, c

    for t in trees:
        node(t)
    return torch.nn.functional.cross_entropy(torch.cat(logits), torch.tensor(labels),
                                             reduction="sum") / len(trees)


class FoldMethods(torch.nn.Module):
    """TorchTreeLSTM's modules as torchfold's batched methods."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def leaf(self, ids):
        return self.model.leaf(ids)

    def compose(self, h1, c1, h2, c2):
        return self.model.composer(h1, c1, h2, c2)

    def logits(self, h):
        return self.model.classifier(self.model.dropout(h))


def fold_loss(model, trees):
    f, methods = Fold(), FoldMethods(model)
    logits, labels = [], []

    def node(t):
        if t["pair"] == 0:
            h, c = f.add("leaf", t["id"]).split(2)
        else:
            (h1, c1), (h2, c2) = node(t["children"][0]), node(t["children"][1])
            h, c = f.add("compose", h1, c1, h2, c2).split(2)
        logits.append(f.add("logits", h))
        labels.append(t["label"])
        return h, c

    for t in trees:
        node(t)
    (rows,) = f.apply(methods, [logits])
    return torch.nn.functional.cross_entropy(rows, torch.tensor(labels),
                                             reduction="sum") / len(trees)


def weft_loss(model, trees):
    return sst.loss_of(model, trees)[0]


def train_rate(model, loss_fn, trees, batch_size):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    start = time.perf_counter()
    for i in range(0, len(trees), batch_size):
        opt.zero_grad()
        loss_fn(model, trees[i:i + batch_size]).backward()
        opt.step()
    return len(trees) / (time.perf_counter() - start)


def grad_norm(model):
    return float(torch.sqrt(sum((p.grad ** 2).sum() for p in model.parameters()
                                if p.grad is not None)))


def check_equal(vocab, hidden, trees):
    torch.manual_seed(1)
    model = sst.TorchTreeLSTM(vocab, 100, hidden, dropout=0.0)
    figures = {}
    for name, fn in (("torch-bodies", weft_loss), ("torchfold-api", fold_loss),
                     ("eager", eager_loss)):
        model.zero_grad()
        loss = fn(model, trees)
        loss.backward()
        figures[name] = (float(loss), grad_norm(model))
    base = figures["eager"]
    for name, (loss, norm) in figures.items():
        print(f"check {name}: loss {loss:.6f}, gradient norm {norm:.6f}")
        assert abs(loss - base[0]) <= 1e-4 * abs(base[0]) and abs(norm - base[1]) <= 1e-4 * base[1]


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def add_sst_arguments(p):
    """The options of the SST speed scripts (this one and bench/peers/sst_peers.py)."""
    p.add_argument("--data-dir", default=os.environ.get("WEFT_DATA_DIR", "../shared/data"))
    p.add_argument("--trees", type=int, default=500)
    p.add_argument("--hidden", type=int, default=150)
    p.add_argument("--batch-size", type=int, default=25)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--skip", default="", help="comma-separated ways not to time")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_sst_arguments(p)
    p.add_argument("--rss-steps", type=int, default=0)
    args = p.parse_args()
    torch.set_num_threads(1)
    vocab = {"<unk>": 0}
    trees = read_trees(Path(args.data_dir) / "sst/train.txt", vocab, True, args.trees)
    if args.rss_steps:
        model = sst.TorchTreeLSTM(len(vocab), 100, args.hidden)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for step in range(args.rss_steps + 1):
            batch = [trees[(step * args.batch_size + k) % len(trees)]
                     for k in range(args.batch_size)]
            opt.zero_grad()
            weft_loss(model, batch).backward()
            opt.step()
            if step % max(1, args.rss_steps // 10) == 0:
                print(f"step {step}: RSS {rss_mb():.1f} MB", flush=True)
        return
    check_equal(len(vocab), args.hidden, trees[:args.batch_size])
    ways = {"torch-bodies": (lambda: sst.TorchTreeLSTM(len(vocab), 100, args.hidden), weft_loss),
            "weft-cells": (lambda: sst.WeftTreeLSTM(len(vocab), 100, args.hidden), weft_loss),
            "torchfold-api": (lambda: sst.TorchTreeLSTM(len(vocab), 100, args.hidden), fold_loss),
            "eager": (lambda: sst.TorchTreeLSTM(len(vocab), 100, args.hidden), eager_loss)}
    skip = set(filter(None, args.skip.split(",")))
    rates = {name: [] for name in ways if name not in skip}
    for name in rates:  # warm-up, untimed: first calls calibrate kernels, fill memory pools
        make, loss_fn = ways[name]
        train_rate(make(), loss_fn, trees[:4 * args.batch_size], args.batch_size)
    for _ in range(args.rounds):
        for name in rates:
            make, loss_fn = ways[name]
            rates[name].append(train_rate(make(), loss_fn, trees, args.batch_size))
    for name, r in rates.items():
        r = sorted(r)
        rounds = ", ".join(f"{x:.1f}" for x in r)
        print(f"{name}: median {r[len(r) // 2]:.1f} trees/s (rounds {rounds})")


if __name__ == "__main__":
    main()
