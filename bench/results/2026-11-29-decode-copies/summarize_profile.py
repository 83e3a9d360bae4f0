# Prints the profiled pass of each profile.sh run: per greedy / beam4 sequence, the batch's and
# the one-length batches' wall time, kernel time and bytes of the data-moving kinds.
# Usage: python3 summarize_profile.py [folder]
import json, sys, os
folder = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
for m in ("tree2seq", "seq2tree"):
    for search in ("greedy", "beam4"):
        for s in ("1", "2"):
            for arm in ("before", "after"):
                d = json.load(open(os.path.join(folder, f"{m}-{arm}-profile-{s}.json")))
                p = d["models"][0]["decode"][search]["profile_per_sequence"]
                cells = []
                for a in ("batch", "one_length"):
                    k = p[a]["kinds"]
                    moved = sum(k[x]["bytes"] for x in ("gathers", "scatters", "copies")) / 1e3
                    cells.append(f'{a} {1e6 * p[a]["seconds"]:.1f} us, products {1e6 * k["products"]["seconds"]:.1f}, '
                                 f'gathers {1e6 * k["gathers"]["seconds"]:.1f} us / {k["gathers"]["bytes"] / 1e3:.1f} KB, '
                                 f'copies {1e6 * k["copies"]["seconds"]:.1f} us / {k["copies"]["bytes"] / 1e3:.1f} KB, '
                                 f'allocation {1e6 * k["allocation"]["seconds"]:.1f} us, moved {moved:.1f} KB')
                print(f"{m} {search} {s} {arm:6} | " + " | ".join(cells))
