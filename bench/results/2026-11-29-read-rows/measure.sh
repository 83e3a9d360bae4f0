#!/usr/bin/env bash
# Issue 42, arguments read where they lie: WEFT_READ_ROWS=0 (every argument gathered, as
# before) against 1 (read in place, gradients written into the chunks' rows) and the default
# (auto: in place without gradients), alternated per cell, two rounds; JSON per run here.
# Run from the repository root after building build/test (weft_cli).
set -euo pipefail
W=build/test/tools/weft/weft
out=bench/results/2026-11-29-read-rows
export WEFT_GEMM=onednn  # one provider on both sides (the calibration re-measures under load)
for round in 1 2; do
  for cell in "128 256 train 5" "128 256 infer 5" "128 64 train 5" "128 64 infer 5" "1024 64 train 2" "1024 64 infer 2"; do
    read -r n b phase repeats <<<"$cell"
    for rows in 0 1; do
      WEFT_READ_ROWS=$rows taskset -c 1 $W bench treelstm --vector-size "$n" --batch-sizes "$b" \
        --modes full-dynamic,manual --"$phase" --threads 1 --repeats "$repeats" \
        --ceiling-seconds 0.2 --profile --format json >"$out/n$n-b$b-$phase-rows$rows-r$round.json"
    done
  done
done
