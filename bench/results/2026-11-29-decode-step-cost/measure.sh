#!/usr/bin/env bash
# Before / after the per-step host cuts, alternated: `weft bench decode` of BEFORE (main at
# 4132fbb with this change's --warm bench option, built apart) and AFTER, 15 rounds each, both
# checkpoints, one thread on core 1, as the bench runs by default and with --warm (every timed
# decode call after an untimed call of the same examples), two sittings, holding the CPU lock
# for the whole script.
# Usage: BEFORE=path/to/weft AFTER=path/to/weft CKPT=folder OUT=folder measure.sh
set -euo pipefail
: "${BEFORE:?}" "${AFTER:?}" "${CKPT:?}" "${OUT:?}"
mkdir -p "$OUT"
for sitting in 1 2; do
  for mode in default warm; do
    flag=(); [ "$mode" = warm ] && flag=(--warm)
    for model in tree2seq seq2tree; do
      for arm in before after; do
        weft=$BEFORE; [ "$arm" = after ] && weft=$AFTER
        name=$model-$mode-$arm-$sitting
        echo "$(date -u +%H:%M:%S) $name: $(uptime | sed 's/.*load/load/')"
        taskset -c 1 "$weft" bench decode --checkpoint "$CKPT/$model.safetensors" --rounds 15 \
          --quiet "${flag[@]}" --format json --out "$OUT/$name.json" 2>"$OUT/$name.txt"
      done
    done
  done
done
