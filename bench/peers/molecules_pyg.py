#!/usr/bin/env python3
"""python/examples/torch/molecules.py's message-passing network on ESOL, batched two ways over
the same torch modules, one thread, rounds interleaved, molecules/s (training: Adam steps;
inference: no_grad forwards):

  pyg     PyTorch Geometric's batching: Data per molecule, Batch.from_data_list per batch (its
          DataLoader's collation), MessagePassing(aggr="add") for the neighbour sums,
          global_add_pool for the readout
  weft    the example's model: torch bodies in Weft blocks, weft.torch.fold, the molecules
          converted for Weft once (td.Inputs, a batch a take() of it), as PyG's Data are built
          once
  weft-dicts  the same model given each batch as the Python dicts (converted every batch)

Checked equal first (loss and gradient norm on the same weights and molecules).

    PYTHONPATH=build/test/python build/peers-venv/bin/python bench/peers/molecules_pyg.py \
      --data-dir /work/shared/data --rounds 5
"""

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import torch
import torch_geometric
from torch_geometric.data import Batch, Data
from torch_geometric.nn import MessagePassing as PygMessagePassing
from torch_geometric.nn import global_add_pool

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python" / "examples" / "torch"))
import molecules  # noqa: E402
from weft import blocks as td  # noqa: E402


class NeighbourSum(PygMessagePassing):
    def __init__(self):
        super().__init__(aggr="add")

    def forward(self, h, edge_index):
        return self.propagate(edge_index, x=h)


def pyg_data(molecule):
    """One molecule as a PyG Data: edges j -> i for each neighbour j of atom i."""
    edges = [(j, i) for i, nbrs in enumerate(molecule["nbrs"]) for j in nbrs]
    edge_index = torch.tensor(edges, dtype=torch.long).t().reshape(2, -1)
    return Data(x=torch.tensor(molecule["atoms"]), edge_index=edge_index,
                num_nodes=len(molecule["atoms"]))


class PygModel:
    """The example's network (its modules) the PyG way."""

    def __init__(self, model):
        self.model, self.sum = model, NeighbourSum()

    def __call__(self, data_list):
        batch = Batch.from_data_list(data_list)
        h = self.model.embed(batch.x)
        for layer in self.model.updates:
            h = self.model._update(layer)(h, self.sum(h, batch.edge_index))
        return self.model.readout(global_add_pool(h, batch.batch, size=len(data_list))).squeeze(1)


def loss_of(forward, items, target):
    return torch.nn.functional.mse_loss(forward(items), target)


def grad_norm(model):
    return float(torch.sqrt(sum((p.grad ** 2).sum() for p in model.parameters()
                                if p.grad is not None)))


def run(model, forward, batches, targets, train):
    opt = torch.optim.Adam(model.parameters(), lr=3e-3) if train else None
    count = sum(len(b) for b in batches)
    start = time.perf_counter()
    for items, target in zip(batches, targets):
        if train:
            opt.zero_grad()
            loss_of(forward, items, target).backward()
            opt.step()
        else:
            with torch.no_grad():
                forward(items)
    return count / (time.perf_counter() - start)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=os.environ.get("WEFT_DATA_DIR", "../shared/data"))
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json")
    args = p.parse_args()
    torch.set_num_threads(1)
    elements = {}
    mols, y = molecules.read_esol(Path(args.data_dir) / "molecules" / "delaney-processed.csv",
                                  elements)
    datas = [pyg_data(m) for m in mols]  # built once, as a PyG dataset is
    y = torch.tensor((y - y.mean()) / y.std())
    cut = range(0, len(mols), args.batch_size)
    inputs = td.Inputs(mols)  # converted once, as the PyG dataset is built once
    batches = {"weft": [inputs.take(list(range(i, min(i + args.batch_size, len(mols)))))
                        for i in cut],
               "weft-dicts": [mols[i:i + args.batch_size] for i in cut],
               "pyg": [datas[i:i + args.batch_size] for i in cut]}
    targets = [y[i:i + args.batch_size] for i in cut]

    torch.manual_seed(0)
    model = molecules.MessagePassing(len(elements), args.hidden)
    ways = {"weft": model, "weft-dicts": model, "pyg": PygModel(model)}
    checks = {}
    for name, forward in ways.items():
        model.zero_grad()
        loss = loss_of(forward, batches[name][0], targets[0])
        loss.backward()
        checks[name] = (float(loss), grad_norm(model))
        print(f"check {name}: loss {checks[name][0]:.6f}, gradient norm {checks[name][1]:.6f}")
    (lw, nw), (lp, np_) = checks["weft"], checks["pyg"]
    # isclose is false for a NaN on either side, so a NaN loss or norm is never timed.
    if not (math.isclose(lw, lp, rel_tol=1e-4) and math.isclose(nw, np_, rel_tol=1e-4)):
        raise SystemExit("Weft and PyG differ: not timed")

    rates = {(name, phase): [] for name in ways for phase in ("train", "infer")}
    for name, forward in ways.items():  # warm-up, untimed
        run(model, forward, batches[name], targets, True)
    for _ in range(args.rounds):
        for name, forward in ways.items():
            for phase in ("train", "infer"):
                rates[(name, phase)].append(
                    run(model, forward, batches[name], targets, phase == "train"))
    for (name, phase), r in rates.items():
        r = sorted(r)
        print(f"{phase} {name}: median {r[len(r) // 2]:.1f} molecules/s (rounds "
              f"{', '.join(f'{x:.1f}' for x in r)})")
    print(f"torch {torch.__version__}, torch_geometric {torch_geometric.__version__}, "
          f"{len(mols)} molecules, batches of {args.batch_size}, hidden {args.hidden}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "torch": torch.__version__, "torch_geometric": torch_geometric.__version__,
            "molecules": len(mols), "batch_size": args.batch_size, "checks": checks,
            "rates": {f"{phase} {name}": r for (name, phase), r in rates.items()}}, indent=1))


if __name__ == "__main__":
    main()
