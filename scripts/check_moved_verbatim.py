#!/usr/bin/env python3
# Checks that text moved out of a page into history files was moved verbatim and whole: every
# non-blank line of the old page lies in a run of lines copied unchanged into some history file,
# and no history file holds a non-blank line the old page did not have (after each file's first
# line, the "what this is" line that the move adds). Used when BENCHMARKS.md and EXPERIMENTS.md
# became current pages (issue 31):
#   scripts/check_moved_verbatim.py 92d4c45:BENCHMARKS.md bench/log/2026-11-2*.md
# OLD is a file or REV:PATH (read with git show). Exits 1 and lists the lines if anything is off.
import argparse
import subprocess
import sys
from collections import defaultdict


def read_old(spec):
    if ":" in spec:
        return subprocess.run(["git", "show", spec], check=True, capture_output=True,
                              text=True).stdout.splitlines()
    with open(spec, encoding="utf-8") as f:
        return f.read().splitlines()


def longest_run(old, where, body, i):
    """The old position where the longest run of body[i:] starts, and the run's length."""
    best_at, best_len = -1, 0
    for j in where.get(body[i], ()):
        n = 0
        while i + n < len(body) and j + n < len(old) and old[j + n] == body[i + n]:
            n += 1
        if n > best_len:
            best_at, best_len = j, n
    return best_at, best_len


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("old", help="the page before the move: a file or REV:PATH")
    parser.add_argument("history", nargs="+", help="the files the page was moved into")
    parser.add_argument("--header-lines", type=int, default=1,
                        help="lines each history file adds at its top (default 1)")
    args = parser.parse_args()

    old = read_old(args.old)
    where = defaultdict(list)
    for j, line in enumerate(old):
        where[line].append(j)
    covered = [0] * len(old)
    added = []  # (file, line number, text): history lines the old page did not have
    for path in args.history:
        with open(path, encoding="utf-8") as f:
            body = f.read().splitlines()[args.header_lines:]
        i, runs = 0, 0
        while i < len(body):
            at, n = longest_run(old, where, body, i)
            if n == 0:
                if body[i].strip():
                    added.append((path, i + 1 + args.header_lines, body[i]))
                i += 1
                continue
            if n > 1 or body[i].strip():
                runs += 1
            for k in range(at, at + n):
                covered[k] += 1
            i += n
        print(f"{path}: {len(body)} lines in {runs} verbatim run(s)")

    lost = [(j + 1, line) for j, line in enumerate(old) if line.strip() and not covered[j]]
    twice = sum(1 for j, line in enumerate(old) if line.strip() and covered[j] > 1)
    kept = sum(1 for line in old if line.strip())
    print(f"{args.old}: {len(old)} lines, {kept} non-blank; {kept - len(lost)} found verbatim, "
          f"{len(lost)} lost; {twice} copied more than once; {len(added)} history lines added")
    for number, line in lost:
        print(f"  lost {args.old}:{number}: {line}")
    for path, number, line in added:
        print(f"  added {path}:{number}: {line}")
    return 1 if lost or added else 0


if __name__ == "__main__":
    sys.exit(main())
