#!/usr/bin/env bash
# The server against the real OpenAI client (npm openai@6): starts
# `inferno serve` with the tiny model on a free loopback port (--port 0, the
# bound port read from its log), waits for /health, runs the client suite and
# a bounded load test (CLIENTS streaming clients for DURATION_S seconds against
# -np 4), then stops the server with SIGTERM and checks that it exits cleanly.
# Ends with "N passed, N failed".
#
# Env: MODEL (models/tiny-q8_0.gguf), DURATION_S (20), CLIENTS (16),
#      INFERNO (build/inferno).
set -uo pipefail
cd "$(dirname "$0")/../.."

MODEL=${MODEL:-models/tiny-q8_0.gguf}
INFERNO=${INFERNO:-build/inferno}
KEY=sk-inferno-test
CTX=1024
pass=0 fail=0

if [ ! -x "$INFERNO" ] || [ ! -f "$MODEL" ] || [ ! -d node_modules/openai ]; then
    echo "check_server: needs $INFERNO, $MODEL and node_modules/openai"
    echo "0 passed, 1 failed"
    exit 1
fi

log=$(mktemp)
"$INFERNO" serve -m "$MODEL" --host 127.0.0.1 --port 0 -np 4 -c "$CTX" --api-key "$KEY" \
    --alias tiny >"$log" 2>&1 &
pid=$!
cleanup() {
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null; fi
    rm -f "$log"
}
trap cleanup EXIT

# The bound port, from the log (10 s at most).
port=
for _ in $(seq 1 100); do
    port=$(sed -nE 's|.*listening on http://127\.0\.0\.1:([0-9]+).*|\1|p' "$log" | head -n 1)
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
ready=0
if [ -n "$port" ]; then
    for _ in $(seq 1 600); do # 60 s for the model to load
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$port/health")
        if [ "$code" = 200 ]; then ready=1; break; fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
fi
if [ "$ready" != 1 ]; then
    echo "check_server: the server did not become ready"; sed 's/^/    | /' "$log"
    echo "0 passed, 1 failed"
    exit 1
fi
echo "server ready on port $port"

run_suite() { # file
    local out rc line
    out=$(INFERNO_URL="http://127.0.0.1:$port" INFERNO_KEY=$KEY INFERNO_MODEL=tiny INFERNO_CTX=$CTX \
        DURATION_S=${DURATION_S:-20} CLIENTS=${CLIENTS:-16} \
        timeout 300 node "tests/oracle/server/$1" 2>&1)
    rc=$?
    echo "$out"
    line=$(grep -E '[0-9]+ passed, [0-9]+ failed' <<<"$out" | tail -n 1)
    local p f
    p=$(sed -E 's/.* ([0-9]+) passed.*/\1/' <<<"$line")
    f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
    [ -z "$line" ] && { p=0; f=1; }
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    pass=$((pass + p)); fail=$((fail + f))
}
run_suite suite.mjs
run_suite load.mjs

# Clean shutdown on SIGTERM within 10 s, exit status 0.
kill -TERM "$pid"
for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then
    echo "FAILED: the server did not exit within 10 s of SIGTERM"; fail=$((fail + 1))
else
    wait "$pid"; rc=$?
    if [ "$rc" -eq 0 ]; then pass=$((pass + 1)); else
        echo "FAILED: the server exited with status $rc after SIGTERM"; fail=$((fail + 1))
        tail -n 20 "$log" | sed 's/^/    | /'
    fi
fi
if grep -qE 'AddressSanitizer|ThreadSanitizer|runtime error' "$log"; then
    echo "FAILED: sanitizer report in the server log"; grep -A20 -E 'Sanitizer|runtime error' "$log" | head -40
    fail=$((fail + 1))
fi
echo "${pass} passed, ${fail} failed"
[ "$fail" -eq 0 ]
