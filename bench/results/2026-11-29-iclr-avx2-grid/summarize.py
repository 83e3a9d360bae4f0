#!/usr/bin/env python3
"""Tables of the AVX2 grid from sitting.sh's output: per cell, full-dynamic and manual trees/s
(one core with PyTorch beside it, and unpinned), FD / manual speed, PyTorch 1.13's best of its
depth-batched and hand-batched rows and FD / that. Usage: summarize.py DIR"""
import csv
import glob
import json
import os
import re
import sys
from collections import defaultdict

d = sys.argv[1]
cells = defaultdict(lambda: defaultdict(list))  # (n, b, phase) -> key -> [per round]


def speeds(rows):
    by = {(r["mode"], int(r["batch_size"])): float(r["trees_per_s"]) for r in rows}
    return by


for path in sorted(glob.glob(os.path.join(d, "one-n*-r*/weft.json"))):
    n, phase, rnd = re.search(r"one-n(\d+)-(\w+)-r(\d+)", path).groups()
    rows = json.load(open(path))["rows"]
    torch = list(csv.DictReader(open(os.path.join(os.path.dirname(path), "side_by_side.csv"))))
    for (mode, b), s in speeds(rows).items():
        cells[(int(n), b, phase)][f"one {mode}"].append(s)
    for t in torch:
        cells[(int(n), int(t["batch_size"]), phase)][f"torch {t['mode']}"].append(
            float(t["torch_trees_per_s"]))
for path in sorted(glob.glob(os.path.join(d, "two-n*-r*.csv"))):
    n, phase, rnd = re.search(r"two-n(\d+)-(\w+)-r(\d+)", path).groups()
    for (mode, b), s in speeds(list(csv.DictReader(open(path)))).items():
        cells[(int(n), b, phase)][f"two {mode}"].append(s)


def span(xs, fmt="{:.1f}"):
    return "–".join(fmt.format(x) for x in sorted({min(xs), max(xs)})) if xs else ""


print("| N, B, phase | FD one core | manual one core | FD ÷ manual, one core | FD weave on the other"
      " core | manual there | FD ÷ manual, other core | PyTorch 1.13 best | FD ÷ PyTorch best |")
print("|---|---|---|---|---|---|---|---|---|")
for (n, b, phase) in sorted(cells, key=lambda k: (k[2] != "train", k[0], k[1])):
    c = cells[(n, b, phase)]
    fd1, m1 = c["one full-dynamic"], c["one manual"]
    fd2, m2 = c["two full-dynamic"], c["two manual"]
    best = [max(x, y) for x, y in zip(c["torch full-dynamic"], c["torch manual"])]
    which = ["depth" if x > y else "hand" for x, y in zip(c["torch full-dynamic"], c["torch manual"])]
    r1 = [f / m for f, m in zip(fd1, m1)]
    r2 = [f / m for f, m in zip(fd2, m2)]
    rp = [f / p for f, p in zip(fd1, best)]
    print(f"| {n}, {b}, {phase} | {span(fd1)} | {span(m1)} | {span(r1, '{:.2f}')} | {span(fd2)} | "
          f"{span(m2)} | {span(r2, '{:.2f}')} | {span(best)} ({'/'.join(sorted(set(which)))}) | "
          f"{span(rp, '{:.2f}')}× |")
