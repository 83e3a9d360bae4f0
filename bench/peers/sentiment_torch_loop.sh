#!/usr/bin/env bash
# `weft train sentiment` against python/examples/torch/sst_tree_lstm.py (the same Tree-LSTM as an
# nn.Module under torch.optim.Adam), alternated, one thread, the same seed, epochs and data:
#   cli-dense   the CLI with the example's settings: Adam 1e-3, no weight decay, every parameter
#               at the same rate, dense updates of the word vectors, no aliases, last epoch kept
#   cli-lazy    the same with the CLI's lazy row updates of the word vectors (its default)
#   torch-weft  the example with Weft's cells (weft.torch.Blocks), --cells weft
#   torch-torch the example with torch bodies (--cells torch)
# Usage: [SEED=1] bench/peers/sentiment_torch_loop.sh OUT_DIR EPOCHS MAX_TRAIN ROUNDS [WAYS]
# Each run's output goes to OUT_DIR/<way>-<round>.txt (the CLI's epochs as JSON lines in .jsonl).
set -euo pipefail
out=$1 epochs=$2 max_train=$3 rounds=$4
ways=${5:-cli-dense cli-lazy torch-weft torch-torch}
root=$(cd "$(dirname "$0")/../.." && pwd)
weft=$root/build/test/tools/weft/weft
data=${WEFT_DATA_DIR:-/work/shared/data}
python=${PYTHON:-/usr/bin/python3}
seed=${SEED:-1}
mkdir -p "$out"
cli=("$weft" train sentiment --data-dir "$data" --seed "$seed" --epochs "$epochs"
     --max-train "$max_train" --optimizer adam --learning-rate 0.001 --weight-decay 0
     --embedding-lr-scale 1 --embedding-aliases none --threads 1 --weave-threads 1
     --prepare-ahead=false --no-compare --progress lines --restore-best=false)
example=("$python" "$root/python/examples/torch/sst_tree_lstm.py" --data-dir "$data"
         --seed "$seed" --epochs "$epochs" --max-train "$max_train")
for round in $(seq 1 "$rounds"); do
  for way in $ways; do
    log=$out/$way-seed$seed-$round
    case $way in
      cli-dense) "${cli[@]}" --sparse-updates dense --log "$log.jsonl" > "$log.txt" 2>&1 ;;
      cli-lazy) "${cli[@]}" --sparse-updates lazy --log "$log.jsonl" > "$log.txt" 2>&1 ;;
      torch-weft) PYTHONPATH=$root/build/test/python "${example[@]}" --cells weft > "$log.txt" 2>&1 ;;
      torch-torch) PYTHONPATH=$root/build/test/python "${example[@]}" --cells torch > "$log.txt" 2>&1 ;;
    esac
    echo "$way round $round: $(grep -E 'epoch|test' "$log.txt" | tail -n 3 | tr '\n' ' ')"
  done
done
