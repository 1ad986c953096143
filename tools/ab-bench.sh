#!/bin/bash
# Two inferno binaries on the same files, alternating, for the "against the
# previous main" rows of docs/PERFORMANCE.md. Not part of CI (timings).
#
#   tools/ab-bench.sh OLD_BINARY NEW_BINARY FILE... [-- BENCH_ARGS...]
#
# Per file and round, each binary runs `bench -m FILE BENCH_ARGS` (default
# -p 256 -n 64 -r 2 --no-ttft), the order swapped every round so neither
# always runs first on a host whose speed drifts. Prints a markdown row per
# file: each round's t/s per test, old -> new, and how many rounds new won.
# ROUNDS (default 3) sets the rounds. Run it on every weight type a kernel
# change compiles into, not only the ones it touches: a shared loop's
# register allocation can move another kind's speed (session 53).
set -euo pipefail

usage() {
    echo "usage: $0 OLD_BINARY NEW_BINARY FILE... [-- BENCH_ARGS...]" >&2
    exit 2
}
[ $# -ge 3 ] || usage
old=$1 new=$2
shift 2
files=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    files+=("$1")
    shift
done
[ $# -gt 0 ] && shift
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(-p 256 -n 64 -r 2 --no-ttft)
[ ${#files[@]} -gt 0 ] || usage
for b in "$old" "$new"; do
    [ -x "$b" ] || {
        echo "$0: $b is not an executable" >&2
        exit 2
    }
done
for f in "${files[@]}"; do
    [ -r "$f" ] || {
        echo "$0: cannot read $f" >&2
        exit 2
    }
done
rounds=${ROUNDS:-3}

# "test t/s" per line of one bench run's table; a failed run stops the
# script with what the bench said
run() {
    local out
    if ! out=$("$1" bench -m "$2" "${args[@]}" 2>&1); then
        echo "$0: $1 bench -m $2 failed:" >&2
        grep -v "^|" <<<"$out" | grep -v "^$" | tail -n 3 >&2
        exit 1
    fi
    awk -F'|' '$9 ~ /(pp|tg)[0-9]/ {gsub(/ /, "", $9); split($10, a, " "); print $9, a[1]}' <<<"$out"
}

echo "| file | test | old → new, per round | new won |"
echo "|---|---|---|---:|"
for f in "${files[@]}"; do
    declare -A o=() n=() won=()
    tests=()
    for r in $(seq "$rounds"); do
        if [ $((r % 2)) -eq 1 ]; then
            ro=$(run "$old" "$f")
            rn=$(run "$new" "$f")
        else
            rn=$(run "$new" "$f")
            ro=$(run "$old" "$f")
        fi
        if [ -z "$ro" ] || [ -z "$rn" ]; then
            echo "$0: no bench table from one of the binaries on $f" >&2
            exit 1
        fi
        while read -r t v; do
            [ "$r" -eq 1 ] && tests+=("$t")
            o[$t]="${o[$t]:-} $v"
        done <<<"$ro"
        while read -r t v; do
            n[$t]="${n[$t]:-} $v"
            ov=$(awk -v t="$t" '$1 == t {print $2}' <<<"$ro")
            if awk -v a="$v" -v b="$ov" 'BEGIN {exit !(a > b)}'; then
                won[$t]=$((${won[$t]:-0} + 1))
            fi
        done <<<"$rn"
    done
    for t in "${tests[@]}"; do
        read -ra ov <<<"${o[$t]}"
        read -ra nv <<<"${n[$t]}"
        cells=""
        for i in "${!ov[@]}"; do
            cells="$cells${cells:+, }${ov[$i]} → ${nv[$i]:-?}"
        done
        echo "| $(basename "$f") | $t | $cells | ${won[$t]:-0} of $rounds |"
    done
    unset o n won
done
