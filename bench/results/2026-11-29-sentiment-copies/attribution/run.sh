#!/bin/bash
# Which of the two changes gave the speed: main (before), the cell's children read apart alone
# (cells), and both with the GEMM calibration's in-use check fixed (after), alternated per
# round on core 1. Usage: run.sh BEFORE CELLS AFTER OUT_DIR [ROUNDS] (WEFT_DATA_DIR set).
set -euo pipefail
out=$4 rounds=${5:-6}
declare -A build=([before]=$1 [cells]=$2 [after]=$3)
mkdir -p "$out"
for round in $(seq "$rounds"); do
  for name in before cells after; do
    echo "$(date -u +%T) round $round $name load $(cut -d' ' -f1 /proc/loadavg)" >&2
    taskset -c 1 "${build[$name]}" train sentiment --data-dir "$WEFT_DATA_DIR" --threads 1 \
      --epochs 1 --max-eval 50 --progress off --no-compare >"$out/weft-$name-r$round.txt" 2>&1
  done
done
