#!/usr/bin/env bash
# phases.py for before (build/before-src, 9a39e8f) and after (build/test), alternated twice, core 1;
# run under the CPU lock: flock /work/wt/cpu.lock bench/results/2026-11-29-weave-host-cost/phases.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
venv=/work/wt/torch/build/peers-venv/bin/python
echo "uptime: $(uptime)"
for which in before after before after; do
  if [ "$which" = before ]; then root=$repo/build/before-src; else root=$repo; fi
  echo "== $which"
  REPO=$root PYTHONPATH=$root/build/test/python taskset -c 1 "$venv" "$(dirname "$0")/phases.py" 10 \
    2>&1 | grep -v "Warn\|warn\|detach\|checks"
done
