#!/bin/bash
# weft train sentiment before and after a change, and its PyTorch peer (bench/peers/
# torch_sentiment.py: the same model, data, initial weights and recipe), alternated per round,
# each on core 1 with one GEMM / intra-op thread (the run.sh of ../2026-11-29-sentiment-two-cores,
# one core only, two Weft builds). A build is a `weft` binary or a script that runs one.
# Usage: run.sh WEFT_BEFORE WEFT_AFTER OUT_DIR [ROUNDS]   (from the repository root,
# WEFT_DATA_DIR set; the peer starts from the initial weights in $INIT, default
# /tmp/sentiment-init.safetensors, which ../2026-11-29-sentiment-two-cores/run.sh writes)
set -euo pipefail
before=$1 after=$2 out=$3 rounds=${4:-5}
init=${INIT:-/tmp/sentiment-init.safetensors}
[ -f "$init" ] || { echo "run.sh: no initial weights at $init" >&2; exit 1; }
mkdir -p "$out"
for round in $(seq "$rounds"); do
  for build in before after; do
    weft=$before; [ "$build" = after ] && weft=$after
    echo "$(date -u +%T) round $round $build load $(cut -d' ' -f1 /proc/loadavg)" >&2
    taskset -c 1 "$weft" train sentiment --data-dir "$WEFT_DATA_DIR" --threads 1 \
      --epochs 1 --max-eval 50 --progress off --no-compare >"$out/weft-$build-r$round.txt" 2>&1
  done
  echo "$(date -u +%T) round $round peer load $(cut -d' ' -f1 /proc/loadavg)" >&2
  taskset -c 1 /usr/bin/python3 bench/peers/torch_sentiment.py --train --threads 1 --epochs 1 \
    --init "$init" --data-dir "$WEFT_DATA_DIR" >"$out/peer-r$round.txt" 2>&1
done
