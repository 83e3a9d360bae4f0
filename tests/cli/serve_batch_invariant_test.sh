#!/usr/bin/env bash
# `weft serve` answers in the batch-invariant mode by default; --no-batch-invariant or
# WEFT_BATCH_INVARIANT=0 turns it off, --batch-invariant stays accepted, and the two flags
# together are an error. The mode is read off the server's "listening" line, and a request is
# answered in each. Usage: serve_batch_invariant_test.sh WEFT
set -uo pipefail
weft=$1
source "$(dirname "$0")/test_helpers.sh"
pid=
trap '[[ -n "$pid" ]] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT

"$weft" train calculator --epochs 1 --max-train 24 --max-eval 8 --hidden 8 \
  --checkpoint "$work/calc.safetensors" --progress off --no-compare >/dev/null

# expect_mode on|off [VAR=value ...] WEFT serve [flags]: the server's listening line says
# "batch-invariant on|off", it answers a request, and it stops on SIGTERM.
expect_mode() {
  local want=$1
  shift
  env "$@" --checkpoint "$work/calc.safetensors" --port 0 2>"$work/log" &
  pid=$!
  for _ in $(seq 200); do grep -q listening "$work/log" && break; sleep 0.05; done
  local port
  port=$(sed -n 's|.*http://127.0.0.1:\([0-9]*\).*|\1|p' "$work/log" | head -1)
  local body='{"instances": [{"number": 3}]}'
  local answer=
  if [[ -n "$port" ]] && exec 3<>"/dev/tcp/127.0.0.1/$port"; then
    printf 'POST /v1/models/calculator:predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
      "${#body}" "$body" >&3
    answer=$(cat <&3)
    exec 3<&-
  fi
  kill -TERM "$pid"
  wait "$pid"
  pid=
  if grep -q "batch-invariant $want)" "$work/log" && grep -q '"predictions"' <<<"$answer"; then
    echo "ok   $* (batch-invariant $want)"
  else
    echo "FAIL $*: wanted batch-invariant $want and an answer; log and answer:"
    cat "$work/log"
    echo "$answer"
    failures=$((failures + 1))
  fi
}

expect_mode on "$weft" serve
expect_mode on "$weft" serve --batch-invariant
expect_mode off "$weft" serve --no-batch-invariant
expect_mode off WEFT_BATCH_INVARIANT=0 "$weft" serve
expect_mode on WEFT_BATCH_INVARIANT=1 "$weft" serve

if "$weft" serve --batch-invariant --no-batch-invariant --checkpoint "$work/calc.safetensors" \
  --port 0 >/dev/null 2>"$work/err" || ! grep -q "excludes" "$work/err"; then
  echo "FAIL both flags: not refused naming the conflict"
  cat "$work/err"
  failures=$((failures + 1))
fi
finish serve_batch_invariant_test
