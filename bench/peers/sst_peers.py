#!/usr/bin/env python3
"""The SST Tree-LSTM (python/examples/torch/sst_tree_lstm.py's model: Tai et al.'s leaf, the binary
N-ary cell, every node's cross-entropy) trained and run by its peers, one thread, rounds
interleaved, trees/s:

  dgl            DGL's way (its examples/pytorch/tree_lstm): the trees merged by dgl.batch, the
                 cell as message / reduce functions over dgl.prop_nodes_topo's frontiers
  torchfold      torchfold 0.1.0 itself (torch.tensor._TensorBase shimmed, as torchfold_compare)
  weft-fold      the same torch modules through weft.torch.Fold (torchfold's API over Weft)
  torch-bodies   Weft batching, the torch modules as bodies (sst_tree_lstm.TorchTreeLSTM)
  weft-cells     Weft's own cells inside the torch model (sst_tree_lstm.WeftTreeLSTM)

DGL's graphs are built once per tree (as its SSTDataset does) and batched per step (dgl.batch);
likewise torch-bodies and weft-cells convert the trees for Weft once (td.Inputs) and pick each
step's batch from them (Inputs.take), as python/examples/torch/sst_tree_lstm.py does.
dgl, torchfold, weft-fold and torch-bodies share one set of torch modules: before timing they are
checked equal (loss and gradient norm, dropout off) on the same weights and trees. weft-cells
has Weft's own parameters (timed, not compared). One untimed training and inference pass per
way first (Weft calibrates its products per shape on first sight). Training: Adam steps of --batch-size trees;
inference: forward passes under torch.no_grad(), eval mode. Also prints the batched calls per
pass (torch bodies' leaf / composer / classifier calls) and the torch bodies' overhead over
Weft's cells per batched call. Runs in build/peers-venv-dgl (DGL needs torch 2.2.1):

    PYTHONPATH=build/test/python build/peers-venv-dgl/bin/python bench/peers/sst_peers.py \
      --data-dir /work/shared/data --trees 500 --rounds 3
"""

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[1] / "python" / "examples" / "torch"))
sys.path.insert(0, str(HERE.parents[1] / "python" / "examples"))

import sst_tree_lstm as sst  # noqa: E402
import torch_bodies  # noqa: E402  (bench/torch_bodies.py: FoldMethods, the torchfold program)
from torchfold_compare import real_torchfold  # noqa: E402
from tree_lstm_sst import read_trees  # noqa: E402
from weft import blocks as td  # noqa: E402

os.environ.setdefault("DGLBACKEND", "pytorch")
import dgl  # noqa: E402


def dgl_graph(tree):
    """One tree as a DGL graph, edges child -> parent (left child first: the mailbox order)."""
    src, dst, words, labels, leaf = [], [], [], [], []

    def visit(t):
        k = len(words)
        words.append(t.get("id", 0))
        labels.append(t["label"])
        leaf.append(t["pair"] == 0)
        if t["pair"]:
            for child in t["children"]:
                src.append(visit(child))
                dst.append(k)
        return k

    visit(tree)
    g = dgl.graph((torch.tensor(src, dtype=torch.int64), torch.tensor(dst, dtype=torch.int64)),
                  num_nodes=len(words))
    g.ndata["word"] = torch.tensor(words)
    g.ndata["label"] = torch.tensor(labels)
    g.ndata["leaf"] = torch.tensor(leaf)
    return g


class DglTreeLSTM:
    """DGL's Tree-LSTM over the modules of a TorchTreeLSTM: leaves all at once, then the cell on
    each topological frontier (message: the children's h and c; reduce: the binary cell)."""

    def __init__(self, model):
        self.model = model

    @staticmethod
    def message(edges):
        return {"h": edges.src["h"], "c": edges.src["c"]}

    def reduce(self, nodes):
        h, c = nodes.mailbox["h"], nodes.mailbox["c"]
        h, c = self.model.composer(h[:, 0], c[:, 0], h[:, 1], c[:, 1])
        return {"h": h, "c": c}

    def __call__(self, graphs):
        g = dgl.batch(graphs)
        leaves = g.ndata["leaf"].nonzero().squeeze(1)
        h_leaf, c_leaf = self.model.leaf(g.ndata["word"][leaves])
        n = h_leaf.shape[1]
        g.ndata["h"] = torch.zeros(g.num_nodes(), n).index_copy(0, leaves, h_leaf)
        g.ndata["c"] = torch.zeros(g.num_nodes(), n).index_copy(0, leaves, c_leaf)
        for frontier in dgl.topological_nodes_generator(g)[1:]:  # the leaves are done
            g.pull(frontier, self.message, self.reduce)
        logits = self.model.classifier(self.model.dropout(g.ndata["h"]))
        roots = torch.cumsum(g.batch_num_nodes(), 0) - g.batch_num_nodes()  # visit(): root first
        return logits, g.ndata["label"], logits[roots]


def dgl_loss(model, graphs):
    logits, labels, _ = DglTreeLSTM(model)(graphs)
    return torch.nn.functional.cross_entropy(logits, labels, reduction="sum") / len(graphs)


def torchfold_loss(module):
    def loss(model, trees):
        original = torch_bodies.Fold
        torch_bodies.Fold = module.Fold
        try:
            return torch_bodies.fold_loss(model, trees)
        finally:
            torch_bodies.Fold = original
    return loss


def grad_norm(model):
    return float(torch.sqrt(sum((p.grad ** 2).sum() for p in model.parameters()
                                if p.grad is not None)))


def check_equal(ways, vocab, hidden, first_batch):
    """Loss and gradient norm of every way sharing the torch modules, on the first batch (its
    trees, graphs or indices, by the way's kind of data), dropout off: equal or not timed."""
    torch.manual_seed(1)
    model = sst.TorchTreeLSTM(vocab, 100, hidden, dropout=0.0)
    figures = {}
    for name, (_, loss_fn, data) in ways.items():
        if name == "weft-cells":
            continue
        model.zero_grad()
        loss = loss_fn(model, first_batch[data])
        loss.backward()
        figures[name] = (float(loss), grad_norm(model))
    base = figures["torch-bodies"]
    for name, (loss, norm) in figures.items():
        print(f"check {name}: loss {loss:.6f}, gradient norm {norm:.6f}", flush=True)
        # isclose is false for a NaN on either side, so a NaN loss or norm is never timed.
        if not (math.isclose(loss, base[0], rel_tol=1e-4)
                and math.isclose(norm, base[1], rel_tol=1e-4)):
            raise SystemExit(f"{name} differs from torch-bodies: not timed")
    return figures


def run(model, loss_fn, batches, train):
    """trees/s of one pass over the batches: Adam steps, or no_grad forwards in eval mode."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-3) if train else None
    model.train(train)
    trees = sum(len(b) for b in batches)
    start = time.perf_counter()
    for batch in batches:
        if train:
            opt.zero_grad()
            loss_fn(model, batch).backward()
            opt.step()
        else:
            with torch.no_grad():
                loss_fn(model, batch)
    return trees / (time.perf_counter() - start)


def recorded_calls(model, trees, batch_size):
    """The torch bodies' batched calls (leaf, composer, classifier) of one training pass: each
    call's module and its inputs' shapes and dtypes."""
    calls = []

    def hook(module, inputs, _):
        calls.append((module, [(tuple(t.shape), t.dtype) for t in inputs]))
    handles = [m.register_forward_hook(hook) for m in (model.leaf, model.composer,
                                                       model.classifier)]
    run(model, sst.loss_of_first, [trees[i:i + batch_size]
                                   for i in range(0, len(trees), batch_size)], True)
    for h in handles:
        h.remove()
    return calls


def replay_rate(calls, trees):
    """trees/s of torch alone making the recorded calls (each module run on fresh tensors of its
    input shapes, its backward from ones): what the bodies cost without Weft, to split
    torch-bodies' time over weft-cells into torch's own and Weft's glue."""
    inputs = [[torch.randint(0, 10, shape) if not dtype.is_floating_point
               else torch.randn(shape, requires_grad=True) for shape, dtype in shapes]
              for _, shapes in calls]
    start = time.perf_counter()
    for (module, _), args in zip(calls, inputs):
        out = module(*args)
        out = out if isinstance(out, tuple) else (out,)
        torch.autograd.backward(out, [torch.ones_like(o) for o in out])
    return len(trees) / (time.perf_counter() - start)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    torch_bodies.add_sst_arguments(p)
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    vocab = {"<unk>": 0}
    trees = read_trees(Path(args.data_dir) / "sst/train.txt", vocab, True, args.trees)
    graphs = [dgl_graph(t) for t in trees]  # built once, as DGL's SSTDataset does
    sst.loss_of_first = lambda model, batch: sst.loss_of(model, batch)[0]
    make_torch = lambda: sst.TorchTreeLSTM(len(vocab), 100, args.hidden)  # noqa: E731
    inputs = td.Inputs(trees)  # converted for Weft once, as the graphs are built once for DGL

    def weft_loss(model, ids):
        return sst.loss_of_first(model, inputs.take(ids))

    ways = {"dgl": (make_torch, dgl_loss, "graphs"),
            "torchfold": (make_torch, torchfold_loss(real_torchfold()), "trees"),
            "weft-fold": (make_torch, torch_bodies.fold_loss, "trees"),
            "torch-bodies": (make_torch, weft_loss, "ids"),
            "weft-cells": (lambda: sst.WeftTreeLSTM(len(vocab), 100, args.hidden),
                           weft_loss, "ids")}
    batches = {"trees": trees, "graphs": graphs, "ids": list(range(len(trees)))}
    batches = {data: [items[i:i + args.batch_size] for i in range(0, len(trees), args.batch_size)]
               for data, items in batches.items()}
    checks = check_equal(ways, len(vocab), args.hidden, {d: b[0] for d, b in batches.items()})
    skip = set(filter(None, args.skip.split(",")))
    ways = {k: v for k, v in ways.items() if k not in skip}
    rates = {(name, phase): [] for name in ways for phase in ("train", "infer")}
    for name, (make, loss_fn, data) in ways.items():  # warm-up, untimed: Weft calibrates
        run(make(), loss_fn, batches[data], True)  # its products per shape on first sight
        run(make(), loss_fn, batches[data], False)
    for _ in range(args.rounds):
        for name, (make, loss_fn, data) in ways.items():
            model = make()
            rates[(name, "train")].append(run(model, loss_fn, batches[data], True))
            rates[(name, "infer")].append(run(model, loss_fn, batches[data], False))
    recorded = recorded_calls(make_torch(), trees, args.batch_size)
    calls = len(recorded)
    medians = {}
    for (name, phase), r in rates.items():
        r = sorted(r)
        medians[(name, phase)] = r[len(r) // 2]
        print(f"{phase} {name}: median {r[len(r) // 2]:.1f} trees/s (rounds "
              f"{', '.join(f'{x:.1f}' for x in r)})", flush=True)
    print(f"torch bodies' batched calls per training pass over {len(trees)} trees: {calls}")
    replay = sorted(replay_rate(recorded, trees) for _ in range(3))[1]
    print(f"torch alone making the same calls (forward and backward): {replay:.1f} trees/s, "
          f"{1e6 * len(trees) / replay / calls:.1f} us per call")
    if ("torch-bodies", "train") in medians and ("weft-cells", "train") in medians:
        for phase in ("train", "infer"):
            extra = len(trees) / medians[("torch-bodies", phase)] - \
                len(trees) / medians[("weft-cells", phase)]
            print(f"{phase}: torch bodies' time over Weft's cells per batched call "
                  f"{1e6 * extra / calls:.1f} us")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "torch": torch.__version__, "dgl": dgl.__version__, "trees": len(trees),
            "batch_size": args.batch_size, "hidden": args.hidden, "checks": checks,
            "calls_per_pass": calls, "replay_trees_per_s": replay,
            "rates": {f"{phase} {name}": r for (name, phase), r in rates.items()}}, indent=1))


if __name__ == "__main__":
    main()
