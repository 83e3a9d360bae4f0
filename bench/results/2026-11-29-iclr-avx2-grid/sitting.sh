#!/bin/bash
# Issue 42's ICLR grid with AVX2 only (Zen 3 emulated on a Zen 5): one round, train and infer.
# Per phase and N: Weft full-dynamic and manual beside Debian's PyTorch 1.13 (side_by_side.py,
# one thread, both pinned to core 1: the weave ahead shares the run's core), then Weft alone
# unpinned (the weave of batch k + 1 on the other core). Run under the CPU lock.
# Usage: sitting.sh WEFT OUT_DIR ROUND [N1024_SIZES (8,64)] [REPEATS_N128 (10)]
set -euo pipefail
weft=$1 out=$2 round=$3 big=${4:-8,64} reps=${5:-10}
export ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Zen ATEN_CPU_CAPABILITY=avx2 \
  WEFT_GEMM_CACHE=${WEFT_GEMM_CACHE:-$out/gemm-cache-avx2.txt}   # calibrated by calibrate.sh
here=$(cd "$(dirname "$0")/../../.." && pwd)
sbs=$here/bench/peers/side_by_side.py
log() { echo "$(date -u +%T) round $round $* load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/sittings.log" >&2; }
mkdir -p "$out"
for phase in train infer; do
  flag=(); [ "$phase" = infer ] && flag=(--infer)
  for n in 128 1024; do
    if [ "$n" = 128 ]; then sizes=8,64,256 r=$reps extra=(--max-step-rows 0)
    else sizes=$big r=2 extra=(--max-unbatched-trees 4); fi
    log "one core + PyTorch N=$n B=$sizes $phase"
    taskset -c 1 /usr/bin/python3 "$sbs" --weft "$weft" --vector-size $n --batch-sizes $sizes \
      --modes full-dynamic,manual --repeats $r "${extra[@]}" "${flag[@]}" --ceiling-seconds 0 \
      --torch-flush-denormal --out-dir "$out/one-n$n-$phase-r$round" \
      > "$out/one-n$n-$phase-r$round.txt" 2>&1
    rm -f "$out/one-n$n-$phase-r$round"/*.safetensors
    log "two cores N=$n B=$sizes $phase"
    "$weft" bench treelstm --vector-size $n --batch-sizes $sizes --modes full-dynamic,manual \
      --"$phase" --threads 1 --repeats $r "${extra[@]}" --ceiling-seconds 0 --quiet --format csv \
      --out "$out/two-n$n-$phase-r$round.csv"
  done
done
log "end"
