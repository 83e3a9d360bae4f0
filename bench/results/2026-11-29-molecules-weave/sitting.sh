#!/usr/bin/env bash
# One sitting of the molecules-weave comparison, run under the CPU lock by the caller:
#   flock /work/wt/cpu.lock bench/results/2026-11-29-molecules-weave/sitting.sh N ORDER
# ORDER "before after" or "after before". before = main at 998c044 built in build/test and
# copied to build/before (with that commit's example and script in build/before/repo); after =
# this branch in build/test. Each build runs bench/peers/molecules_pyg.py --rounds 5 (Weft and
# PyG interleaved inside it) and `weft train molecules --epochs 10 --weave-threads 1`.
set -euo pipefail
n=$1; shift
repo=$(cd "$(dirname "$0")/../../.." && pwd)
out=$repo/bench/results/2026-11-29-molecules-weave
venv=/work/wt/torch/build/peers-venv/bin/python
export WEFT_DATA_DIR=/work/shared/data
echo "sitting $n: $(date -u +%FT%TZ) uptime: $(uptime)"
for which in "$@"; do
  if [ "$which" = before ]; then
    pyenv=(env PYTHONPATH=$repo/build/before/python LD_LIBRARY_PATH=$repo/build/before/src)
    script=$repo/build/before/repo/bench/peers/molecules_pyg.py
    weft=(env LD_LIBRARY_PATH=$repo/build/before/src $repo/build/before/tools/weft)
  else
    pyenv=(env PYTHONPATH=$repo/build/test/python)
    script=$repo/bench/peers/molecules_pyg.py
    weft=($repo/build/test/tools/weft/weft)
  fi
  echo "== $which: molecules_pyg.py --rounds 5"
  "${pyenv[@]}" "$venv" "$script" --rounds 5 --json "$out/pyg-$which-$n.json" 2>&1 |
    grep -v "UserWarning\|checks\[name\]"
  echo "== $which: weft train molecules --epochs 10 --weave-threads 1"
  rm -f "$out/train-$which-$n.jsonl"
  (cd /tmp && "${weft[@]}" train molecules --epochs 10 --weave-threads 1 --progress lines \
     --data-dir /work/shared/data --log "$out/train-$which-$n.jsonl" 2>&1 | tail -8)
done
