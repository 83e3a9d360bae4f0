#!/usr/bin/env bash
# `weft serve` as a process: it answers over HTTP on an ephemeral loopback port, and SIGTERM
# lets the request in flight finish before the process exits 0. Usage: serve_sigterm_test.sh WEFT
set -euo pipefail
weft=$1
dir=$(mktemp -d)
pid=
cleanup() {
  if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; cat "$dir/log" >&2 || true; exit 1; }

"$weft" train calculator --epochs 1 --max-train 24 --max-eval 8 --hidden 8 \
  --checkpoint "$dir/calc.safetensors" --progress off --no-compare >/dev/null
"$weft" serve --checkpoint "$dir/calc.safetensors" --port 0 --max-batch 1 2>"$dir/log" &
pid=$!
for _ in $(seq 200); do grep -q listening "$dir/log" && break; sleep 0.05; done
port=$(sed -n 's|.*http://127.0.0.1:\([0-9]*\).*|\1|p' "$dir/log" | head -1)
[[ -n "$port" ]] || fail "no port in the server's log"

# One HTTP/1.1 request over bash's /dev/tcp; prints the whole response.
request() {
  exec 3<>"/dev/tcp/127.0.0.1/$port"
  printf 'POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
    "$1" "${#2}" "$2" >&3
  cat <&3
  exec 3<&-
}

small=$(request /v1/models/calculator:predict '{"instances": [{"number": 3}]}')
grep -q '200 OK' <<<"$small" || fail "predict: $small"
grep -q '"predictions"' <<<"$small" || fail "predict body: $small"
missing=$(request /v1/models/other:predict '{"instances": [1]}')
grep -q '404' <<<"$missing" || fail "unknown model: $missing"

# A long request (1000 instances, one per batch), then SIGTERM while it runs.
instances=$(for i in $(seq 1000); do printf '{"number": %d},' $((i % 10)); done)
request /v1/models/calculator:predict "{\"instances\": [${instances%,}]}" >"$dir/long" &
client=$!
sleep 0.1
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=
wait "$client" || true
[[ $status -eq 0 ]] || fail "weft serve exited $status after SIGTERM"
grep -q 'SIGTERM, draining' "$dir/log" || fail "no drain message"
grep -q '200 OK' "$dir/long" || fail "the request in flight was dropped: $(head -c 300 "$dir/long")"
echo "serve_sigterm_test: ok"
