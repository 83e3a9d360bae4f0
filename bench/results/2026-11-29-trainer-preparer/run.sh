#!/bin/bash
# weft train sentiment with the batch preparer started per batch (BEFORE's build: std::async)
# and kept for the loop (AFTER's: JobThreads, off the training thread's CPU), one epoch,
# --threads 1, alternated per round, unpinned (the preparer on the other core) and on core 1.
# Usage: run.sh BEFORE_WEFT AFTER_WEFT OUT_DIR [ROUNDS]   (WEFT_DATA_DIR set)
set -euo pipefail
before=$1 after=$2 out=$3 rounds=${4:-4}
mkdir -p "$out"
for round in $(seq "$rounds"); do
  for cores in two one; do
    pin=(); [ "$cores" = one ] && pin=(taskset -c 1)
    for side in before after; do
      weft=$before; [ "$side" = after ] && weft=$after
      echo "$(date -u +%T) round $round $cores $side load $(cut -d' ' -f1 /proc/loadavg)" >&2
      "${pin[@]}" "$weft" train sentiment --data-dir "$WEFT_DATA_DIR" --threads 1 --epochs 1 \
        --max-eval 50 --progress off --no-compare >"$out/$side-$cores-r$round.txt" 2>&1
    done
  done
done
for cores in two one; do
  for side in before after; do
    echo "$cores $side: $(grep -ho 'training: [0-9]* examples/s' "$out"/$side-$cores-r*.txt |
      grep -o '[0-9]*' | tr '\n' ' ')"
  done
done
