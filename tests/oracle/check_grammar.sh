#!/usr/bin/env bash
# Constrained decoding end to end: starts `inferno serve` on the tiny
# random-weight model (-np 4, so constrained and free requests share decode
# steps) and runs tests/oracle/grammar/grammar.mjs (ajv, ajv-formats, zod, the
# openai client, and an arithmetic parser of its own as oracles). Ends with
# "N passed, N failed".
#
# Env: MODEL (models/tiny-q8_0.gguf), INFERNO (build/inferno).
set -uo pipefail
cd "$(dirname "$0")/../.."

MODEL=${MODEL:-models/tiny-q8_0.gguf}
INFERNO=${INFERNO:-build/inferno}
KEY=sk-inferno-test
if [ ! -x "$INFERNO" ] || [ ! -f "$MODEL" ] || [ ! -d node_modules/ajv ] || [ ! -d node_modules/zod ]; then
    echo "check_grammar: needs $INFERNO, $MODEL and node_modules/{ajv,ajv-formats,zod,openai}"
    echo "0 passed, 1 failed"
    exit 1
fi
log=$(mktemp)
"$INFERNO" serve -m "$MODEL" --host 127.0.0.1 --port 0 -np 4 -c 4096 --api-key "$KEY" \
    --alias tiny >"$log" 2>&1 &
pid=$!
trap 'kill -KILL $pid 2>/dev/null; rm -f "$log"' EXIT
port=
for _ in $(seq 1 300); do
    port=$(sed -nE 's|.*listening on http://127\.0\.0\.1:([0-9]+).*|\1|p' "$log" | head -n 1)
    if [ -n "$port" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 \
        "http://127.0.0.1:$port/health")" = 200 ]; then break; fi
    port=
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
done
if [ -z "$port" ]; then
    echo "check_grammar: the server did not become ready"; sed 's/^/    | /' "$log"
    echo "0 passed, 1 failed"; exit 1
fi
out=$(INFERNO_URL="http://127.0.0.1:$port" INFERNO_KEY=$KEY INFERNO_MODEL=tiny \
    timeout 400 node tests/oracle/grammar/grammar.mjs 2>&1)
rc=$?
echo "$out"
line=$(grep -E '[0-9]+ passed, [0-9]+ failed' <<<"$out" | tail -n 1)
p=$(sed -E 's/.* ([0-9]+) passed.*/\1/' <<<"$line"); f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
[ -z "$line" ] && { p=0; f=1; }
[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
kill -TERM "$pid"
for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then echo "FAILED: the server did not exit on SIGTERM"; f=$((f + 1));
else wait "$pid" || { echo "FAILED: the server exited with an error"; f=$((f + 1)); }; p=$((p + 1)); fi
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
