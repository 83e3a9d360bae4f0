#!/bin/bash
# The B = 8 inference batch split by kind (--profile), weave in turn (--weave-ahead off), one
# core, both argument paths (WEFT_READ_ROWS 0: gathered; auto: read in place), three rounds.
# Usage: profile_b8.sh WEFT OUT_DIR [CORE]
set -euo pipefail
weft=$1 out=$2 core=${3:-1}
mkdir -p "$out"
for round in 1 2 3; do
  for rr in 0 auto; do
    WEFT_READ_ROWS=$rr taskset -c "$core" "$weft" bench treelstm --vector-size 128 --batch-sizes 8 \
      --modes full-dynamic,manual --infer --threads 1 --repeats 30 --ceiling-seconds 0 --quiet \
      --profile --weave-ahead off --format json --out "$out/rr$rr-r$round.json"
  done
done
