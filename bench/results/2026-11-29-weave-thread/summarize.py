"""Per arm (the CSV name's first part), phase and batch size, over the rounds: full-dynamic's
speed as a share of manual's with its whole batch (weave included where it is not hidden), and
with its run alone (manual's batch is all run: its plan is built once, outside the timing).
Usage: summarize.py DIR PREFIX... (e.g. before after, or one two)."""
import csv
import glob
import statistics
import sys
from collections import defaultdict

ratios = defaultdict(lambda: defaultdict(list))
for arm in sys.argv[2:]:
    for path in sorted(glob.glob(f"{sys.argv[1]}/{arm}-*-r*.csv")):
        phase = path.split("/")[-1].split("-")[1]
        rows = list(csv.DictReader(open(path)))
        manual = {r["batch_size"]: float(r["batch_s_median"]) for r in rows
                  if r["mode"] == "manual"}
        for r in rows:
            if r["mode"] != "full-dynamic":
                continue
            key = (phase, int(r["batch_size"]), arm)
            ratios[key]["batch"].append(manual[r["batch_size"]] / float(r["batch_s_median"]))
            ratios[key]["run"].append(manual[r["batch_size"]] / float(r["run_s"]))
            ratios[key]["weave_ms"].append(1e3 * float(r["weave_s"]))
print("phase B arm | FD/manual, whole batch (rounds; median) | FD run alone / manual | weave ms")
for key in sorted(ratios):
    v = ratios[key]
    print(*key, "|", " ".join(f"{x:.3f}" for x in v["batch"]),
          f"; {statistics.median(v['batch']):.3f} |", f"{statistics.median(v['run']):.3f} |",
          f"{statistics.median(v['weave_ms']):.3f}")
