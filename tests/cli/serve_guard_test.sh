#!/usr/bin/env bash
# `weft serve` guarding its doors as a process (issue 29): a second server on a port in use
# fails with one line naming the address; --auth-token-file makes every request but /healthz
# answer 401 without the token; a non-loopback --host without a token warns on stderr.
# Usage: serve_guard_test.sh WEFT
set -euo pipefail
weft=$1
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; cat "$dir"/*.log >&2 || true; exit 1; }

# Waits for a server's "listening" line in LOG and prints its port.
port_of() {
  for _ in $(seq 400); do grep -q listening "$1" && break; sleep 0.05; done
  sed -n 's|.*listening on http://[^:]*:\([0-9]*\).*|\1|p' "$1" | head -1
}
# One GET over bash's /dev/tcp with an optional extra header line; prints the response.
get() {
  exec 3<>"/dev/tcp/127.0.0.1/$port"
  printf 'GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%b\r\n' "$1" "${2:-}" >&3
  cat <&3
  exec 3<&-
}

"$weft" train calculator --epochs 1 --max-train 24 --max-eval 8 --hidden 8 \
  --checkpoint "$dir/calc.safetensors" --progress off --no-compare >/dev/null
echo "s3cret-token-0123456789" >"$dir/token"
"$weft" serve --checkpoint "$dir/calc.safetensors" --port 0 --auth-token-file "$dir/token" \
  2>"$dir/first.log" &
pids+=($!)
port=$(port_of "$dir/first.log")
[[ -n "$port" ]] || fail "no port in the first server's log"

# The port is taken: the second server must not start (no SO_REUSEPORT sharing).
status=0
timeout 60 "$weft" serve --checkpoint "$dir/calc.safetensors" --port "$port" \
  2>"$dir/second.log" || status=$?
[[ $status -ne 0 && $status -ne 124 ]] || fail "a second server on port $port exited $status"
[[ $(wc -l <"$dir/second.log") -eq 1 ]] || fail "the refusal is not one line"
grep -q "127.0.0.1:$port" "$dir/second.log" || fail "the refusal does not name the address"

r=$(get /v1/models)
grep -q '401' <<<"$r" || fail "no token: $r"
r=$(get /v1/models 'Authorization: Bearer wrong-token-0123456789\r\n')
grep -q '401' <<<"$r" || fail "a wrong token: $r"
r=$(get /v1/models 'Authorization: Bearer s3cret-token-0123456789\r\n')
grep -q '200 OK' <<<"$r" || fail "the right token: $r"
r=$(get /healthz)
grep -q '200 OK' <<<"$r" || fail "/healthz without a token: $r"

# Every address of the machine, no token: a warning (and the server still starts).
"$weft" serve --checkpoint "$dir/calc.safetensors" --host 0.0.0.0 --port 0 2>"$dir/open.log" &
pids+=($!)
[[ -n "$(port_of "$dir/open.log")" ]] || fail "the server on 0.0.0.0 did not start"
grep -q 'warning: listening on 0.0.0.0.*without --auth-token-file' "$dir/open.log" ||
  fail "no warning for 0.0.0.0 without a token"
grep -q 'warning' "$dir/first.log" && fail "a loopback server with a token warned"
echo "serve_guard_test: ok"
