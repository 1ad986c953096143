#!/usr/bin/env bash
# Fuzzing the parsers (libFuzzer + ASan/UBSan, built by `make fuzz`): each
# target first replays its seed corpus fuzz/corpus/NAME/, then fuzzes for
# FUZZ_SECONDS starting from it (default: FUZZ_TOTAL_SECONDS, 100, shared
# evenly by the targets, so a new target does not lengthen CI). A target passes
# when neither step finds a crash, leak or sanitizer report. New inputs go to
# fuzz/corpus-NAME/ (ignored by git); crashes to build-fuzz/crash-*.
set -uo pipefail
cd "$(dirname "$0")/../.."
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
if ! command -v clang >/dev/null; then
    echo "check_fuzz: clang is not installed (make deps)"; echo "0 passed, 1 failed"; exit 1
fi
mkdir -p build
# (scripts/run-tests.sh may have started this build already: the lock waits for it)
if ! flock build/.fuzz.lock make -s -j"$(nproc 2>/dev/null || echo 2)" fuzz >/tmp/inferno-fuzz-build.$$ 2>&1; then
    tail -n 20 /tmp/inferno-fuzz-build.$$; rm -f /tmp/inferno-fuzz-build.$$
    echo "check_fuzz: make fuzz failed"; echo "0 passed, 1 failed"; exit 1
fi
rm -f /tmp/inferno-fuzz-build.$$
# one target per fuzz/fuzz_NAME.c (build-fuzz/fuzz/ holds nothing else, but
# only these count)
targets=()
for src in fuzz/fuzz_*.c; do targets+=("build-fuzz/fuzz/$(basename "$src" .c)"); done
secs=${FUZZ_SECONDS:-$(( ${FUZZ_TOTAL_SECONDS:-100} / ${#targets[@]} ))}

pass=0 fail=0
for bin in "${targets[@]}"; do
    name=${bin##*/fuzz_}
    seeds=fuzz/corpus/$name
    work=fuzz/corpus-$name
    dict=fuzz/$name.dict
    mkdir -p "$work"
    if [ ! -d "$seeds" ] || [ -z "$(ls -A "$seeds")" ]; then
        echo "fuzz_$name: no seed corpus in $seeds"; fail=$((fail + 1)); continue
    fi
    if "$bin" -runs=0 "$seeds"/* >"build-fuzz/replay-$name.log" 2>&1; then
        echo "fuzz_$name: replayed $(ls "$seeds" | wc -l) seeds"; pass=$((pass + 1))
    else
        echo "fuzz_$name: replaying the seeds failed:"; tail -n 30 "build-fuzz/replay-$name.log"
        fail=$((fail + 1)); continue
    fi
    # A fixed seed: CI explores the same inputs each run (FUZZ_SEED=0 for a random one).
    opts=(-seed="${FUZZ_SEED:-1}" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=1024 -timeout=10
          -artifact_prefix=build-fuzz/ -print_final_stats=1)
    [ -f "$dict" ] && opts+=(-dict="$dict")
    if "$bin" "${opts[@]}" "$work" "$seeds" >"build-fuzz/fuzz-$name.log" 2>&1; then
        echo "fuzz_$name: $secs s clean ($(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' \
            "build-fuzz/fuzz-$name.log" | grep -o '[0-9]*$') runs)"
        pass=$((pass + 1))
    else
        echo "fuzz_$name: found a problem:"; grep -A 30 -m1 'ERROR\|runtime error' "build-fuzz/fuzz-$name.log" | head -40
        fail=$((fail + 1))
    fi
done
echo "${pass} passed, ${fail} failed"
[ "$fail" -eq 0 ]
