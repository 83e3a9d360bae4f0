#!/bin/bash
# Untimed: fill the AVX2 GEMM calibration cache (DIR/gemm-cache-avx2.txt) with every class the
# grid's batches use, and record `weft info` as the sittings will see it. Run under the CPU lock.
# Usage: calibrate.sh WEFT OUT_DIR
set -euo pipefail
weft=$1 out=$2
mkdir -p "$out"
export ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Zen WEFT_GEMM_CACHE=$out/gemm-cache-avx2.txt
for phase in train infer; do
  taskset -c 1 "$weft" bench treelstm --vector-size 128 --batch-sizes 8,64,256 \
    --modes full-dynamic,manual --"$phase" --threads 1 --repeats 1 --ceiling-seconds 0 --quiet >/dev/null
  taskset -c 1 "$weft" bench treelstm --vector-size 1024 --batch-sizes 8,64 \
    --modes full-dynamic,manual --"$phase" --threads 1 --repeats 1 --ceiling-seconds 0 --quiet >/dev/null
done
"$weft" info > "$out/weft-info.txt"
