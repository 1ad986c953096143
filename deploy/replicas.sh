#!/usr/bin/env bash
# Starts N `inferno serve` replicas on free loopback ports and HAProxy in
# front of them (deploy/haproxy.cfg.in), prints the front address, and runs
# until Ctrl-C / SIGTERM; then it stops HAProxy from taking new connections,
# sends SIGTERM to the replicas (they drain: running requests finish), waits
# for them and for HAProxy, and exits 0.
#
#   deploy/replicas.sh [options] [-- extra `inferno serve` flags]
#
#   -m, --model PATH      model file (default models/tiny-q8_0.gguf in the repository)
#   -n, --replicas N      replicas (default 3)
#   --port P              the front port (default: a free one)
#   --ports P1,P2,...     the replicas' ports (default: free ones, --port 0)
#   --routing hash|roundrobin
#                         hash (default): a session header, else the
#                         conversation's leading content; roundrobin: no
#                         affinity (for comparison)
#   --balance-factor F    hash: bounded-load consistent hashing, no replica
#                         above F% of the average load (e.g. 150; default 0: off)
#   --bufsize BYTES       HAProxy's buffer: the largest body that is routed by
#                         its content and retried (default 262144)
#   --dir DIR             where the config, the logs and the state go
#                         (default: a new temporary folder)
#   --inferno PATH        the binary (default build/inferno in the repository)
#   --haproxy PATH        the binary (default haproxy, else /usr/sbin/haproxy)
#
# DIR holds haproxy.cfg, haproxy.log, rN.log (each replica's stderr), and
# `state`: one line per replica "NAME PID PORT", then "haproxy PID",
# "front URL" and "stats URL". When a replica exits, DIR/rN.exit gets its exit status
# (137 = SIGKILL).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")

model=$root/models/tiny-q8_0.gguf n=3 front_port= ports= routing=hash factor=0 bufsize=262144
dir= inferno=$root/build/inferno haproxy=
while (($#)); do
    case $1 in
    -m | --model) model=$2; shift 2 ;;
    -n | --replicas) n=$2; shift 2 ;;
    --port) front_port=$2; shift 2 ;;
    --ports) ports=$2; shift 2 ;;
    --routing) routing=$2; shift 2 ;;
    --balance-factor) factor=$2; shift 2 ;;
    --bufsize) bufsize=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --inferno) inferno=$2; shift 2 ;;
    --haproxy) haproxy=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    *) echo "replicas.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
serve_flags=("$@")
die() { echo "replicas.sh: $*" >&2; exit 1; }
[[ $n =~ ^[1-9][0-9]*$ ]] || die "--replicas: expected a positive number, got '$n'"
[[ $routing == hash || $routing == roundrobin ]] || die "--routing: hash or roundrobin, got '$routing'"
[[ $factor =~ ^[0-9]+$ ]] && { ((factor == 0 || factor > 100)) || die "--balance-factor: 0 or above 100"; } ||
    die "--balance-factor: a number"
[[ $bufsize =~ ^[0-9]+$ ]] || die "--bufsize: a number of bytes"
[ -x "$inferno" ] || die "no $inferno (make -j2 all)"
[ -e "$model" ] || die "no model $model"
if [ -z "$haproxy" ]; then haproxy=$(command -v haproxy || echo /usr/sbin/haproxy); fi
[ -x "$haproxy" ] || die "no haproxy (apt-get install haproxy)"
IFS=, read -r -a port_list <<<"$ports"
if [ -n "$ports" ] && ((${#port_list[@]} != n)); then die "--ports: $n ports expected"; fi
if [ -z "$dir" ]; then dir=$(mktemp -d /tmp/inferno-replicas.XXXXXX); fi
mkdir -p "$dir" || die "cannot create $dir"
: >"$dir/state"

# A free loopback port (the kernel's pick; it could be taken again before
# HAProxy binds it, in which case HAProxy fails to start and we say so).
free_port() {
    /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

declare -a pids=() names=() rports=()
haproxy_pid=
stopping=0

# Stop: HAProxy first stops listening (SIGUSR1: soft stop, its open
# connections finish), the replicas drain (SIGTERM), then we wait for all.
stop() {
    ((stopping)) && return
    stopping=1
    echo "replicas.sh: stopping: draining the replicas" >&2
    [ -n "$haproxy_pid" ] && kill -USR1 "$haproxy_pid" 2>/dev/null
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for i in "${!pids[@]}"; do
        if wait "${pids[$i]}" 2>/dev/null; then st=0; else st=$?; fi
        [ -e "$dir/${names[$i]}.exit" ] || echo "$st" >"$dir/${names[$i]}.exit"
    done
    if [ -n "$haproxy_pid" ]; then
        for _ in $(seq 1 50); do kill -0 "$haproxy_pid" 2>/dev/null || break; sleep 0.1; done
        kill -TERM "$haproxy_pid" 2>/dev/null
        wait "$haproxy_pid" 2>/dev/null
    fi
    echo "replicas.sh: stopped" >&2
}
trap 'stop; exit 0' INT TERM
trap 'stop' EXIT

# --- the replicas --------------------------------------------------------
for ((i = 1; i <= n; i++)); do
    name=r$i
    port=${port_list[$((i - 1))]:-0}
    # setsid: out of the terminal's process group, so that Ctrl-C reaches
    # only this script, which drains the replicas in order (below).
    setsid "$inferno" serve -m "$model" --host 127.0.0.1 --port "$port" "${serve_flags[@]}" \
        >"$dir/$name.log" 2>&1 &
    pids+=($!) names+=("$name")
done
for i in "${!pids[@]}"; do
    log=$dir/${names[$i]}.log port=
    for _ in $(seq 1 600); do
        port=$(sed -nE 's|.*listening on http://[^:]+:([0-9]+).*|\1|p' "$log" | head -n 1)
        [ -n "$port" ] && break
        kill -0 "${pids[$i]}" 2>/dev/null || break
        sleep 0.1
    done
    [ -n "$port" ] || { tail -n 5 "$log" >&2; die "${names[$i]} did not start (log: $log)"; }
    rports+=("$port")
done
# Ready = /health 200 (503 while the model loads).
for i in "${!pids[@]}"; do
    ok=0
    for _ in $(seq 1 1200); do
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:${rports[$i]}/health")
        [ "$code" = 200 ] && { ok=1; break; }
        kill -0 "${pids[$i]}" 2>/dev/null || break
        sleep 0.1
    done
    ((ok)) || { tail -n 5 "$dir/${names[$i]}.log" >&2; die "${names[$i]} is not healthy"; }
    echo "${names[$i]} ${pids[$i]} ${rports[$i]}" >>"$dir/state"
    echo "replicas.sh: ${names[$i]}: http://127.0.0.1:${rports[$i]} (pid ${pids[$i]}, log $dir/${names[$i]}.log)" >&2
done

# --- HAProxy ---------------------------------------------------------------
if [ "$routing" = hash ]; then
    balance="    balance hash var(txn.route_key)\n    hash-type consistent"
    ((factor)) && balance+="\n    hash-balance-factor $factor"
else
    balance="    balance roundrobin"
fi
servers=
for i in "${!pids[@]}"; do servers+="    server ${names[$i]} 127.0.0.1:${rports[$i]}\n"; done
started=0
for attempt in 1 2 3; do
    fport=${front_port:-$(free_port)} sport=$(free_port)
    sed -e "s|@FRONT@|127.0.0.1:$fport|; s|@STATS@|127.0.0.1:$sport|; s|@BUFSIZE@|$bufsize|" \
        -e "s|^@BALANCE@\$|$balance|; s|^@SERVERS@\$|$servers|" \
        "$here/haproxy.cfg.in" >"$dir/haproxy.cfg"
    "$haproxy" -c -q -f "$dir/haproxy.cfg" || die "haproxy rejects $dir/haproxy.cfg"
    setsid "$haproxy" -db -f "$dir/haproxy.cfg" >>"$dir/haproxy.log" 2>&1 &
    haproxy_pid=$!
    for _ in $(seq 1 50); do
        if curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$sport/stats"; then started=1; break; fi
        kill -0 "$haproxy_pid" 2>/dev/null || break
        sleep 0.1
    done
    ((started)) && break
    kill -TERM "$haproxy_pid" 2>/dev/null; wait "$haproxy_pid" 2>/dev/null; haproxy_pid=
    [ -n "$front_port" ] && break # a port the user chose: do not pick another
done
((started)) || { tail -n 5 "$dir/haproxy.log" >&2; die "haproxy did not start (log: $dir/haproxy.log)"; }
echo "haproxy $haproxy_pid" >>"$dir/state"
echo "front http://127.0.0.1:$fport" >>"$dir/state"
echo "stats http://127.0.0.1:$sport" >>"$dir/state"
echo "replicas.sh: HAProxy: stats and Prometheus at http://127.0.0.1:$sport/stats, /metrics" >&2
echo "replicas.sh: $n replicas, routing $routing, state in $dir" >&2
echo "http://127.0.0.1:$fport"

# --- run until told to stop ------------------------------------------------
# A replica that exits on its own (killed, or drained by someone else's
# SIGTERM) is recorded and the others go on; HAProxy's checks take it out.
declare -A live=()
for i in "${!pids[@]}"; do live[${pids[$i]}]=${names[$i]}; done
while ((${#live[@]})) && kill -0 "$haproxy_pid" 2>/dev/null; do
    wait -n -p done_pid "${!live[@]}" "$haproxy_pid"
    st=$?
    [ -n "${done_pid:-}" ] || continue # a signal interrupted the wait
    if [ "$done_pid" = "$haproxy_pid" ]; then
        echo "replicas.sh: haproxy exited ($st)" >&2
        haproxy_pid=
        break
    fi
    name=${live[$done_pid]}
    unset "live[$done_pid]"
    echo "$st" >"$dir/$name.exit"
    echo "replicas.sh: $name (pid $done_pid) exited with status $st" >&2
done
if [ -z "$haproxy_pid" ]; then exit 1; fi
echo "replicas.sh: no replica left" >&2
wait "$haproxy_pid"
