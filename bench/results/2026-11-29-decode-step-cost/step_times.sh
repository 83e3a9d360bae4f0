#!/usr/bin/env bash
# step_times.cpp built against BEFORE's and AFTER's libweft, alternated, both checkpoints, one
# round each (64 mixed decodes, then the one-length batches), two sittings, core 1, under the
# CPU lock for the whole script. Usage: BEFORE=binary AFTER=binary CKPT=folder step_times.sh
set -euo pipefail
: "${BEFORE:?}" "${AFTER:?}" "${CKPT:?}"
for sitting in 1 2; do
  for model in tree2seq seq2tree; do
    for arm in before after; do
      bin=$BEFORE; [ "$arm" = after ] && bin=$AFTER
      echo "== $model $arm $sitting $(date -u +%H:%M:%S) $(uptime | sed 's/.*load/load/')"
      taskset -c 1 "$bin" "$CKPT/$model.safetensors" 1 2>/dev/null
    done
  done
done
