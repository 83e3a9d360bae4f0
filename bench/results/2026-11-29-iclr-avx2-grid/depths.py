#!/usr/bin/env python3
"""Levels per batch (the deepest tree's depth: one batched step per level) of the trees a
`weft bench treelstm --export DIR` run drew, full-dynamic's independent trees against manual's
one shape. Usage: /usr/bin/python3 depths.py DIR/trees.safetensors"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../peers"))
import torch_treelstm as peer  # noqa: E402

trees, _ = peer.load_safetensors(sys.argv[1])
levels = {}
for key in trees:
    b, kind, index = re.match(r"B(\d+)/(\w+)/(\d+)", key).groups()
    depth = max(len(peer.levels_of(t.tolist())[0]) for t in trees[key])
    levels.setdefault((int(b), kind), []).append(depth)
for (b, kind), ds in sorted(levels.items()):
    ds = ds[1:]  # batch 0 is the untimed warm-up
    print(f"B = {b:>4} {kind:<7} levels per timed batch: mean {sum(ds) / len(ds):.1f}, "
          f"min {min(ds)}, max {max(ds)} ({len(ds)} batches)")
