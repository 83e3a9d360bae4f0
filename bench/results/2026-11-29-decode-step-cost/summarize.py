# Medians of measure.sh's runs: batch / one at a time / one-length sequences/s and the ratios.
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
print("| model, search | bench | sitting | BEFORE batch / one / one-length | AFTER | batch / one-length before -> after |")
print("| --- | --- | --- | --- | --- | --- |")
for model in ("tree2seq", "seq2tree"):
    for search in ("greedy", "beam4"):
        for mode in ("default", "warm"):
            for sitting in (1, 2):
                cells, ratios = [], []
                for arm in ("before", "after"):
                    f = out / f"{model}-{mode}-{arm}-{sitting}.json"
                    if not f.exists():
                        cells.append("-"); ratios.append(float("nan")); continue
                    d = json.load(open(f))["models"][0]["decode"][search]
                    cells.append(" / ".join(f"{d[a]['median']:,.0f}" for a in ("batch", "one_at_a_time", "one_length")))
                    ratios.append(d["batch_over_one_length"])
                print(f"| {model} {search} | {mode} | {sitting} | {cells[0]} | {cells[1]} | {ratios[0]:.3f} -> {ratios[1]:.3f} |")
