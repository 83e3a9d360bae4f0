#!/bin/bash
# Why full-dynamic trails manual where it does: the loom on manual's own one-shape trees
# (dynamic) beside both, one core (core 1), AVX2 held, and the levels per batch of each kind of
# trees (depths.py on the exported trees). Run under the CPU lock.
# Usage: diag.sh WEFT OUT_DIR
set -euo pipefail
weft=$1 out=$2
export ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Zen WEFT_GEMM_CACHE=${WEFT_GEMM_CACHE:-$out/gemm-cache-avx2.txt}
here=$(dirname "$0")
for phase in train infer; do
  for n in 128 1024; do
    if [ "$n" = 128 ]; then sizes=8,64,256 r=10; else sizes=8,64 r=2; fi
    dir=$out/diag-n$n-$phase; mkdir -p "$dir"
    echo "$(date -u +%T) diag N=$n $phase load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/sittings.log" >&2
    taskset -c 1 "$weft" bench treelstm --vector-size $n --batch-sizes $sizes \
      --modes manual,dynamic,full-dynamic --"$phase" --threads 1 --repeats $r \
      --max-unbatched-trees 4 --ceiling-seconds 0 --quiet --format csv --out "$dir/rows.csv" \
      --export "$dir"
    /usr/bin/python3 "$here/depths.py" "$dir/trees.safetensors" > "$dir/depths.txt" || true
    rm -f "$dir"/*.safetensors
  done
done
