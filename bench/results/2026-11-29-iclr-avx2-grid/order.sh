#!/bin/bash
# Does the row order bias full-dynamic ÷ manual? The same one-core rows (core 1, AVX2 held, weave
# ahead on) with --modes full-dynamic,manual (the grid's order) and manual,full-dynamic,
# alternated. Run under the CPU lock. Usage: order.sh WEFT OUT_DIR [ROUNDS (2)]
set -euo pipefail
weft=$1 out=$2 rounds=${3:-2}
export ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Zen WEFT_GEMM_CACHE=${WEFT_GEMM_CACHE:-$out/gemm-cache-avx2.txt}
mkdir -p "$out/order"
for round in $(seq "$rounds"); do
  for modes in full-dynamic,manual manual,full-dynamic; do
    for phase in infer train; do
      echo "$(date -u +%T) order $modes N=128 $phase r$round load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/sittings.log" >&2
      taskset -c 1 "$weft" bench treelstm --vector-size 128 --batch-sizes 8,64,256 --modes $modes \
        --"$phase" --threads 1 --repeats 10 --ceiling-seconds 0 --quiet --format csv \
        --out "$out/order/$modes-n128-$phase-r$round.csv"
    done
    echo "$(date -u +%T) order $modes N=1024 B=256 infer r$round load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/sittings.log" >&2
    taskset -c 1 "$weft" bench treelstm --vector-size 1024 --batch-sizes 256 --modes $modes \
      --infer --threads 1 --repeats 2 --ceiling-seconds 0 --quiet --format csv \
      --out "$out/order/$modes-n1024-infer-r$round.csv"
  done
done
