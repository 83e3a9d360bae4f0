#!/bin/bash
# weft train sentiment against its PyTorch peer (bench/peers/torch_sentiment.py, the same model,
# data, initial weights and recipe), one GEMM / intra-op thread each, on one core (taskset: Weft's
# batch preparer shares the core with its training) and on the machine's two (the preparer on
# the other core; the peer has no second thread to use), alternated per round.
# Usage: run.sh WEFT OUT_DIR [ROUNDS]   (from the repository root, WEFT_DATA_DIR set; the initial
# weights go to $INIT, default /tmp/sentiment-init.safetensors, written once)
set -euo pipefail
weft=$1 out=$2 rounds=${3:-3}
data=${WEFT_DATA_DIR:?set WEFT_DATA_DIR} init=${INIT:-/tmp/sentiment-init.safetensors}
mkdir -p "$out"
[ -f "$init" ] ||
  "$weft" train sentiment --data-dir "$data" --threads 1 --epochs 1 --learning-rate 1e-30 \
    --max-eval 50 --progress off --no-compare --checkpoint "$init" >/dev/null
for round in $(seq "$rounds"); do
  for cores in one two; do
    pin=(); [ "$cores" = one ] && pin=(taskset -c 1)
    echo "$(date -u +%T) round $round $cores core(s) load $(cut -d' ' -f1 /proc/loadavg)" >&2
    "${pin[@]}" "$weft" train sentiment --data-dir "$data" --threads 1 --epochs 1 \
      --max-eval 50 --progress off --no-compare >"$out/weft-$cores-r$round.txt" 2>&1
    "${pin[@]}" /usr/bin/python3 bench/peers/torch_sentiment.py --train --threads 1 --epochs 1 \
      --init "$init" --data-dir "$data" >"$out/peer-$cores-r$round.txt" 2>&1
  done
done
