#!/usr/bin/env bash
# Interleaved before/after profile runs of the ICLR benchmark. Usage: measure.sh OUTDIR BEFORE AFTER [ROUNDS]
set -u
export WEFT_GEMM=${WEFT_GEMM:-onednn}  # no calibration inside the timing on a loaded machine
out=$1; before=$2; after=$3; rounds=${4:-2}
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for side in before after; do
    W=$before; [[ $side == after ]] && W=$after
    for phase in train infer; do
      flag=--train; [[ $phase == infer ]] && flag=--infer
      taskset -c 1 "$W" bench treelstm --vector-size 128 --batch-sizes 8,64,256 --modes full-dynamic,manual $flag \
        --threads 1 --repeats 5 --ceiling-seconds 0.2 --profile --quiet --format json --out "$out/n128-$phase-$side-r$r.json"
      taskset -c 1 "$W" bench treelstm --vector-size 1024 --batch-sizes 64 --modes full-dynamic,manual $flag \
        --threads 1 --repeats 2 --ceiling-seconds 0.2 --profile --quiet --format json --out "$out/n1024-$phase-$side-r$r.json"
    done
  done
done
