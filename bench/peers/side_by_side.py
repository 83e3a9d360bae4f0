#!/usr/bin/env python3
"""Weft against PyTorch on the ICLR 2017 benchmark, in one run, on the same trees and threads.

1. Runs `weft bench treelstm ... --export DIR --format json`: Weft's rows, plus the trees,
   the initial weights (safetensors) and Weft's loss and Σ grad² on a check batch.
2. Cross-checks correctness: PyTorch loads those weights, runs the check batch and must give
   the same loss and Σ grad² (relative 1e-4 / 1e-3), or the script fails.
3. Times PyTorch (bench/peers/torch_treelstm.py) on the same trees, modes and thread count
   (OPENBLAS/OMP/MKL_NUM_THREADS set before torch loads; a row whose CPU time exceeds the
   threads' wall time fails the run), and prints both side by side with torch_time /
   weft_time per row; writes CSV to DIR.

Usage: bench/peers/side_by_side.py --weft build/treebench/tools/weft/weft --vector-size 128
       [--batch-sizes 1,8,32,64,128,256] [--modes ...] [--infer] [--threads 1] [--repeats 3]
PyTorch: Debian's python3-torch (`apt-get install python3-torch`; run with /usr/bin/python3).
"""

import argparse
import csv
import json
import os
import subprocess
import sys


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_threads import pin_gemm_threads  # noqa: E402

pin_gemm_threads()  # before torch loads
import torch_treelstm as peer  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--weft", required=True, help="path of the weft executable")
    p.add_argument("--model", default="tree-lstm", choices=["tree-lstm", "tree-fc"])
    p.add_argument("--tree-type", default="random", choices=["random", "balanced", "sequence"])
    p.add_argument("--tree-size", type=int, default=128)
    p.add_argument("--vector-size", default="128", help="comma-separated")
    p.add_argument("--batch-sizes", default="1,8,32,64,128,256")
    p.add_argument("--modes", default=",".join(peer.MODES))
    p.add_argument("--infer", action="store_true", help="inference instead of training")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--max-unbatched-trees", type=int, default=32)
    p.add_argument("--ceiling-seconds", default="0.05")
    p.add_argument("--max-step-rows", type=int, default=0,
                   help="Weft runs loom steps in batched calls of at most this many rows (0: whole)")
    p.add_argument("--out-dir", default="side_by_side_out")
    p.add_argument("--torch-flush-denormal", action="store_true",
                   help="PyTorch at its best on Intel cores: torch.set_flush_denormal(True), as "
                        "Weft flushes by default (WEFT_DENORMALS)")
    p.add_argument("--reuse-weft", action="store_true",
                   help="keep the Weft rows and exports already in --out-dir; run PyTorch only "
                        "(its --repeats may be lower: it then times the first of the same batches)")
    return p.parse_args()


def run_weft(args):
    os.makedirs(args.out_dir, exist_ok=True)
    command = [
        args.weft, "bench", "treelstm", "--model", args.model, "--tree-type", args.tree_type,
        "--tree-size", str(args.tree_size), "--vector-size", args.vector_size,
        "--batch-sizes", args.batch_sizes, "--modes", args.modes,
        "--infer" if args.infer else "--train", "--threads", str(args.threads),
        "--repeats", str(args.repeats), "--seed", str(args.seed),
        "--max-unbatched-trees", str(args.max_unbatched_trees),
        "--ceiling-seconds", args.ceiling_seconds, "--max-step-rows", str(args.max_step_rows),
        "--format", "json",
        "--out", os.path.join(args.out_dir, "weft.json"), "--export", args.out_dir,
        "--plot", os.path.join(args.out_dir, "weft.svg"),
    ]
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True)
    with open(os.path.join(args.out_dir, "weft.json")) as f:
        return json.load(f)["rows"]


def cross_check(args, trees):
    """PyTorch's loss and Σ grad² on Weft's check batch must equal Weft's."""
    with open(os.path.join(args.out_dir, "check.json")) as f:
        checks = json.load(f)
    with open(os.path.join(args.out_dir, "weft.json")) as f:  # Weft checked its first batch size
        first = json.load(f)["options"]["batch_sizes"][0]
    batch = trees[f"B{first}/random/0"]
    for check in checks:
        v = check["vector_size"]
        weights, _ = peer.load_safetensors(os.path.join(args.out_dir, f"weights_V{v}.safetensors"))
        model = peer.Model(weights, args.model)
        _, _, loss, grad_sq = peer.step(model, "full-dynamic", batch, True, 1e-5, want_grad_sq=True)
        loss_ok = abs(loss - check["loss"]) <= 1e-4 * abs(check["loss"])
        grad_ok = abs(grad_sq - check["grad_sq"]) <= 1e-3 * abs(check["grad_sq"])
        print(f"cross-check V={v}: loss weft {check['loss']:.9g} torch {loss:.9g}; "
              f"sum grad^2 weft {check['grad_sq']:.9g} torch {grad_sq:.9g}: "
              f"{'same' if loss_ok and grad_ok else 'DIFFERENT'}", flush=True)
        if not (loss_ok and grad_ok):
            sys.exit("side_by_side: Weft and PyTorch disagree on the same weights and trees")


def main():
    args = parse_args()
    if peer.torch is None:
        sys.exit("side_by_side: PyTorch is missing. On Debian 12: apt-get install python3-torch "
                 "python3-numpy, then run this script with /usr/bin/python3.")
    peer.torch.set_num_threads(args.threads)
    peer.torch.set_num_interop_threads(1)
    if args.torch_flush_denormal and not peer.torch.set_flush_denormal(True):
        sys.exit("side_by_side: this CPU does not let PyTorch flush denormals")
    if args.reuse_weft:
        with open(os.path.join(args.out_dir, "weft.json")) as f:
            weft_rows = json.load(f)["rows"]
    else:
        weft_rows = run_weft(args)
    batch_sizes = {int(b) for b in args.batch_sizes.split(",")}
    modes = set(args.modes.split(","))
    weft_rows = [w for w in weft_rows if w["batch_size"] in batch_sizes and w["mode"] in modes]
    trees, _ = peer.load_safetensors(os.path.join(args.out_dir, "trees.safetensors"))
    cross_check(args, trees)
    rows = []
    header = f"{'mode':<13} {'V':>5} {'B':>5} {'phase':<5} {'weft/s':>9} {'torch/s':>9} " \
             f"{'torch_t/weft_t':>14} {'weft_weave%':>11} {'torch_weave%':>12} {'torch_cpu/wall':>14}"
    print(header, flush=True)
    weights_of = {}
    for w in weft_rows:
        v = w["vector_size"]
        if v not in weights_of:
            weights_of[v], _ = peer.load_safetensors(
                os.path.join(args.out_dir, f"weights_V{v}.safetensors"))
        t = peer.run_row(trees, weights_of[v], args.model, w["mode"], w["batch_size"],
                         not args.infer, args.repeats, args.max_unbatched_trees)
        ratio = t["batch_s_median"] / w["batch_s_median"]
        rows.append({"mode": w["mode"], "vector_size": v, "batch_size": w["batch_size"],
                     "phase": w["phase"], "threads": args.threads,
                     "weft_trees_per_s": w["trees_per_s"], "torch_trees_per_s": t["trees_per_s"],
                     "torch_time_over_weft_time": ratio,
                     "weft_weave_s": w["weave_s"], "torch_weave_s": t["weave_s"],
                     "weft_peak_rss_mb": w["peak_rss_mb"], "torch_peak_rss_mb": t["peak_rss_mb"],
                     "torch_cpu_over_wall": t["cpu_over_wall"]})
        print(f"{w['mode']:<13} {v:>5} {w['batch_size']:>5} {w['phase']:<5} "
              f"{w['trees_per_s']:>9.2f} {t['trees_per_s']:>9.2f} {ratio:>14.2f} "
              f"{100 * w['weave_s'] / w['batch_s_median']:>11.1f} "
              f"{100 * t['weave_s'] / t['batch_s_median']:>12.1f} {t['cpu_over_wall']:>14.2f}",
              flush=True)
        if t["cpu_over_wall"] > 1.15 * args.threads:
            sys.exit(f"side_by_side: PyTorch used {t['cpu_over_wall']:.2f} cores with --threads "
                     f"{args.threads}: a thread pool escaped the pinning")
    path = os.path.join(args.out_dir, "side_by_side.csv")
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path}; torch {peer.torch.__version__}, threads {args.threads}")


if __name__ == "__main__":
    main()
