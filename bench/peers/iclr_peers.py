#!/usr/bin/env python3
"""The ICLR 2017 Tree-LSTM benchmark: Weft against PyTorch at its best, interleaved, one thread.

Per round: `weft bench treelstm` (full-dynamic, manual; it also exports the trees and weights),
then each PyTorch in turn on the same trees and weights: eager depth-batched (TorchFold's way,
torch_treelstm's full-dynamic), eager hand-batched (its manual) and, on PyTorch 2, torch.compile
of the hand-batched step (manual-compiled) — the first PyTorch is the interpreter running this
script, the others are --other-python interpreters (Debian's 1.13: /usr/bin/python3), run as
`--torch-only` children. Every PyTorch is checked against Weft's loss and Σ grad² on Weft's
check batch first (side_by_side.py's cross-check) and the compiled step against the eager one.
Denormals flushed on both sides (Weft flushes by default). Rows go to DIR/rows.json.

    build/peers-venv/bin/python bench/peers/iclr_peers.py --weft build/test/tools/weft/weft \
      --vector-size 128 --batch-size 256 [--infer] --repeats 5 --rounds 2 \
      --other-python /usr/bin/python3 --out-dir bench/results/2026-11-29-peers/n128-b256-train
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_threads import pin_gemm_threads  # noqa: E402

pin_gemm_threads()  # before torch loads
import side_by_side  # noqa: E402
import torch_treelstm as peer  # noqa: E402

NAMES = {"full-dynamic": "depth-batched", "manual": "hand-batched",
         "manual-compiled": "compiled hand-batched"}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--weft", help="path of the weft executable")
    p.add_argument("--vector-size", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--infer", action="store_true")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--ceiling-seconds", default="0.2")
    p.add_argument("--other-python", action="append", default=[])
    p.add_argument("--out-dir", required=True)
    p.add_argument("--torch-only", action="store_true", help="(internal) time this PyTorch only")
    return p.parse_args()


def run_weft(args, round_index):
    out = os.path.join(args.out_dir, "weft.json")  # where side_by_side's cross-check reads it
    command = [args.weft, "bench", "treelstm", "--vector-size", str(args.vector_size),
               "--batch-sizes", str(args.batch_size), "--modes", "full-dynamic,manual",
               "--infer" if args.infer else "--train", "--threads", "1",
               "--repeats", str(args.repeats), "--ceiling-seconds", args.ceiling_seconds,
               "--format", "json", "--out", out, "--export", args.out_dir, "--quiet"]
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True)
    with open(out) as f:
        rows = json.load(f)["rows"]
    shutil.copy(out, os.path.join(args.out_dir, f"weft_round{round_index}.json"))
    return [{"side": "weft", "mode": r["mode"], "trees_per_s": r["trees_per_s"],
             "gemm_fraction": r.get("gemm_fraction"), "round": round_index} for r in rows]


def run_torch(args, round_index):
    """This interpreter's PyTorch: cross-check, then its modes (compiled on PyTorch 2)."""
    torch = peer.torch
    trees, _ = peer.load_safetensors(os.path.join(args.out_dir, "trees.safetensors"))
    args.model = "tree-lstm"
    side_by_side.cross_check(args, trees)  # exits if PyTorch and Weft disagree
    weights, _ = peer.load_safetensors(
        os.path.join(args.out_dir, f"weights_V{args.vector_size}.safetensors"))
    modes = ["full-dynamic", "manual"]
    if int(torch.__version__.split(".")[0]) >= 2:
        modes.append("manual-compiled")
    rows = []
    for mode in modes:
        start = time.perf_counter()
        row = peer.run_row(trees, weights, "tree-lstm", mode, args.batch_size, not args.infer,
                           args.repeats, 32)
        rows.append({"side": f"torch {torch.__version__}", "mode": mode,
                     "trees_per_s": row["trees_per_s"], "round": round_index,
                     "cpu_over_wall": row["cpu_over_wall"],
                     "row_s": time.perf_counter() - start})
        print(f"torch {torch.__version__} {NAMES[mode]}: {row['trees_per_s']:.2f} trees/s",
              flush=True)
    return rows


def main():
    args = parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    peer.torch.set_num_threads(1)
    peer.torch.set_num_interop_threads(1)
    if not peer.torch.set_flush_denormal(True):
        sys.exit("iclr_peers: this CPU does not let PyTorch flush denormals")
    if args.torch_only:
        print(json.dumps(run_torch(args, int(os.environ.get("IC_ROUND", "0")))))
        return
    rows = []
    for r in range(args.rounds):
        rows += run_weft(args, r)
        rows += run_torch(args, r)
        for other in args.other_python:
            command = [other, os.path.abspath(__file__), "--torch-only",
                       "--vector-size", str(args.vector_size), "--batch-size",
                       str(args.batch_size), "--repeats", str(args.repeats),
                       "--out-dir", args.out_dir] + (["--infer"] if args.infer else [])
            done = subprocess.run(command, check=True, capture_output=True, text=True,
                                  env={**os.environ, "IC_ROUND": str(r)})
            print(done.stdout.rsplit("\n", 2)[0], flush=True)
            rows += json.loads(done.stdout.strip().splitlines()[-1])
    phase = "infer" if args.infer else "train"
    print(f"N = {args.vector_size}, B = {args.batch_size}, {phase}, trees/s per round:")
    for side_mode in dict.fromkeys((row["side"], row["mode"]) for row in rows):
        figures = [row["trees_per_s"] for row in rows if (row["side"], row["mode"]) == side_mode]
        name = side_mode[1] if side_mode[0] == "weft" else NAMES[side_mode[1]]
        print(f"  {side_mode[0]:<22} {name:<22} "
              + ", ".join(f"{x:.2f}" for x in figures))
    with open(os.path.join(args.out_dir, "rows.json"), "w") as f:
        json.dump({"vector_size": args.vector_size, "batch_size": args.batch_size,
                   "phase": phase, "repeats": args.repeats, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
