#!/usr/bin/env python3
"""The weave-host-cost sittings as one table: molecules/s of Weft (converted td.Inputs and dicts)
and PyG per sitting and build, the ratios, `weft train molecules` (median of epochs 2-10, and its
inference line), and the ICLR Tree-LSTM N=128 B=8 inference full-dynamic / manual."""
import json
import re
import statistics
import sys
from pathlib import Path

here = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)
print("| sitting | build | Weft train | PyG train | ratio | Weft infer | PyG infer | ratio |"
      " dicts train / infer ratio | C++ train | C++ infer | ICLR FD | manual | FD ÷ manual |")
print("|" + " --- |" * 14)
for path in sorted(here.glob("sitting-*.txt")):
    n = int(path.stem.split("-")[1])
    text = path.read_text()
    blocks = re.split(r"== (before|after): molecules_pyg", text)[1:]
    for which, body in zip(blocks[0::2], blocks[1::2]):
        rates = json.loads((here / f"pyg-{which}-{n}.json").read_text())["rates"]
        med = {k: statistics.median(v) for k, v in rates.items()}
        rows = [json.loads(l) for l in open(here / f"train-{which}-{n}.jsonl")]
        cpp_train = statistics.median(r["examples_per_second"] for r in rows[1:])
        cpp_infer = re.search(r"dynamic batching \(agenda\): (\d+)", body).group(1)
        fd = float(re.search(r"full-dynamic\s+128\s+8 infer\s+([\d.]+)", body).group(1))
        manual = float(re.search(r"manual\s+128\s+8 infer\s+([\d.]+)", body).group(1))
        tw, tp = med["train weft"], med["train pyg"]
        iw, ip = med["infer weft"], med["infer pyg"]
        print(f"| {n} | {which} | {tw:,.1f} | {tp:,.1f} | {tw / tp:.3f} | {iw:,.1f} | {ip:,.1f} |"
              f" {iw / ip:.3f} | {med['train weft-dicts'] / tp:.3f} /"
              f" {med['infer weft-dicts'] / ip:.3f} | {cpp_train:,.0f} | {int(cpp_infer):,} |"
              f" {fd:,.1f} | {manual:,.1f} | {fd / manual:.3f} |")
