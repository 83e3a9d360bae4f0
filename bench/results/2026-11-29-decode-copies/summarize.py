# Prints each run's medians and ratios (batch / one-at-a-time / one-length sequences per second).
# Usage: python3 summarize.py [folder]
import json, sys, os
folder = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
for m in ("tree2seq", "seq2tree"):
    for s in ("1", "2"):
        for arm in ("before", "after"):
            d = json.load(open(os.path.join(folder, f"{m}-{arm}-{s}.json")))
            row = []
            for name in ("greedy", "beam4"):
                se = d["models"][0]["decode"][name]
                row.append(f'{name} {se["batch"]["median"]:.1f} / {se["one_at_a_time"]["median"]:.1f} / '
                           f'{se["one_length"]["median"]:.1f}: b/1L {se["batch_over_one_length"]:.3f}, '
                           f'b/1 {se["batch_over_one_at_a_time"]:.2f}')
            print(f"{m} sitting {s} {arm:6} load {d['machine']['load_average_before'][0]:.2f} | " + " | ".join(row))
