#!/bin/bash
# linear_lstm_cell_state in cache-sized blocks (auto) against whole calls, the ICLR Tree-LSTM at
# N = 128, alternated per cell, one thread on core 1 (run under the CPU lock). Raw JSON per run.
set -euo pipefail
W=${W:-build/test/tools/weft/weft}
OUT=${OUT:-bench/results/2026-11-29-step-rows/cell-blocks}
ROUNDS=${ROUNDS:-2}
mkdir -p "$OUT"
for round in $(seq "$ROUNDS"); do
  for B in ${BS:-8 64 256}; do for phase in train infer; do
    for blocks in whole auto; do
      rows=0; [ "$blocks" = whole ] && rows=1000000000
      WEFT_CELL_BLOCK_ROWS=$rows taskset -c 1 env WEFT_GEMM=onednn "$W" bench treelstm \
        --vector-size 128 --batch-sizes "$B" --modes full-dynamic,manual --"$phase" --threads 1 \
        --repeats 5 --ceiling-seconds 0.1 --profile --quiet --format json \
        --out "$OUT/B$B-$phase-$blocks-r$round.json"
    done
  done; done
done
# N = 1024: the weight (16 MiB) is over the 1 MiB bound, so both settings run whole calls.
if [ -n "${N1024:-1}" ]; then
  for phase in train infer; do
    taskset -c 1 env WEFT_GEMM=onednn "$W" bench treelstm --vector-size 1024 --batch-sizes 64 \
      --modes full-dynamic,manual --"$phase" --threads 1 --repeats 2 --ceiling-seconds 0.2 \
      --profile --quiet --format json --out "$OUT/N1024-B64-$phase-auto.json"
  done
fi
