# Best epoch per way and round of a sentiment_torch_loop.sh results folder, and each torch way's ratio
# to the CLI (cli-lazy) of the same round: python3 summarize.py DIR
import re, sys, glob, statistics, os
d = sys.argv[1]
rows = {}
for f in sorted(glob.glob(d + "/*.txt")):
    name = os.path.basename(f)
    if name == "uptime.txt": continue
    way, rnd = re.match(r"(.*)-seed\d+-(\d+)\.txt", name).groups()
    t = open(f).read()
    if way.startswith("cli"):
        eps = [float(x) for x in re.findall(r"\| (\d+) ex/s", t)]
    else:
        eps = [float(x) for x in re.findall(r"([\d.]+) trees/s", t)]
    rows.setdefault(int(rnd), {})[way] = eps
for r in sorted(rows):
    cli = max(rows[r]["cli-lazy"])
    print(r, {w: " / ".join(f"{e:,.0f}" for e in v) for w, v in rows[r].items()},
          {w: round(max(v) / cli, 3) for w, v in rows[r].items() if not w.startswith("cli")})
for w in [w for w in rows[1] if not w.startswith("cli")]:
    rs = [max(rows[r][w]) / max(rows[r]["cli-lazy"]) for r in rows]
    print(w, "ratios", [round(x, 3) for x in rs], "median", round(statistics.median(rs), 3))
