#!/usr/bin/env python3
"""Molecular property regression (ESOL solubility) with a message-passing network whose atom
embedding, update and readout are torch modules, batched by Weft: every molecule's graph is a
different shape, and each layer's update runs once for every atom of the batch. Trained by
torch.optim.Adam through weft.torch.fold; prints the test RMSE (log mol/L).

    /usr/bin/python3 python/examples/torch/molecules.py --epochs 20
"""

import argparse
import csv
import os
import re
import sys
from pathlib import Path

import numpy as np
import torch

import weft.torch as wt
from weft import blocks as td
from weft.blocks import Type

ATOM = re.compile(r"\[[^\]]+\]|Cl|Br|[BCNOPSFI]|[bcnops]|%\d\d|\d|[()=#$:/\\.+-]")


def parse_smiles(smiles, elements):
    """SMILES -> {"atoms": [element ids], "nbrs": [[neighbour indices] per atom]} (bond orders,
    charges and hydrogens dropped: the graph's shape is what this example batches)."""
    atoms, nbrs, rings, stack, prev = [], [], {}, [], None
    for token in ATOM.findall(smiles):
        if token == "(":
            stack.append(prev)
        elif token == ")":
            prev = stack.pop()
        elif token[0].isdigit() or token[0] == "%":
            if token in rings:
                other = rings.pop(token)
                nbrs[other].append(prev)
                nbrs[prev].append(other)
            else:
                rings[token] = prev
        elif token[0].isalpha() or token[0] == "[":
            symbol = re.sub(r"[^A-Za-z]", "", token.strip("[]")).capitalize()[:2] or "?"
            atoms.append(elements.setdefault(symbol, len(elements)))
            nbrs.append([])
            if prev is not None:
                nbrs[prev].append(len(atoms) - 1)
                nbrs[-1].append(prev)
            prev = len(atoms) - 1
        elif token == ".":
            prev = None
    return {"atoms": atoms, "nbrs": nbrs}


def message_layer(update):
    """Tuple(Sequence(h) atoms, Input molecule) -> Sequence(h): update(h_i, sum of neighbours):
    every atom's neighbour list read in one GatherLists step, the sums one batched call."""
    c = td.Composition(name="message_layer")
    nbrs = c.add(td.GetItem("nbrs"), c.input()[1])
    sums = c.add(td.GatherLists() >> td.Map(td.Sum(in_order=True)), [c.input()[0], nbrs])
    c.set_output(c.add(td.Zip() >> td.Map(update), [c.input()[0], sums]))
    return c


class MessagePassing(torch.nn.Module):
    def __init__(self, num_elements, n=32, layers=2):
        super().__init__()
        self.embed = torch.nn.Embedding(num_elements, n)
        self.updates = torch.nn.ModuleList(torch.nn.Linear(2 * n, n) for _ in range(layers))
        self.readout = torch.nn.Sequential(torch.nn.Linear(n, n), torch.nn.ReLU(),
                                           torch.nn.Linear(n, 1))
        h = Type.vector(n)
        atoms = td.GetItem("atoms") >> td.Map(td.Scalar("int32") >> wt.Function(
            "embed", [Type.scalar("int32")], lambda ids: self.embed(ids.long()), h))
        model = td.Composition(name="molecule")
        states = model.add(atoms, model.input())
        for k, layer in enumerate(self.updates):
            update = wt.Function(f"update{k}", [h, h], self._update(layer), h)
            states = model.add(message_layer(update), [states, model.input()])
        total = model.add(td.Sum(in_order=True), states)
        model.set_output(model.add(wt.Function("readout", [h], self.readout, Type.vector(1)),
                                   total))
        self.fold = wt.fold(model, threads=1)

    @staticmethod
    def _update(layer):
        return lambda h, m: torch.relu(layer(torch.cat([h, m], 1))) + h

    def forward(self, molecules):
        return self.fold(molecules).squeeze(1)

    def eager(self, molecule):
        """The same network on one molecule in plain torch (for checking)."""
        h = self.embed(torch.tensor(molecule["atoms"]))
        for layer in self.updates:
            m = torch.stack([h[ids].sum(0) if ids else torch.zeros_like(h[0])
                             for ids in molecule["nbrs"]])
            h = self._update(layer)(h, m)
        return self.readout(h.sum(0, keepdim=True)).squeeze(1)


def read_esol(path, elements):
    rows = list(csv.DictReader(open(path, encoding="utf-8")))
    mols = [parse_smiles(r["smiles"].strip(), elements) for r in rows]
    targets = np.asarray([float(r["measured log solubility in mols per litre"]) for r in rows],
                         np.float32)
    return mols, targets


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=os.environ.get("WEFT_DATA_DIR", "../shared/data"))
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--max-molecules", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    elements = {}
    mols, y = read_esol(Path(args.data_dir) / "molecules" / "delaney-processed.csv", elements)
    order = np.random.default_rng(args.seed).permutation(len(mols))
    if args.max_molecules:
        order = order[:args.max_molecules]
    cut = int(0.8 * len(order))
    train, test = order[:cut], order[cut:]
    mean, scale = float(y[train].mean()), float(y[train].std())
    model = MessagePassing(len(elements), args.hidden)
    data = td.Inputs(mols)  # converted for Weft once; a batch is a take() of it, not a copy
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    history = []
    for epoch in range(1, args.epochs + 1):
        total = 0.0
        for i in range(0, len(train), args.batch_size):
            idx = train[i:i + args.batch_size]
            target = torch.tensor((y[idx] - mean) / scale)
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(data.take(idx.tolist())), target)
            loss.backward()
            opt.step()
            total += float(loss) * len(idx)
        with torch.no_grad():
            pred = model(data.take(test.tolist())).numpy() * scale + mean
        rmse = float(np.sqrt(np.mean((pred - y[test]) ** 2)))
        history.append({"epoch": epoch, "loss": total / len(train), "test_rmse": rmse})
        print(f"epoch {epoch}: train loss {total / len(train):.3f}, test RMSE {rmse:.3f}",
              flush=True)
    return history


if __name__ == "__main__":
    main(sys.argv[1:])
