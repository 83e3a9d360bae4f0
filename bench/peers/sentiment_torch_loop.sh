#!/usr/bin/env bash
# `weft train sentiment` against python/examples/torch/sst_tree_lstm.py (the same Tree-LSTM as an
# nn.Module under torch optimizers), alternated, one thread, the same seed, epochs and data (the
# example takes the CLI's data, initial weights and batch order):
#   cli-lazy          the CLI with the example's settings: Adam 1e-3, no weight decay, every
#                     parameter at the same rate, no aliases, last epoch kept; its lazy row
#                     updates of the word vectors (its default)
#   cli-dense         the same with dense updates of the word vectors (every row every step)
#   torch-weft        the example with Weft's cells (weft.torch.Blocks), --cells weft: SparseAdam
#                     on the word vectors' sparse gradient, torch's Adam on the rest
#   torch-weft-fused  the same with one weft.torch.Adam (--optimizer weft)
#   torch-weft-fused-before  the same with another weft package, BEFORE_PYTHONPATH (e.g. a copy
#                     of an earlier python/weft beside this build's module), to measure a change
#                     side by side
#   torch-weft-dense  the same with a dense word-vector gradient and one torch Adam
#   torch-torch       the example with torch bodies (--cells torch)
# Usage: [SEED=1] [PYTHON=...] bench/peers/sentiment_torch_loop.sh OUT_DIR EPOCHS MAX_TRAIN ROUNDS [WAYS]
# Each run's output goes to OUT_DIR/<way>-seed<S>-<round>.txt (the CLI's epochs also as JSON
# lines in .jsonl); `uptime` before each round goes to OUT_DIR/uptime.txt.
set -euo pipefail
out=$1 epochs=$2 max_train=$3 rounds=$4
ways=${5:-cli-lazy torch-weft torch-weft-fused cli-dense}
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
  echo "round $round: $(uptime)" >> "$out/uptime.txt"
  for way in $ways; do
    log=$out/$way-seed$seed-$round
    case $way in
      cli-dense) "${cli[@]}" --sparse-updates dense --log "$log.jsonl" > "$log.txt" 2>&1 ;;
      cli-lazy) "${cli[@]}" --sparse-updates lazy --log "$log.jsonl" > "$log.txt" 2>&1 ;;
      torch-weft) PYTHONPATH=$root/build/test/python "${example[@]}" --cells weft > "$log.txt" 2>&1 ;;
      torch-weft-fused) PYTHONPATH=$root/build/test/python "${example[@]}" --cells weft \
        --optimizer weft > "$log.txt" 2>&1 ;;
      torch-weft-fused-before) PYTHONPATH=${BEFORE_PYTHONPATH:?names the other weft package} \
        "${example[@]}" --cells weft --optimizer weft > "$log.txt" 2>&1 ;;
      torch-weft-dense) PYTHONPATH=$root/build/test/python "${example[@]}" --cells weft \
        --dense-embeddings > "$log.txt" 2>&1 ;;
      torch-torch) PYTHONPATH=$root/build/test/python "${example[@]}" --cells torch > "$log.txt" 2>&1 ;;
    esac
    echo "$way round $round: $(grep -E 'epoch|test' "$log.txt" | tail -n 3 | tr '\n' ' ')"
  done
done
