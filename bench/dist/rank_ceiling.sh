#!/usr/bin/env bash
# What two data-parallel ranks of SST's batch 25 can reach on one 2-core machine before any
# communication: one process unpinned at the global batch (the single-process reference, its
# batch preparer free to use the other core) against one pinned to a core at a rank's share
# (--batch-size 13, its preparer sharing that core, as each rank's does under --procs 2).
# Prints, per round, both rates and 2 x the second / the first.
#   bench/dist/rank_ceiling.sh build/release/tools/weft/weft [ROUNDS] [extra weft train flags]
set -euo pipefail
weft=${1:?usage: rank_ceiling.sh WEFT_BINARY [ROUNDS] [flags...]}
rounds=${2:-3}
shift $(($# >= 2 ? 2 : 1))
common=(train sentiment --threads 1 --weave-threads 1 --epochs 1 --max-eval 50 --progress lines
  --no-compare "$@")
rate() { "$@" 2>&1 | grep '^epoch 1/1' | sed -E 's/.* ([0-9]+) ex\/s .*/\1/'; }
for round in $(seq 1 "$rounds"); do
  whole=$(rate "$weft" "${common[@]}")
  half=$(rate taskset -c 1 "$weft" "${common[@]}" --batch-size 13)
  echo "round $round: batch 25 unpinned $whole ex/s, batch 13 on one core $half ex/s," \
    "ceiling of two ranks $(awk -v h="$half" -v w="$whole" 'BEGIN { printf "%.2f", 2 * h / w }')x"
done
