#!/usr/bin/env bash
# ctest decode_torch_peer: the PyTorch peers of tree2seq and seq2tree (torch_decode.py), both
# the per-example loop and the padded batch, must decode tiny trained checkpoints exactly as
# Weft does (greedy and beam 4, log-probabilities within 1e-4) and give Weft's dev loss; the
# same check with one weight perturbed must fail for each model, and a checkpoint of another
# model must be refused. Exits 77 (skipped) without PyTorch + NumPy. No timing. (A length
# penalty reorders no beam of these tiny models: it is checked on trained ones, see
# bench/log/2026-11-26-decode-peers.md.)
# Usage: torch_decode_test.sh WEFT PYTHON WEFT_PYTHON_DIR
set -euo pipefail
weft=$1
module_dir=$3
peer="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/torch_decode.py"

source "$(dirname "${BASH_SOURCE[0]}")/torch_python.sh"
find_torch_python "$2"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export WEFT_GEMM=openblas WEFT_NUM_THREADS=1
for model in tree2seq seq2tree; do
  "$weft" train "$model" --max-train 256 --max-eval 32 --epochs 2 --hidden 16 --threads 1 \
    --progress off --no-compare --checkpoint "$work/$model.safetensors" >"$work/$model.txt"
done
"$python" "$peer" "$work/tree2seq.safetensors" "$work/seq2tree.safetensors" --examples 32 \
  --weft-python "$module_dir"

# The check can fail: a perturbed weight must be told apart, for each model.
for model in tree2seq seq2tree; do
  if "$python" "$peer" "$work/$model.safetensors" --examples 32 --weft-python "$module_dir" \
    --perturb decoder/attended/bias >"$work/wrong.txt"; then
    cat "$work/wrong.txt"
    echo "FAILED: the $model check passed with decoder/attended/bias perturbed"
    exit 1
  fi
  grep -q "check $model: DIFFERENT" "$work/wrong.txt"
done
# A checkpoint of another model is refused, naming it (exit 2), before anything is compared.
"$weft" train calculator --max-train 64 --max-eval 8 --epochs 1 --hidden 8 --threads 1 \
  --progress off --no-compare --checkpoint "$work/calculator.safetensors" >/dev/null
status=0
"$python" "$peer" "$work/calculator.safetensors" --weft-python "$module_dir" >"$work/other.txt" \
  || status=$?
if [[ $status -ne 2 ]] || ! grep -q "holds a 'calculator' model" "$work/other.txt"; then
  cat "$work/other.txt"
  echo "FAILED: a calculator checkpoint was not refused with exit 2 (got $status)"
  exit 1
fi
echo "decode_torch_peer: passed (a perturbed weight fails, another model is refused)"
