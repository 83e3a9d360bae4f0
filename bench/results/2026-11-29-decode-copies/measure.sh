#!/usr/bin/env bash
# Issue 42 item 5, before / after, alternated: `weft bench decode` of BEFORE (main at 5600394
# with item 5's commits reverted: the live examples' memories and states gathered every step)
# and AFTER (5600394: read where they lie), 15 rounds each, both seed-2 checkpoints, two
# sittings, one thread on core 1, holding the CPU lock for the whole script. Then one --profile
# run of AFTER per model (BEFORE's profile: the same tool before the kernels changed;
# bench/log/2026-11-29-decode-copies.md). memory-only/: the same script run earlier with BEFORE
# = 237d715 and AFTER = d8893ad (memories read in place, states still gathered).
# Usage: BEFORE=path/to/weft AFTER=path/to/weft CKPT=folder OUT=folder measure.sh
set -euo pipefail
: "${BEFORE:?}" "${AFTER:?}" "${CKPT:?}" "${OUT:?}"
mkdir -p "$OUT"
for sitting in 1 2; do
  for model in tree2seq seq2tree; do
    for arm in before after; do
      weft=$BEFORE; [ "$arm" = after ] && weft=$AFTER
      echo "$(date -u +%H:%M:%S) sitting $sitting $model $arm: $(uptime | sed 's/.*load/load/')"
      taskset -c 1 "$weft" bench decode --checkpoint "$CKPT/$model.safetensors" --rounds 15 \
        --quiet --format json --out "$OUT/$model-$arm-$sitting.json" 2>"$OUT/$model-$arm-$sitting.txt"
    done
  done
done
for model in tree2seq seq2tree; do
  taskset -c 1 "$AFTER" bench decode --checkpoint "$CKPT/$model.safetensors" --rounds 3 --quiet \
    --profile --format json --out "$OUT/$model-after-profile.json" 2>"$OUT/$model-after-profile.txt"
done
