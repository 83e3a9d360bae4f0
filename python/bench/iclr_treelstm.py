#!/usr/bin/env python3
"""The ICLR 2017 tree benchmark written in Python with Weft blocks, side by side with the PyTorch
peer (bench/peers/torch_treelstm.py, depth-batched "full-dynamic" mode: TorchFold's per-depth
index_select + cell + cat) and with `weft bench treelstm` (C++), on the same trees and weights.

1. `weft bench treelstm --export DIR` writes the trees, the initial weights and a check batch's
   loss and sum of squared gradients (and times the C++ rows).
2. The Python model: a ForwardDeclaration recursion, a OneOf on a native key (GetItem), the
   leaf and the Tree-LSTM cell as Python Function bodies (one call per depth), loss 1/2 sum y^2,
   backward and SGD; it must reproduce the check batch's loss and sum g^2.
3. Each batch size: the Python-Weft rate and the PyTorch rate, one thread each, the same
   timing rules as the peer (one warm-up batch, then the median of the timed batches).

    /usr/bin/python3 python/bench/iclr_treelstm.py --weft build/release/tools/weft/weft \
        --vector-size 128 --batch-sizes 1,8,32,64,128,256 --threads 1
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "peers"))
import torch_treelstm as peer  # noqa: E402

import weft  # noqa: E402
from weft import blocks as td  # noqa: E402
from weft.blocks import Type  # noqa: E402


def to_nested(postfix):
    """Postfix word ids (-1: an internal node) -> {"k": 0, "w": id} / {"k": 1, "c": [l, r]}."""
    stack = []
    for v in postfix.tolist():
        if v >= 0:
            stack.append({"k": 0, "w": v})
        else:
            r = stack.pop()
            stack[-1] = {"k": 1, "c": [stack[-1], r]}
    return stack[0]


class PyWeftModel:
    def __init__(self, weights, n):
        p = {k: weft.Parameter(k, np.array(v, dtype=np.float32)) for k, v in weights.items()}
        self.params = [p[k] for k in ("embedding", "w0", "b0", "w1", "b1")]
        table, w0, b0, w1, b1 = self.params
        vec = Type.vector(n)

        def leaf(ids):
            return weft.embedding_lookup(table, ids.value)

        def cell(left, right):
            h0 = weft.relu(weft.linear(weft.concat([left, right]), w0, b0))
            fl, fr, i, g = weft.split(weft.linear(h0, w1, b1), 4)
            return weft.sigmoid(fl) * left + weft.sigmoid(fr) * right + weft.sigmoid(i) * weft.tanh(g)

        decl = td.ForwardDeclaration(Type.input(), vec)
        leaf_b = td.GetItem("w") >> td.Scalar("int32") >> td.Function("leaf", [Type.scalar("int32")], leaf)
        node_b = td.GetItem("c") >> td.Record([decl(), decl()]) >> td.Function("cell", [vec, vec], cell)
        self.model = td.OneOf(td.GetItem("k"), [leaf_b, node_b])
        decl.resolve_to(self.model)
        self.compiler = td.Compiler(self.model, threads=1)
        self.tape = weft.Tape()

    def step(self, trees, train, lr=1e-5, want_grad_sq=False):
        """One batch (weave included); returns (weave s, total s, loss, sum g^2)."""
        start = time.perf_counter()
        batch = self.compiler.weave(trees)
        weave_s = time.perf_counter() - start
        self.tape.clear()
        self.tape.grad_enabled = train
        with self.tape:
            y = self.compiler.run(batch, self.tape).output()
            if not train:
                loss = float(weft.sum(y).item())
                return weave_s, time.perf_counter() - start, loss, 0.0
            loss = weft.sum(y * y) * 0.5
            self.tape.backward(loss)
        grad_sq = 0.0
        for p in self.params:
            g = p.grad.numpy()
            if want_grad_sq:
                grad_sq += float((g.astype(np.float64) ** 2).sum())
            v = p.value.numpy()
            v -= lr * g
            p.zero_grad()
        return weave_s, time.perf_counter() - start, float(loss.item()), grad_sq


def run_row(model_factory, trees_file, batch, train, repeats):
    model = model_factory()
    batch_s, weave_s = [], []
    for index in range(peer.timed_batches(batch, repeats) + 1):
        trees = [to_nested(t) for t in trees_file[f"B{batch}/random/{index}"]]
        w, total, _, _ = model.step(trees, train)
        if index > 0:
            batch_s.append(total)
            weave_s.append(w)
    median = float(np.median(batch_s))
    return {"trees_per_s": batch / median, "batch_s_median": median, "weave_s": float(np.median(weave_s))}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--weft", required=True, help="the weft tool (build/release/tools/weft/weft)")
    p.add_argument("--vector-size", type=int, default=128)
    p.add_argument("--batch-sizes", default="1,8,32,64,128,256")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--infer", action="store_true")
    p.add_argument("--out-dir", default="build/iclr_python")
    args = p.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    weft.train.set_num_threads(args.threads)
    peer.torch.set_num_threads(args.threads)
    peer.torch.set_num_interop_threads(1)
    command = [args.weft, "bench", "treelstm", "--model", "tree-lstm", "--vector-size", str(args.vector_size),
               "--batch-sizes", args.batch_sizes, "--modes", "full-dynamic",
               "--infer" if args.infer else "--train", "--threads", str(args.threads),
               "--repeats", str(args.repeats), "--format", "json",
               "--out", os.path.join(args.out_dir, "weft.json"), "--export", args.out_dir]
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    cpp_rows = {r["batch_size"]: r for r in json.load(open(os.path.join(args.out_dir, "weft.json")))["rows"]}
    trees, _ = peer.load_safetensors(os.path.join(args.out_dir, "trees.safetensors"))
    weights, _ = peer.load_safetensors(os.path.join(args.out_dir, f"weights_V{args.vector_size}.safetensors"))
    checks = json.load(open(os.path.join(args.out_dir, "check.json")))
    check = next(c for c in checks if c["vector_size"] == args.vector_size)
    first = int(args.batch_sizes.split(",")[0])
    batch = [to_nested(t) for t in trees[f"B{first}/random/0"]]
    _, _, loss, grad_sq = PyWeftModel(weights, args.vector_size).step(batch, True, want_grad_sq=True)
    same = abs(loss - check["loss"]) <= 1e-4 * abs(check["loss"]) and \
        abs(grad_sq - check["grad_sq"]) <= 1e-3 * abs(check["grad_sq"])
    print(f"cross-check: loss C++ {check['loss']:.9g} Python {loss:.9g}; sum g^2 C++ {check['grad_sq']:.9g} "
          f"Python {grad_sq:.9g}: {'same' if same else 'DIFFERENT'}", flush=True)
    print(f"{'B':>5} {'py-weft/s':>10} {'c++weft/s':>10} {'torch/s':>9} {'py/torch':>9} {'py/c++':>7} "
          f"{'py weave%':>9}", flush=True)
    for b in [int(x) for x in args.batch_sizes.split(",")]:
        w = run_row(lambda: PyWeftModel(weights, args.vector_size), trees, b, not args.infer, args.repeats)
        t = peer.run_row(trees, weights, "tree-lstm", "full-dynamic", b, not args.infer, args.repeats, 32)
        c = cpp_rows.get(b, {}).get("trees_per_s", float("nan"))
        print(f"{b:>5} {w['trees_per_s']:>10.1f} {c:>10.1f} {t['trees_per_s']:>9.1f} "
              f"{w['trees_per_s'] / t['trees_per_s']:>9.2f} {w['trees_per_s'] / c:>7.2f} "
              f"{100 * w['weave_s'] / w['batch_s_median']:>9.1f}", flush=True)
    print(f"torch {peer.torch.__version__}, threads {args.threads}, vector size {args.vector_size}")


if __name__ == "__main__":
    main()
