#!/bin/bash
# Which setting makes PyTorch 2.15's torch.compile'd hand-batched step wrong on this Zen 5 (NaN or
# a different loss in peers_sitting.sh's runs): its check against the eager step with each of
# ATEN_CPU_CAPABILITY=avx2 and MKL_ENABLE_INSTRUCTIONS=AVX2 alone, both, and neither
# (N = 128, B = 256 inference, core 1). Run under the CPU lock.
# Usage: compile_check.sh WEFT VENV_PYTHON OUT_DIR
set -uo pipefail
weft=$1 py=$2 out=$3
here=$(cd "$(dirname "$0")/../../.." && pwd)
dir=$out/compile-check; mkdir -p "$dir"
ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Zen WEFT_GEMM_CACHE=$out/gemm-cache-avx2.txt \
  taskset -c 1 "$weft" bench treelstm --vector-size 128 --batch-sizes 256 --modes full-dynamic \
  --infer --threads 1 --repeats 5 --ceiling-seconds 0 --quiet --format json --out "$dir/weft.json" \
  --export "$dir" > /dev/null
for env in "ATEN_CPU_CAPABILITY=avx2" "MKL_ENABLE_INSTRUCTIONS=AVX2" \
           "ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2" "NONE=1"; do
  echo "== $env" >> "$dir/checks.txt"
  env $env taskset -c 1 "$py" "$here/bench/peers/iclr_peers.py" --torch-only --vector-size 128 \
    --batch-size 256 --infer --repeats 1 --out-dir "$dir" 2>&1 | grep -E "check|differs|trees/s" \
    >> "$dir/checks.txt"
done
rm -f "$dir"/*.safetensors
