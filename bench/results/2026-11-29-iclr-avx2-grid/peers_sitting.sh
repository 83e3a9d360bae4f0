#!/bin/bash
# The current PyTorch at its best (eager depth-batched, eager hand-batched, torch.compile'd
# hand-batched) and Debian's 1.13 beside Weft, N = 128, B = 256, all held to AVX2 (MKL too),
# one thread on core 1 (iclr_peers.py interleaves per round). Run under the CPU lock.
# With a 5th argument "no-aten-avx2": ATEN_CPU_CAPABILITY left unset and 2.15 alone (no 1.13),
# as torch.compile's step computes NaN with it set on this CPU (compile_check.sh): inductor's
# generated code is then not held to AVX2, only MKL's products are.
# Usage: peers_sitting.sh WEFT VENV_PYTHON OUT_DIR PHASE(train|infer) [ROUNDS (2)] [no-aten-avx2]
set -euo pipefail
weft=$1 py=$2 out=$3 phase=$4 rounds=${5:-2} variant=${6:-}
export ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Zen ATEN_CPU_CAPABILITY=avx2 \
  MKL_ENABLE_INSTRUCTIONS=AVX2 WEFT_GEMM_CACHE=${WEFT_GEMM_CACHE:-$out/gemm-cache-avx2.txt}
other=(--other-python /usr/bin/python3)
[ "$variant" = no-aten-avx2 ] && { unset ATEN_CPU_CAPABILITY; other=(); }
here=$(cd "$(dirname "$0")/../../.." && pwd)
flag=(); [ "$phase" = infer ] && flag=(--infer)
dir=$out/peers-n128-b256-$phase${variant:+-$variant}
echo "$(date -u +%T) peers $phase load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/sittings.log" >&2
taskset -c 1 "$py" "$here/bench/peers/iclr_peers.py" --weft "$weft" --vector-size 128 \
  --batch-size 256 "${flag[@]}" --repeats 5 --rounds "$rounds" --ceiling-seconds 0 \
  "${other[@]}" --out-dir "$dir" > "$dir.txt" 2>&1
rm -f "$dir"/*.safetensors
echo "$(date -u +%T) peers $phase end load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/sittings.log" >&2
