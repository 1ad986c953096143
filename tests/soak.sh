#!/usr/bin/env bash
# The full hostile-connection soak of issue 20, not part of `make test`: an
# `inferno serve` on a free loopback port with the tiny model, then 60 s of
# 300 idle + 50 slowloris sockets and 16 streaming clients while a prober
# checks that /health and a small completion are answered within 2 s
# (tests/oracle/server/soak.mjs). Env: MODEL, SOAK_S (60), IDLE (300),
# SLOW (50), CLIENTS (16), INFERNO (build/inferno).
set -uo pipefail
cd "$(dirname "$0")/.."
MODEL=${MODEL:-models/tiny-q8_0.gguf}
INFERNO=${INFERNO:-build/inferno}
KEY=sk-inferno-soak
log=$(mktemp)
ulimit -n 4096 2>/dev/null || true
"$INFERNO" serve -m "$MODEL" --host 127.0.0.1 --port 0 -np 4 -c 1024 --api-key "$KEY" \
    --alias tiny >"$log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$log"' EXIT
port=
for _ in $(seq 1 600); do
    port=$(sed -nE 's|.*listening on http://127\.0\.0\.1:([0-9]+).*|\1|p' "$log" | head -n 1)
    if [ -n "$port" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 \
        "http://127.0.0.1:$port/health")" = 200 ]; then break; fi
    kill -0 "$pid" 2>/dev/null || { cat "$log"; exit 1; }
    sleep 0.1
done
INFERNO_URL="http://127.0.0.1:$port" INFERNO_KEY=$KEY INFERNO_MODEL=tiny \
    SOAK_S=${SOAK_S:-60} IDLE=${IDLE:-300} SLOW=${SLOW:-50} CLIENTS=${CLIENTS:-16} \
    timeout $(( ${SOAK_S:-60} + 120 )) node tests/oracle/server/soak.mjs
