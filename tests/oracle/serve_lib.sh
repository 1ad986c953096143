# Sourced by the checks that start `inferno serve --port 0` themselves.

# wait_ready LOGFILE PID: prints the server's port once its log names it and
# /health says 200 (60 s at most); fails when the process ends first.
wait_ready() {
    local log=$1 p=$2 port= code
    for _ in $(seq 1 600); do
        port=$(sed -nE 's|.*listening on http://127\.0\.0\.1:([0-9]+).*|\1|p' "$log" | head -n 1)
        if [ -n "$port" ]; then
            code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$port/health")
            if [ "$code" = 200 ]; then echo "$port"; return 0; fi
        fi
        kill -0 "$p" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
