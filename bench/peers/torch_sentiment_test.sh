#!/usr/bin/env bash
# ctest sentiment_torch_peer: the PyTorch peer of `weft train sentiment` must give Weft's loss,
# accuracies and root predictions on a small trained checkpoint, and Weft's loss, gradients and
# update in one training step; the same check with the composer's gates read in a wrong order
# must fail. Exits 77 (skipped) without PyTorch + NumPy or without the SST and GloVe data.
# Usage: torch_sentiment_test.sh WEFT PYTHON DATA_DIR   (WEFT_DATA_DIR overrides DATA_DIR)
set -euo pipefail
weft=$1
data=${WEFT_DATA_DIR:-$3}
peer="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/torch_sentiment.py"

source "$(dirname "${BASH_SOURCE[0]}")/torch_python.sh"
find_torch_python "$2"
if [[ ! -f "$data/sst/train.txt" || ! -f "$data/glove-sst/glove.6B.100d.sst.txt" ]]; then
  echo "SKIPPED: no SST / GloVe data in $data (set WEFT_DATA_DIR)"
  exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$weft" train sentiment --data-dir "$data" --max-train 100 --max-eval 40 --epochs 2 \
  --hidden 32 --threads 1 --progress off --no-compare --checkpoint "$work/sst.safetensors" \
  >"$work/train.txt"
# 100 test trees: those of the 40 in the checkpoint's vocabulary and 60 with unknown words.
"$python" "$peer" --check "$work/sst.safetensors" --weft "$weft" --data-dir "$data" \
  --max-eval 100
"$python" "$peer" --check-step --weft "$weft" --data-dir "$data" --hidden 32

# The check can fail: the input and candidate gates swapped must be told apart.
if "$python" "$peer" --check "$work/sst.safetensors" --weft "$weft" --data-dir "$data" \
  --max-eval 100 --composer-layout f1,f2,g,i,o >"$work/wrong.txt"; then
  cat "$work/wrong.txt"
  echo "FAILED: the check passed with the gates i and g swapped"
  exit 1
fi
grep -q "check: DIFFERENT" "$work/wrong.txt"
echo "sentiment_torch_peer: passed (and a wrong gate layout fails)"
