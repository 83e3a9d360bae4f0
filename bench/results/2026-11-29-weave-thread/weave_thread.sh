#!/bin/bash
# Weave-ahead by a std::async thread per batch (BEFORE: main's binary) against one weaving
# thread per row (AFTER: this worktree's), N = 128, B = 8 and 64, training and inference,
# alternated three rounds; each run also times manual (hand-batched) beside it.
# Usage: weave_thread.sh BEFORE_WEFT AFTER_WEFT OUT_DIR
set -euo pipefail
before=$1 after=$2 out=$3
mkdir -p "$out"
for round in 1 2 3; do
  for arm in before after; do
    weft=$before; [ "$arm" = after ] && weft=$after
    for phase in infer train; do
      echo "$(date -u +%T) round $round $arm $phase load $(cut -d' ' -f1 /proc/loadavg)" >&2
      "$weft" bench treelstm --vector-size 128 --batch-sizes 8,64 --modes full-dynamic,manual \
        --"$phase" --threads 1 --repeats 20 --ceiling-seconds 0 --quiet --format csv \
        --out "$out/$arm-$phase-r$round.csv"
    done
  done
done
