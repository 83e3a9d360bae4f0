# Each torch way's ratio to the CLI (cli-lazy) of the same round, over several results folders of
# sentiment_torch_loop.sh (loop.sh here), and the median over all: python3 aggregate.py DIR...
import glob, os, re, statistics, sys

ratios = {}
wins = 0
for d in sys.argv[1:]:
    rounds = {}
    for f in sorted(glob.glob(d + "/*.txt")):
        name = os.path.basename(f)
        if name == "uptime.txt":
            continue
        way, rnd = re.match(r"(.*)-seed\d+-(\d+)\.txt", name).groups()
        text = open(f).read()
        pattern = r"\| (\d+) ex/s" if way.startswith("cli") else r"([\d.]+) trees/s"
        rounds.setdefault(rnd, {})[way] = max(float(x) for x in re.findall(pattern, text))
    for r in rounds.values():
        for way, best in r.items():
            if not way.startswith("cli"):
                ratios.setdefault(way, []).append(best / r["cli-lazy"])
        wins += r["torch-weft-fused"] > r["torch-weft-fused-before"]
for way, rs in ratios.items():
    print(f"{way}: {len(rs)} rounds, {min(rs):.3f}-{max(rs):.3f}, median "
          f"{statistics.median(rs):.3f}, >= 0.9 in {sum(x >= 0.9 for x in rs)}")
print(f"after ahead of before in {wins} of {len(ratios['torch-weft-fused'])} rounds")
