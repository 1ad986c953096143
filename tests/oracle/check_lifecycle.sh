#!/usr/bin/env bash
# The server's life: SIGTERM during 10 streaming requests over the five APIs
# (server/drain.mjs MODE=finish: nothing new accepted, every stream ends
# normally with the answer it would have had), then the exit status 0; and
# with --drain-timeout 1, streams that cannot finish each end with their
# API's error event (MODE=expire), again exit 0. Ends with
# "N passed, N failed".
#
# Env: MODEL (models/tiny-q8_0.gguf), INFERNO (build/inferno).
set -uo pipefail
cd "$(dirname "$0")/../.."

MODEL=${MODEL:-models/tiny-q8_0.gguf}
INFERNO=${INFERNO:-build/inferno}
KEY=sk-inferno-test
. tests/oracle/serve_lib.sh # wait_ready
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAILED: $*"; }

if [ ! -x "$INFERNO" ] || [ ! -f "$MODEL" ] || [ ! -d node_modules/openai ]; then
    echo "check_lifecycle: needs $INFERNO, $MODEL and node_modules/openai"
    echo "0 passed, 1 failed"
    exit 1
fi

# run MODE SERVE-FLAGS...: one server, the client in MODE, the exit status.
run() {
    local mode=$1; shift
    local log; log=$(mktemp)
    "$INFERNO" serve -m "$MODEL" --host 127.0.0.1 --port 0 -np 4 -c 4096 --api-key "$KEY" \
        --alias tiny "$@" >"$log" 2>&1 &
    local spid=$! port=
    if ! port=$(wait_ready "$log" "$spid"); then
        bad "$mode: the server did not start"; cat "$log"; kill -9 "$spid" 2>/dev/null; return
    fi
    local out; out=$(mktemp)
    INFERNO_URL="http://127.0.0.1:$port" INFERNO_KEY=$KEY SERVER_PID=$spid MODE=$mode \
        timeout 120 node tests/oracle/server/drain.mjs >"$out" 2>&1
    cat "$out"
    local line; line=$(grep -E '^drain [a-z]+: [0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
    if [ -n "$line" ]; then
        pass=$((pass + $(sed -E 's/^.*: ([0-9]+) passed.*/\1/' <<<"$line")))
        fail=$((fail + $(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")))
    else
        bad "$mode: the client ended without a result"
    fi
    # the server exits on its own once drained
    local st=
    for _ in $(seq 1 200); do
        kill -0 "$spid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$spid" 2>/dev/null; then
        bad "$mode: the server still runs 20 s after SIGTERM"; kill -9 "$spid"; wait "$spid"
    else
        wait "$spid"; st=$?
        [ "$st" = 0 ] && ok || bad "$mode: the server exited $st"
    fi
    grep -q 'drained, shutting down' "$log" && ok || { bad "$mode: no drain in the log"; cat "$log"; }
    rm -f "$log" "$out"
}

run finish
run expire --drain-timeout 1

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
