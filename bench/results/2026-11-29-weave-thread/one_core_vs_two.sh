#!/bin/bash
# Where full-dynamic's B = 8 gap to manual goes: the same rows on one core (taskset: the weave of
# batch k + 1 shares the core with batch k's run) and on two (the weave on the other core),
# alternated three rounds; the CSVs carry each row's batch, run and weave medians.
# Usage: one_core_vs_two.sh WEFT OUT_DIR [CORE [BATCH_SIZES [VECTOR_SIZE [REPEATS [ROUNDS]]]]]
# (defaults 1, 8,64, 128, 20, 3)
set -euo pipefail
weft=$1 out=$2 core=${3:-1} sizes=${4:-8,64} n=${5:-128} repeats=${6:-20} rounds=${7:-3}
mkdir -p "$out"
for round in $(seq "$rounds"); do
  for cores in one two; do
    pin=(); [ "$cores" = one ] && pin=(taskset -c "$core")
    for phase in infer train; do
      echo "$(date -u +%T) round $round $cores core(s) $phase load $(cut -d' ' -f1 /proc/loadavg)" >&2
      "${pin[@]}" "$weft" bench treelstm --vector-size "$n" --batch-sizes "$sizes" \
        --modes full-dynamic,manual --"$phase" --threads 1 --repeats "$repeats" --ceiling-seconds 0 \
        --quiet --format csv --out "$out/$cores-$phase-r$round.csv"
    done
  done
done
