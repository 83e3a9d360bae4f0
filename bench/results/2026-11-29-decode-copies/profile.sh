#!/usr/bin/env bash
# Where a decoded sequence's time and bytes go, before and after item 5, alternated twice:
# `weft bench decode --profile` (3 rounds, then one profiled pass of the batch and of the
# one-length batches), BEFORE = 5600394 with item 5's kernels reverted (the bench tool kept),
# AFTER = 5600394; one thread on core 1, under the CPU lock for the whole script.
# Usage: BEFORE=path/to/weft AFTER=path/to/weft CKPT=folder OUT=folder profile.sh
set -euo pipefail
: "${BEFORE:?}" "${AFTER:?}" "${CKPT:?}" "${OUT:?}"
mkdir -p "$OUT"
for sitting in 1 2; do
  for model in tree2seq seq2tree; do
    for arm in before after; do
      weft=$BEFORE; [ "$arm" = after ] && weft=$AFTER
      echo "$(date -u +%H:%M:%S) sitting $sitting $model $arm: $(uptime | sed 's/.*load/load/')"
      taskset -c 1 "$weft" bench decode --checkpoint "$CKPT/$model.safetensors" --rounds 3 --quiet \
        --profile --format json --out "$OUT/$model-$arm-profile-$sitting.json" \
        2>"$OUT/$model-$arm-profile-$sitting.txt"
    done
  done
done
