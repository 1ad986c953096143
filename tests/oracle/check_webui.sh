#!/usr/bin/env bash
# The web chat page (webui/, built into build/inferno): starts `inferno serve`
# with the tiny model on free loopback ports (--port 0, the bound port read
# from the log), one plain, one with --api-key, one with --no-webui; checks
# the files over HTTP (curl), then drives the page in Debian's headless
# Chromium (tests/oracle/webui/browser.mjs, playwright-core). Kills only the
# servers it started. Ends with "N passed, N failed".
#
# Env: MODEL (models/tiny-q8_0.gguf), INFERNO (build/inferno),
#      CHROMIUM (/usr/bin/chromium);
#      SCREENSHOT=FILE: only save the docs' screenshot (docs/webui.png).
set -uo pipefail
cd "$(dirname "$0")/../.."

MODEL=${MODEL:-models/tiny-q8_0.gguf}
INFERNO=${INFERNO:-build/inferno}
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
KEY=sk-inferno-webui
pass=0 fail=0

if [ ! -x "$INFERNO" ] || [ ! -f "$MODEL" ] || [ ! -d node_modules/playwright-core ] ||
    [ ! -x "$CHROMIUM" ]; then
    echo "check_webui: needs $INFERNO, $MODEL, node_modules/playwright-core and $CHROMIUM"
    echo "0 passed, 1 failed"
    exit 1
fi

# start_server LOGFILE ARGS...: starts a server; sets $spid.
start_server() {
    local log=$1; shift
    "$INFERNO" serve -m "$MODEL" --host 127.0.0.1 --port 0 -c 1024 --alias tiny "$@" >"$log" 2>&1 &
    spid=$!
}
. tests/oracle/serve_lib.sh # wait_ready

log=$(mktemp) klog=$(mktemp) nlog=$(mktemp)
pid= kpid= npid=
cleanup() {
    for p in $pid $kpid $npid; do
        if kill -0 "$p" 2>/dev/null; then kill -KILL "$p" 2>/dev/null; fi
    done
    rm -f "$log" "$klog" "$nlog"
}
trap cleanup EXIT

start_server "$log" -np 2
pid=$spid
if [ -n "${SCREENSHOT:-}" ]; then
    port=$(wait_ready "$log" "$pid") || { cat "$log"; echo "check_webui: no server"; exit 1; }
    SCREENSHOT=$SCREENSHOT BASE="http://127.0.0.1:$port" CHROMIUM=$CHROMIUM \
        timeout 60 node tests/oracle/webui/browser.mjs
    exit
fi
start_server "$klog" -np 1 --api-key "$KEY"
kpid=$spid
start_server "$nlog" -np 1 --no-webui
npid=$spid
port=$(wait_ready "$log" "$pid")
kport=$(wait_ready "$klog" "$kpid")
nport=$(wait_ready "$nlog" "$npid")
if [ -z "$port" ] || [ -z "$kport" ] || [ -z "$nport" ]; then
    echo "check_webui: the servers did not become ready"
    sed 's/^/    plain | /' "$log"; sed 's/^/    key | /' "$klog"; sed 's/^/    no-webui | /' "$nlog"
    echo "0 passed, 1 failed"
    exit 1
fi

# expect LABEL ACTUAL WANTED: one check.
expect() {
    if [ "$2" = "$3" ]; then pass=$((pass + 1)); else
        echo "FAILED: $1: expected '$3', got '$2'"; fail=$((fail + 1)); fi
}
# head_of URL: status and Content-Type.
head_of() { curl -s -o /dev/null -w '%{http_code} %{content_type}' --max-time 5 "$1"; }

# The files, from memory, byte for byte what webui/ holds; without a key too.
for f in index.html style.css markdown.js app.js favicon.svg; do
    if curl -s --max-time 5 "http://127.0.0.1:$port/$f" | cmp -s - "webui/$f"; then
        pass=$((pass + 1)); else echo "FAILED: /$f differs from webui/$f"; fail=$((fail + 1)); fi
done
expect "GET /" "$(head_of "http://127.0.0.1:$port/")" "200 text/html; charset=utf-8"
expect "GET /app.js" "$(head_of "http://127.0.0.1:$port/app.js")" "200 text/javascript; charset=utf-8"
expect "GET /?x=1" "$(head_of "http://127.0.0.1:$port/?x=1")" "200 text/html; charset=utf-8"
expect "GET /nothing.js" "$(head_of "http://127.0.0.1:$port/nothing.js" | cut -d' ' -f1)" "404"
expect "GET / with --api-key, no key" "$(head_of "http://127.0.0.1:$kport/" | cut -d' ' -f1)" "200"
expect "GET /v1/models with --api-key, no key" \
    "$(head_of "http://127.0.0.1:$kport/v1/models" | cut -d' ' -f1)" "401"
expect "GET / with --no-webui" "$(head_of "http://127.0.0.1:$nport/" | cut -d' ' -f1)" "404"
expect "GET /app.js with --no-webui" "$(head_of "http://127.0.0.1:$nport/app.js" | cut -d' ' -f1)" "404"
expect "the API with --no-webui" "$(head_of "http://127.0.0.1:$nport/v1/models" | cut -d' ' -f1)" "200"

# The page in the browser.
out=$(BASE="http://127.0.0.1:$port" KEY_BASE="http://127.0.0.1:$kport" KEY=$KEY CHROMIUM=$CHROMIUM \
    timeout 80 node tests/oracle/webui/browser.mjs 2>&1)
rc=$?
echo "$out"
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' <<<"$out" | tail -n 1)
if [ -n "$line" ]; then
    pass=$((pass + $(sed -E 's/^([0-9]+) passed.*/\1/' <<<"$line")))
    fail=$((fail + $(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")))
fi
if [ -z "$line" ] || { [ "$rc" -ne 0 ] && ! grep -qE ' [1-9][0-9]* failed' <<<"$line"; }; then
    echo "FAILED: browser.mjs ended with status $rc and no failure counted"
    fail=$((fail + 1))
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
