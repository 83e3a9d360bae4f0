#!/usr/bin/env python3
"""Where a molecules training batch goes, Weft beside PyG (bench/peers/molecules_pyg.py's models
and batches): µs per batch of 32 in the forward (loss included), backward and Adam step, summed
over `passes` interleaved passes; then the weave alone (compiler.weave of the converted batches,
best of 20 passes). Run with PYTHONPATH at a build's python/ and REPO at its checkout:

    REPO=. PYTHONPATH=build/test/python taskset -c 1 VENV_PYTHON phases.py 10
"""
import os
import sys
import time
from pathlib import Path

repo = Path(os.environ.get("REPO", "."))
sys.path.insert(0, str(repo / "python" / "examples" / "torch"))
sys.path.insert(0, str(repo / "bench" / "peers"))
import torch  # noqa: E402
import molecules  # noqa: E402
import molecules_pyg as mp  # noqa: E402
from weft import blocks as td  # noqa: E402

torch.set_num_threads(1)
elements = {}
mols, y = molecules.read_esol(Path("/work/shared/data/molecules/delaney-processed.csv"), elements)
y = torch.tensor((y - y.mean()) / y.std())
cut = range(0, len(mols), 32)
inputs = td.Inputs(mols)
datas = [mp.pyg_data(m) for m in mols]
batches = {"weft": [inputs.take(list(range(i, min(i + 32, len(mols))))) for i in cut],
           "pyg": [datas[i:i + 32] for i in cut]}
targets = [y[i:i + 32] for i in cut]
torch.manual_seed(0)
model = molecules.MessagePassing(len(elements), 32)
ways = {"weft": model, "pyg": mp.PygModel(model)}
opt = torch.optim.Adam(model.parameters(), lr=3e-3)


def run(name, acc):
    for b, t in zip(batches[name], targets):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ways[name](b), t)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        acc[0] += t1 - t0
        acc[1] += t2 - t1
        acc[2] += t3 - t2


passes = int(sys.argv[1]) if len(sys.argv) > 1 else 10
for name in ways:
    run(name, [0, 0, 0])
sums = {n: [0.0, 0.0, 0.0] for n in ways}
for _ in range(passes):
    for name in ways:
        run(name, sums[name])
n = len(targets) * passes
for name, a in sums.items():
    f, b, s = (x / n * 1e6 for x in a)
    print(f"{name}: forward {f:.1f} backward {b:.1f} adam {s:.1f} total {f + b + s:.1f} µs/batch")
compiler = model.fold.compiler
best = float("inf")
for _ in range(20):
    start = time.perf_counter()
    for b in batches["weft"]:
        compiler.weave(b)
    best = min(best, (time.perf_counter() - start) / len(batches["weft"]))
print(f"weft weave alone: {best * 1e6:.1f} µs/batch (best of 20 passes)")
