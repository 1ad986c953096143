#!/usr/bin/env bash
# Ollama's API against the npm `ollama` client: starts `inferno serve` with
# the tiny model on a free loopback port (--port 0, the bound port read from
# its log) with an API key, and a second one with --embeddings on the same
# weights laid out as Qwen3-Embedding (tests/oracle/embd_model.py), runs
# tests/oracle/server/ollama.mjs against both, then stops them with SIGTERM
# and checks that they exit cleanly. Ends with "N passed, N failed".
#
# Env: MODEL (models/tiny-q8_0.gguf), INFERNO (build/inferno).
set -uo pipefail
cd "$(dirname "$0")/../.."

MODEL=${MODEL:-models/tiny-q8_0.gguf}
INFERNO=${INFERNO:-build/inferno}
KEY=sk-inferno-ollama
CTX=1024
pass=0 fail=0

if [ ! -x "$INFERNO" ] || [ ! -f "$MODEL" ] || [ ! -d node_modules/ollama ]; then
    echo "check_ollama: needs $INFERNO, $MODEL and node_modules/ollama"
    echo "0 passed, 1 failed"
    exit 1
fi

log=$(mktemp)
elog=$(mktemp)
mdir=$(mktemp -d)
pid= epid=
cleanup() {
    for p in $pid $epid; do
        if kill -0 "$p" 2>/dev/null; then kill -KILL "$p" 2>/dev/null; fi
    done
    rm -f "$log" "$elog"
    rm -rf "$mdir"
}
trap cleanup EXIT

# start LOGFILE MODEL ARGS...: starts a server in the background; sets $spid.
start() {
    local l=$1 m=$2; shift 2
    "$INFERNO" serve -m "$m" --host 127.0.0.1 --port 0 -np 2 -c "$CTX" --api-key "$KEY" \
        --alias tiny "$@" >"$l" 2>&1 &
    spid=$!
}
. tests/oracle/serve_lib.sh # wait_ready

start "$log" "$MODEL"
pid=$spid
/usr/bin/python3 tests/oracle/embd_model.py gguf "$MODEL" "$mdir/embd.gguf" >/dev/null
start "$elog" "$mdir/embd.gguf" --embeddings
epid=$spid
port=$(wait_ready "$log" "$pid")
eport=$(wait_ready "$elog" "$epid")
if [ -z "$port" ] || [ -z "$eport" ]; then
    echo "check_ollama: the servers did not become ready"
    sed 's/^/    | /' "$log"; sed 's/^/    embeddings | /' "$elog"
    echo "0 passed, 1 failed"
    exit 1
fi

out=$(INFERNO_URL="http://127.0.0.1:$port" INFERNO_EMBD_URL="http://127.0.0.1:$eport" \
    INFERNO_KEY=$KEY INFERNO_MODEL=tiny INFERNO_CTX=$CTX timeout 120 node tests/oracle/server/ollama.mjs 2>&1)
rc=$?
echo "$out"
line=$(grep -E '[0-9]+ passed, [0-9]+ failed' <<<"$out" | tail -n 1)
if [ -n "$line" ]; then
    pass=$((pass + $(sed -E 's/.* ([0-9]+) passed.*/\1/' <<<"$line")))
    fail=$((fail + $(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")))
fi
if [ -z "$line" ] || { [ "$rc" -ne 0 ] && ! grep -qE ' [1-9][0-9]* failed' <<<"$line"; }; then
    echo "FAILED: ollama.mjs exited with $rc"; fail=$((fail + 1))
fi

# The servers stop on SIGTERM with status 0.
for p in $pid $epid; do
    kill -TERM "$p" 2>/dev/null
    wait "$p"
    st=$?
    if [ "$st" -eq 0 ]; then pass=$((pass + 1)); else echo "FAILED: server $p exited with $st"; fail=$((fail + 1)); fi
done
pid= epid=
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
