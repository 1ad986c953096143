#!/usr/bin/env bash
# Runs every test: the C unit tests (build/tests/test_*) and the oracle checks
# (tests/oracle/check_*.sh, each comparing inferno with an independent
# implementation). Each prints a closing "N passed, N failed" line; a program
# that dies without one counts as one failure. Ends with the totals.
#
# They run TEST_JOBS at a time (default: the number of cores), longest first;
# each one's output is kept and its result line printed when it ends (with the
# tail of its log when it failed), so the lines come in the order they finish.
# The sanitizer builds (make asan, make fuzz) need no models: they start at
# once, beside the model generation; check_asan and check_fuzz take the same
# locks (flock build/.asan.lock, build/.fuzz.lock), so they wait for them and
# then find them done (whichever starts first builds). TEST_JOBS=1 runs one at
# a time.
# Optional arguments: the names to run (e.g. check_server test_engine).
set -uo pipefail
cd "$(dirname "$0")/.."

jobs_max=${TEST_JOBS:-$(nproc 2>/dev/null || echo 2)}
((jobs_max >= 1)) || jobs_max=1
logdir=$(mktemp -d /tmp/inferno-tests.XXXXXX)
# the pack caches the programs write by default (runtime/engine_pack.h): in a
# directory of this run's, not the user's ~/.cache
export INFERNO_CACHE_DIR="$logdir/pack-cache"
declare -A job_pid=() job_t0=()
cleanup() {
    local p
    for p in "${job_pid[@]}"; do kill -TERM "$p" 2>/dev/null; done
    [ -n "${san_pid:-}" ] && kill -TERM "$san_pid" 2>/dev/null
    rm -rf "$logdir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# the job list: first the sanitizer checks (their builds start first) and the
# other CPU-bound ones, longest first (the times of a run one at a time); then
# the ones that serve requests under deadlines (a client's timeout, a drain,
# a fixed-length load test), so that they run after check_asan's heaviest
# part rather than beside it; then every other, in name order
order=(check_asan check_logits check_qwen35 check_fuzz check_neon check_quantize test_backend_model check_inspect
       check_template test_forward_model test_roundtrip test_engine test_model_formats check_tokenizer
       check_deploy check_server check_kv_paged check_webui check_lifecycle check_ollama
       check_programs check_run test_server_http)
declare -A cmd=()
names=()
for t in build/tests/test_*; do [ -x "$t" ] && cmd[$(basename "$t")]=$t; done
for t in tests/oracle/check_*.sh; do [ -x "$t" ] && cmd[$(basename "$t" .sh)]=$t; done
if (($#)); then
    for n in "$@"; do
        [ -n "${cmd[$n]:-}" ] || { echo "run-tests: no test named $n"; exit 2; }
        names+=("$n")
    done
else
    declare -A seen=()
    for n in "${order[@]}"; do [ -n "${cmd[$n]:-}" ] && names+=("$n") && seen[$n]=1; done
    for n in $(printf '%s\n' "${!cmd[@]}" | sort); do [ -n "${seen[$n]:-}" ] || names+=("$n"); done
    # the ones that run alone (below) last
    for n in ${TEST_ALONE-check_grammar}; do
        [ -n "${cmd[$n]:-}" ] || continue
        rest=(); for m in "${names[@]}"; do [ "$m" = "$n" ] || rest+=("$m"); done
        names=("${rest[@]}" "$n")
    done
fi

# the sanitizer builds, while the models are made
want() { local n; for n in "${names[@]}"; do [ "$n" = "$1" ] && return 0; done; return 1; }
mkdir -p build
san_pid=
if want check_asan || want check_fuzz; then
    (
        t=(); [ -n "${TEST_CPU_TIMES:-}" ] && t=(/usr/bin/time -a -o "$TEST_CPU_TIMES" -f "%C %e s wall %U user %S sys")
        want check_asan && "${t[@]}" flock build/.asan.lock make -s -j"$jobs_max" asan >/dev/null 2>&1
        want check_fuzz && "${t[@]}" flock build/.fuzz.lock make -s -j"$jobs_max" fuzz >/dev/null 2>&1
    ) &
    san_pid=$!
fi

t_start=$SECONDS
scripts/make-models.sh || { echo "0 passed, 1 failed"; exit 1; }
echo "make-models: $((SECONDS - t_start)) s"

total_pass=0 total_fail=0
declare -a failed_names=()
finish_one() { # name, exit status
    local name=$1 rc=$2 log=$logdir/$1.log
    # the last "N passed, N failed" line, bare or after a label ("name: ")
    local line; line=$(grep -E '(^|: )[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    local p=0 f=0
    if [ -n "$line" ]; then
        p=$(sed -E 's/^(.*: )?([0-9]+) passed, ([0-9]+) failed.*/\2/' <<<"$line")
        f=$(sed -E 's/^(.*: )?([0-9]+) passed, ([0-9]+) failed.*/\3/' <<<"$line")
    fi
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
    printf '%-40s %5d passed %3d failed  (%ds)\n' "$name" "$p" "$f" $((SECONDS - job_t0[$name]))
    if [ "$f" -ne 0 ]; then
        failed_names+=("$name")
        sed 's/^/    | /' "$log" | tail -n 40
    fi
    rm -f "$log"
}

# Run alone, with nothing beside them: check_grammar's requests have a client
# timeout (120 s) that a shared core can exceed.
declare -A alone=()
for n in ${TEST_ALONE-check_grammar}; do alone[$n]=1; done
alone_running=
next=0
while ((next < ${#names[@]} || ${#job_pid[@]})); do
    while ((next < ${#names[@]} && ${#job_pid[@]} < jobs_max)) && [ -z "$alone_running" ]; do
        n=${names[next]}
        if [ -n "${alone[$n]:-}" ]; then
            ((${#job_pid[@]} == 0)) || break
            alone_running=$n
        fi
        next=$((next + 1))
        job_t0[$n]=$SECONDS
        if [ -n "${TEST_CPU_TIMES:-}" ]; then # for measuring: the job's CPU seconds, appended to that file
            /usr/bin/time -a -o "$TEST_CPU_TIMES" -f "$n %e s wall %U user %S sys" "${cmd[$n]}" \
                >"$logdir/$n.log" 2>&1 </dev/null &
        else
            "${cmd[$n]}" >"$logdir/$n.log" 2>&1 </dev/null &
        fi
        job_pid[$n]=$!
    done
    wait -n -p done_pid "${job_pid[@]}"
    rc=$?
    for n in "${!job_pid[@]}"; do
        if [ "${job_pid[$n]}" = "$done_pid" ]; then
            unset "job_pid[$n]"
            [ "$alone_running" = "$n" ] && alone_running=
            finish_one "$n" "$rc"
            break
        fi
    done
done
[ -n "$san_pid" ] && wait "$san_pid" 2>/dev/null
san_pid=

echo
echo "all tests: $((SECONDS - t_start)) s, $jobs_max at a time"
if ((${#failed_names[@]})); then echo "failing: ${failed_names[*]}"; fi
echo "${total_pass} passed, ${total_fail} failed"
[ "$total_fail" -eq 0 ]
