#!/usr/bin/env bash
# One sitting of the weave-host-cost comparison, run under the CPU lock by the caller:
#   flock /work/wt/cpu.lock bench/results/2026-11-29-weave-host-cost/sitting.sh N ORDER
# ORDER "before after" or "after before". before = main at 9a39e8f (`git archive` into
# build/before-src, built there as README command 2 does); after = this branch in build/test.
# Each build, pinned to core 1: bench/peers/molecules_pyg.py --rounds 5 (Weft and PyG
# interleaved inside it), `weft train molecules --epochs 10 --weave-threads 1`, and the ICLR
# Tree-LSTM at N = 128, B = 8, inference (full-dynamic and manual, --repeats 5).
set -euo pipefail
n=$1; shift
repo=$(cd "$(dirname "$0")/../../.." && pwd)
out=$repo/bench/results/2026-11-29-weave-host-cost
venv=/work/wt/torch/build/peers-venv/bin/python
export WEFT_DATA_DIR=/work/shared/data
echo "sitting $n: $(date -u +%FT%TZ) uptime: $(uptime)"
for which in "$@"; do
  if [ "$which" = before ]; then
    root=$repo/build/before-src
  else
    root=$repo
  fi
  echo "== $which: molecules_pyg.py --rounds 5"
  PYTHONPATH=$root/build/test/python taskset -c 1 "$venv" "$root/bench/peers/molecules_pyg.py" \
    --rounds 5 --json "$out/pyg-$which-$n.json" 2>&1 | grep -v "UserWarning\|warnings.warn"
  echo "== $which: weft train molecules --epochs 10 --weave-threads 1"
  rm -f "$out/train-$which-$n.jsonl"
  (cd /tmp && taskset -c 1 "$root/build/test/tools/weft/weft" train molecules --epochs 10 \
     --weave-threads 1 --progress lines --data-dir /work/shared/data \
     --log "$out/train-$which-$n.jsonl" 2>&1 | tail -3)
  echo "== $which: weft bench treelstm V=128 B=8 --infer"
  taskset -c 1 "$root/build/test/tools/weft/weft" bench treelstm --vector-size 128 \
    --batch-sizes 8 --modes full-dynamic,manual --infer --threads 1 --repeats 5 2>&1 | tail -3
done
