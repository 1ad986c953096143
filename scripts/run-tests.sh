#!/usr/bin/env bash
# Runs every test: the C unit tests (build/tests/test_*) and the oracle checks
# (tests/oracle/check_*.sh, each comparing inferno with an independent
# implementation). Each prints a closing "N passed, N failed" line; a program
# that dies without one counts as one failure. Ends with the totals.
set -uo pipefail
cd "$(dirname "$0")/.."

scripts/make-models.sh || { echo "0 passed, 1 failed"; exit 1; }

total_pass=0 total_fail=0
declare -a failed_names=()
run_one() { # name, command...
    local name=$1; shift
    local log; log=$(mktemp)
    local t0=$SECONDS
    "$@" >"$log" 2>&1
    local rc=$?
    # the last "N passed, N failed" line, bare or after a label ("name: ")
    local line; line=$(grep -E '(^|: )[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    local p=0 f=0
    if [ -n "$line" ]; then
        p=$(sed -E 's/^(.*: )?([0-9]+) passed, ([0-9]+) failed.*/\2/' <<<"$line")
        f=$(sed -E 's/^(.*: )?([0-9]+) passed, ([0-9]+) failed.*/\3/' <<<"$line")
    fi
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
    printf '%-40s %5d passed %3d failed  (%ds)\n' "$name" "$p" "$f" $((SECONDS - t0))
    if [ "$f" -ne 0 ]; then
        failed_names+=("$name")
        sed 's/^/    | /' "$log" | tail -n 40
    fi
    rm -f "$log"
}

for t in build/tests/test_*; do
    [ -x "$t" ] && run_one "$(basename "$t")" "$t"
done
for t in tests/oracle/check_*.sh; do
    [ -x "$t" ] && run_one "$(basename "$t" .sh)" "$t"
done

echo
if ((${#failed_names[@]})); then echo "failing: ${failed_names[*]}"; fi
echo "${total_pass} passed, ${total_fail} failed"
[ "$total_fail" -eq 0 ]
