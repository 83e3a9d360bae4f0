#!/usr/bin/env bash
# Issue 30's measurements on one CPU (an Intel Xeon: a GPU machine's host): the ICLR Tree-LSTM
# benchmark's full-dynamic rows with denormals flushed (Weft's default) and kept
# (WEFT_DENORMALS=keep), alternated within each round, then the rest of the N x B grid flushed,
# one GEMM thread pinned to one core; the GEMM ceiling fraction of each row comes with it. Then `weft info` (OpenBLAS's kernel set, the
# calibrated classes) and, where PyTorch is importable, the PyTorch peer at its best
# (torch.set_flush_denormal) on the same trees (bench/peers/side_by_side.py).
#   WEFT=path/to/weft OUT=dir ROUNDS=2 CORE=2 scripts/intel_bench.sh
# Then the GEMM calibration of `weft info --calibrate calculator` on a quiet core and beside a
# busy loop on the same core. Writes $OUT/intel_all.csv (and one CSV per row), info.txt,
# lscpu.txt, calibration_{quiet,busy}.{txt,log}.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

weft=${WEFT:-build/release/tools/weft/weft}
out=${OUT:-bench/results/intel}
rounds=${ROUNDS:-2}
core=${CORE:-2}
mkdir -p "$out"
lscpu >"$out/lscpu.txt" 2>&1 || true
export WEFT_GEMM_CACHE="$out/gemm-cache.txt"  # calibrated once, by the first row

# One row set: N, batch sizes, train|infer, denormal mode, round.
row() {
  local n=$1 sizes=$2 kind=$3 mode=$4 round=$5
  local file="$out/intel_${mode}_${kind}_v${n}_b${sizes//,/-}_r${round}.csv"
  WEFT_DENORMALS=$mode timeout 120 taskset -c "$core" "$weft" bench treelstm "--$kind" \
    --vector-size "$n" --batch-sizes "$sizes" --modes full-dynamic --threads 1 --repeats 2 \
    --format csv --out "$file" --quiet || echo "intel_bench: row $n $sizes $kind $mode failed" >&2
  [[ -f "$file" ]] && sed "s/^/$mode,$round,/" "$file" | tail -n +2 >>"$out/intel_all.csv"
}

echo "denormals,round,$(WEFT_DENORMALS=flush "$weft" bench treelstm --vector-size 8 --batch-sizes 1 \
  --modes full-dynamic --repeats 1 --format csv --quiet | head -1)" >"$out/intel_all.csv"
# Flushed against kept, alternated: the rows where the issue saw denormals cost most.
for round in $(seq "$rounds"); do
  for mode in keep flush; do
    row 128 8,64,256 train "$mode" "$round"
    row 1024 64 train "$mode" "$round"
  done
done
# The rest of the N x B grid, as shipped (flushed), once.
row 1024 8,256 train flush 1
row 128 8,64,256 infer flush 1
row 1024 8,64,256 infer flush 1
"$weft" info >"$out/info.txt" 2>&1 || true

# The calibration on a quiet core, then beside a CPU-bound process pinned to the same core:
# what the loaded one caches (its clean classes only) against what the quiet one measured.
calibrate() {
  WEFT_GEMM_CACHE="$out/calibration_$1.txt" WEFT_NUM_THREADS=1 timeout 120 \
    taskset -c "$core" "$weft" info --calibrate calculator >"$out/calibration_$1.log" 2>&1 ||
    echo "intel_bench: calibration ($1) failed" >&2
}
calibrate quiet
taskset -c "$core" bash -c 'while :; do :; done' &
busy=$!
calibrate busy
kill "$busy"
column -s, -t <"$out/intel_all.csv" || cat "$out/intel_all.csv"

python=${PYTHON:-python3}
if timeout 60 "$python" -c "import torch, numpy" 2>/dev/null; then
  for kind in train infer; do
    extra=()
    [[ $kind == infer ]] && extra=(--infer)
    timeout 240 taskset -c "$core" "$python" bench/peers/side_by_side.py --weft "$weft" \
      --vector-size 128 --batch-sizes 64,256 --modes full-dynamic --threads 1 --repeats 2 \
      --torch-flush-denormal --out-dir "$out/peer_$kind" "${extra[@]}" ||
      echo "intel_bench: the PyTorch peer ($kind) failed" >&2
  done
else
  echo "intel_bench: no PyTorch with NumPy here; the peer is not run" >&2
fi
