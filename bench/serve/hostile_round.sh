#!/usr/bin/env bash
# One round of bench/log/2026-11-26-serve-hostile.md: WEFT serves a tiny calculator on a free
# loopback port while BENCH (weft_bench_serve_hostile) holds 1,000 dribbling and 1,000 idle
# connections and one client posts every 50 ms for 30 s; prints BENCH's line after LABEL.
#   bench/serve/hostile_round.sh WEFT BENCH LABEL   (LD_LIBRARY_PATH picks a libweft if needed)
set -euo pipefail
weft=$1 bench=$2 label=$3
dir=${WEFT_HOSTILE_DIR:-/tmp/weft-serve-hostile}
mkdir -p "$dir"
[[ -f $dir/calc.safetensors ]] || "$weft" train calculator --epochs 1 --max-train 24 \
  --max-eval 8 --hidden 8 --checkpoint "$dir/calc.safetensors" --progress off --no-compare >/dev/null
"$weft" serve --checkpoint "$dir/calc.safetensors" --port 0 2>"$dir/$label.log" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 400); do grep -q listening "$dir/$label.log" && break; sleep 0.05; done
port=$(sed -n 's|.*http://127.0.0.1:\([0-9]*\).*|\1|p' "$dir/$label.log" | head -1)
echo -n "$label: "
timeout 120 "$bench" --port "$port" --dribblers 1000 --idle 1000 --seconds 30 --interval-ms 50 \
  --timeout-s 10
