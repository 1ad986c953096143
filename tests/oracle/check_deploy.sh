#!/usr/bin/env bash
# Replicas behind HAProxy (deploy/replicas.sh, deploy/haproxy.cfg.in), on
# loopback: 3 replicas of the tiny model, HAProxy in front, CLIENTS (16)
# clients running multi-turn conversations (tests/oracle/deploy/load.mjs).
#
#  1. hash routing, DURATION_S (60) s: first the routing itself (a
#     conversation's turns on one replica, in chat and Messages shapes; the
#     session header wins); then the load, with one replica SIGKILLed at 1/3
#     and another SIGTERMed (drained) at 1/2. No request may fail except
#     those open on the killed replica at the kill (counted and reported);
#     HAProxy must mark the drained replica DOWN; the drained replica must
#     exit 0, the killed one 137.
#  2. round-robin routing, fresh replicas, RR_DURATION_S (30) s, no faults.
#  3. the prefix-cache hit rate, client-side (cached_tokens / prompt_tokens),
#     over the same requests in both runs (the conversation turns both
#     completed, the hash run's before the kill, all three replicas up):
#     hash must be at least MARGIN (12) points higher, and round-robin must
#     have prefilled at least PREFILL_RATIO (1.5) times as many prompt tokens
#     (tests/oracle/deploy/compare.mjs; docs/PERFORMANCE.md, "Replicas behind
#     HAProxy", has the measurements the margins come from).
# Every process started here is stopped (deploy/replicas.sh drains its
# replicas on SIGTERM); none is left behind. Ends with "N passed, N failed".
#
# Env: MODEL (models/tiny-q8_0.gguf), DURATION_S (60), RR_DURATION_S (30),
#      CLIENTS (16), MARGIN (12), PREFILL_RATIO (1.5), FAULTS (1; 0: the hash run has no faults,
#      for measuring), SERVE_FLAGS (the replicas' flags), KEEP (a folder to
#      keep the logs and summaries in).
set -uo pipefail
cd "$(dirname "$0")/../.."

MODEL=${MODEL:-models/tiny-q8_0.gguf}
DURATION_S=${DURATION_S:-60}
RR_DURATION_S=${RR_DURATION_S:-30}
CLIENTS=${CLIENTS:-16}
MARGIN=${MARGIN:-12}
PREFILL_RATIO=${PREFILL_RATIO:-1.5}
FAULTS=${FAULTS:-1}
SERVE_FLAGS=${SERVE_FLAGS:--np 4 -c 2048 -t 1 --drain-timeout 30}
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAILED: $*"; }

if [ ! -x build/inferno ] || [ ! -f "$MODEL" ] || ! command -v node >/dev/null ||
    ! { command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ]; }; then
    echo "check_deploy: needs build/inferno, $MODEL, node and haproxy"
    echo "0 passed, 1 failed"
    exit 1
fi

work=$(mktemp -d /tmp/check_deploy.XXXXXX)
spid=
cleanup() {
    if [ -n "$spid" ] && kill -0 "$spid" 2>/dev/null; then
        kill -TERM "$spid" 2>/dev/null
        wait "$spid" 2>/dev/null
    fi
    # Anything of ours still running (the script failed half-way): the
    # PIDs it recorded, and HAProxy's.
    for d in "$work"/hash "$work"/roundrobin; do
        [ -f "$d/state" ] || continue
        while read -r name pid _; do
            [[ $name == r* || $name == haproxy ]] && kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
        done <"$d/state"
    done
    if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp -r "$work"/. "$KEEP"/; fi
    rm -rf "$work"
}
trap cleanup EXIT

# start ROUTING: starts deploy/replicas.sh in $work/ROUTING; sets $spid,
# $front, $dir.
start() {
    dir=$work/$1
    # shellcheck disable=SC2086
    deploy/replicas.sh -m "$MODEL" -n 3 --routing "$1" --dir "$dir" -- $SERVE_FLAGS \
        >"$work/$1.out" 2>"$work/$1.err" &
    spid=$!
    front=
    for _ in $(seq 1 600); do
        front=$(sed -n 's/^front //p' "$dir/state" 2>/dev/null)
        [ -n "$front" ] && return 0
        kill -0 "$spid" 2>/dev/null || break
        sleep 0.1
    done
    cat "$work/$1.err"
    return 1
}
# stop: SIGTERM to the script (it drains what is left); checks that it exits
# 0 and that none of its processes is left.
stop() {
    kill -TERM "$spid"
    if wait "$spid"; then ok; else bad "replicas.sh exited $?"; fi
    spid=
    local left=0
    while read -r name pid _; do
        [[ $name == r* || $name == haproxy ]] && kill -0 "$pid" 2>/dev/null && left=$((left + 1))
    done <"$dir/state"
    if [ "$left" -eq 0 ]; then ok; else bad "$left processes left running"; fi
}
# load LABEL ENV...: runs the clients; their summary goes to $work/LABEL.json.
load() {
    local label=$1; shift
    env FRONT="$front" STATE="$dir/state" CLIENTS="$CLIENTS" LABEL="$label" OUT="$work/$label.json" "$@" \
        node tests/oracle/deploy/load.mjs >"$work/$label.log" 2>&1
    local rc=$?
    sed 's/^/  /' "$work/$label.log"
    local line
    line=$(grep -E "^$label: [0-9]+ passed, [0-9]+ failed" "$work/$label.log" | tail -n 1)
    if [ -n "$line" ]; then
        pass=$((pass + $(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line")))
        fail=$((fail + $(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")))
    fi
    if [ "$rc" -ne 0 ] && ! grep -qE ' [1-9][0-9]* failed' <<<"$line"; then bad "$label: the client exited $rc"; fi
}
json() { node -e "const j=require('$1'); console.log(($2))"; }

t0=$SECONDS
# --- 0. the Kubernetes example: it parses, its HAProxy config is valid and
# routes as deploy/haproxy.cfg.in does (the backend's rules, less how the
# servers are found).
haproxy=$(command -v haproxy || echo /usr/sbin/haproxy)
if "$haproxy" -c -q -f deploy/k8s/haproxy.cfg; then ok; else bad "haproxy rejects deploy/k8s/haproxy.cfg"; fi
rules() { sed -n '/^backend inferno/,/^frontend stats/p' "$1" |
    grep -vE '^@|^    (balance|hash-type|server|server-template) |^    # (One slot|answers)'; }
if diff <(rules deploy/haproxy.cfg.in) <(rules deploy/k8s/haproxy.cfg) >"$work/rules.diff"; then ok; else
    bad "deploy/k8s/haproxy.cfg's backend differs from deploy/haproxy.cfg.in's:"; cat "$work/rules.diff"
fi
if /usr/bin/python3 - deploy/k8s <<'PY'; then ok; else bad "deploy/k8s/*.yaml"; fi
import sys, yaml, pathlib
d = pathlib.Path(sys.argv[1])
docs = [x for f in sorted(d.glob("*.yaml")) for x in yaml.safe_load_all(f.read_text()) if x]
kinds = {(x["kind"], x["metadata"]["name"]) for x in docs if "metadata" in x}
need = {("Deployment", "inferno"), ("Service", "inferno-replicas"), ("Deployment", "inferno-haproxy"),
        ("Service", "inferno")}
assert need <= kinds, f"missing {need - kinds}"
dep = next(x for x in docs if x.get("kind") == "Deployment" and x["metadata"]["name"] == "inferno")
pod = dep["spec"]["template"]["spec"]
c = pod["containers"][0]
assert c["readinessProbe"]["httpGet"]["path"] == "/health", "readiness on /health"
drain = int(c["args"][c["args"].index("--drain-timeout") + 1])
pre = int(c["lifecycle"]["preStop"]["exec"]["command"][1])
assert pod["terminationGracePeriodSeconds"] > drain + pre, "grace period covers preStop + drain"
svc = next(x for x in docs if x.get("kind") == "Service" and x["metadata"]["name"] == "inferno-replicas")
assert svc["spec"]["clusterIP"] == "None", "headless replicas Service"
k = yaml.safe_load((d / "kustomization.yaml").read_text())
assert k["configMapGenerator"][0]["files"] == ["haproxy.cfg"]
cfg = (d / "haproxy.cfg").read_text()
assert "inferno-replicas." in cfg and "resolvers k8s" in cfg, "server-template over the headless Service"
PY

# --- 1. hash routing, with a kill and a drain ----------------------------
if start hash; then
    ok
    faults=()
    if [ "$FAULTS" = 1 ]; then
        faults=(KILL_AT="$(((DURATION_S + 2) / 3))" DRAIN_AT="$(((DURATION_S + 1) / 2))")
    fi
    load hash DURATION_S="$DURATION_S" ROUTING_CHECKS=1 "${faults[@]}"
    if [ "$FAULTS" = 1 ] && [ -f "$work/hash.json" ]; then
        killed=$(json "$work/hash.json" 'j.kill?.replica')
        drained=$(json "$work/hash.json" 'j.drain?.replica')
        st=$(cat "$dir/$drained.exit" 2>/dev/null)
        if [ "$st" = 0 ]; then ok; else bad "the drained replica $drained exited '${st}', expected 0"; fi
        st=$(cat "$dir/$killed.exit" 2>/dev/null)
        if [ "$st" = 137 ]; then ok; else bad "the killed replica $killed exited '${st}', expected 137 (SIGKILL)"; fi
        if grep -q "draining:" "$dir/$drained.log"; then ok; else bad "$drained did not log its drain"; fi
        retried=$(grep -c ' rc=+\?[1-9]' "$dir/haproxy.log")
        cut=$(grep -cE " inferno/$killed 200 S[DH]" "$dir/haproxy.log")
        echo "  HAProxy: $retried requests retried (redispatched); $cut responses cut by $killed's death (its log)"
    fi
    stop
else
    bad "hash: replicas did not start"
fi

# --- 2. round-robin routing, fresh replicas -------------------------------
if start roundrobin; then
    ok
    load roundrobin DURATION_S="$RR_DURATION_S" WINDOW_S="$(((DURATION_S + 2) / 3))"
    stop
else
    bad "roundrobin: replicas did not start"
fi

# --- 3. the hit rates --------------------------------------------------------
if [ -f "$work/hash.json" ] && [ -f "$work/roundrobin.json" ]; then
    hw=$(json "$work/hash.json" '(j.hit_rate.hit_rate*100).toFixed(1)')
    rw=$(json "$work/roundrobin.json" '(j.hit_rate.hit_rate*100).toFixed(1)')
    with=; [ "$FAULTS" = 1 ] && with=", with the faults"
    echo "  whole runs: hash $hw% (${DURATION_S} s$with), round-robin $rw% (${RR_DURATION_S} s)"
    if node tests/oracle/deploy/compare.mjs "$work/hash.json" "$work/roundrobin.json" "$MARGIN" "$PREFILL_RATIO" >"$work/compare.txt"; then
        ok
    else
        fail=$((fail + 1))
    fi
    sed 's/^/  /' "$work/compare.txt"
    if [ "$FAULTS" = 1 ]; then
        echo "  failures: $(json "$work/hash.json" 'j.failed') in the hash run," \
            "$(json "$work/hash.json" 'j.failed_attributed_to_kill') of them open on the killed replica" \
            "($(json "$work/hash.json" 'j.kill.open_on_it') open on it by their headers at the kill);" \
            "$(json "$work/roundrobin.json" 'j.failed') in the round-robin run"
    fi
else
    bad "no summaries to compare"
fi
echo "  ($((SECONDS - t0)) s)"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
