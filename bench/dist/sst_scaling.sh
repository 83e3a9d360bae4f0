#!/usr/bin/env bash
# SST Tree-LSTM training throughput on one machine: 1 process x 1 GEMM thread, 2 processes x 1
# thread (weft train --procs 2, data parallel over MPI) and 1 process x 2 GEMM threads,
# interleaved for ROUNDS rounds so the ratios within a round are comparable on a noisy machine.
# Prints one line per run: configuration, examples/s of the epoch, all-reduce ms/step.
#   bench/dist/sst_scaling.sh build/release/tools/weft/weft [ROUNDS] [extra weft train flags]
set -euo pipefail
weft=${1:?usage: sst_scaling.sh WEFT_BINARY [ROUNDS] [flags...]}
rounds=${2:-2}
shift $(($# >= 2 ? 2 : 1))
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
common=(train sentiment --epochs 1 --max-eval 50 --progress lines --no-compare "$@")
run() {
  local name=$1
  shift
  local line
  line=$("$weft" "${common[@]}" "$@" 2>&1 | grep '^epoch 1/1')
  local rate reduce
  rate=$(sed -E 's/.* ([0-9]+) ex\/s .*/\1/' <<<"$line")
  reduce=$(grep -oE 'all-reduce [0-9.]+ ms/step \([0-9]+%' <<<"$line" || true)
  printf '%-22s %6s ex/s  %s\n' "$name" "$rate" "$reduce"
}
for round in $(seq 1 "$rounds"); do
  echo "round $round"
  run "1 proc x 1 thread" --threads 1 --weave-threads 1
  run "2 procs x 1 thread" --procs 2 --threads 1 --weave-threads 1
  run "1 proc x 2 threads" --threads 2 --weave-threads 2
done
