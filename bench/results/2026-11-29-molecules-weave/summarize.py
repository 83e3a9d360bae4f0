"""The sittings' figures in one table: medians of molecules_pyg.py's 5 rounds, the C++ model's
training rate (median of epochs 2-10, from its --log) and inference rate (agenda, its own median
of 3)."""
import json
import re
import statistics as st
import sys
from pathlib import Path

here = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
print("sitting which  weft-train pyg-train ratio | weft-infer pyg-infer ratio | "
      "C++ train (median ep2-10) | C++ infer (agenda)")
for n in (1, 2, 3):
    txt = (here / f"sitting-{n}.txt").read_text()
    for which in ("before", "after"):
        d = json.loads((here / f"pyg-{which}-{n}.json").read_text())["rates"]
        tw, tp, iw, ip = (st.median(d[k]) for k in ("train weft", "train pyg", "infer weft",
                                                    "infer pyg"))
        eps = [json.loads(line)["examples_per_second"]
               for line in open(here / f"train-{which}-{n}.jsonl")][1:]
        infer = re.search(r"dynamic batching \(agenda\): (\d+)",
                          txt.split(f"== {which}: weft train")[1]).group(1)
        print(f"{n} {which:6} {tw:9.1f} {tp:9.1f} {tw / tp:.2f} | {iw:9.1f} {ip:9.1f} "
              f"{iw / ip:.2f} | {st.median(eps):8.0f} | {infer}")
        if "train weft-dicts" in d:  # the same model given the Python dicts every batch
            td, id_ = st.median(d["train weft-dicts"]), st.median(d["infer weft-dicts"])
            print(f"  {which} weft-dicts {td:9.1f} {td / tp:.2f} | {id_:9.1f} {id_ / ip:.2f}")
