#!/usr/bin/env bash
# Every C unit test again, built with AddressSanitizer and UBSan (findings are
# fatal), so the malformed-input suites and the rest run clean under both.
# The tests run ASAN_JOBS at a time (default: the number of cores), the
# slowest first; the results are reported in name order.
set -uo pipefail
cd "$(dirname "$0")/../.."
jobs=${ASAN_JOBS:-$(nproc 2>/dev/null || echo 2)}
mkdir -p build
# (scripts/run-tests.sh may have started this build already: the lock waits for it)
if ! flock build/.asan.lock make -s -j"$jobs" asan >build/asan-build.log 2>&1; then
    tail -n 30 build/asan-build.log
    echo "check_asan: make asan failed"
    echo "0 passed, 1 failed"
    exit 1
fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
logs=build-asan/logs
rm -rf "$logs"; mkdir -p "$logs"
tests=()
for t in build-asan/tests/test_*; do [ -x "$t" ] && tests+=("$t"); done
# the slowest first (measured under ASan), then the rest
slow=(test_backend_model test_forward_model test_roundtrip test_engine test_model_formats test_backend_ops
      test_server_http test_template test_forward_moe test_forward_types test_attention)
queue=()
for s in "${slow[@]}"; do [ -x "build-asan/tests/$s" ] && queue+=("build-asan/tests/$s"); done
for t in "${tests[@]}"; do [[ " ${queue[*]} " == *" $t "* ]] || queue+=("$t"); done
running=0
for t in "${queue[@]}"; do
    if ((running >= jobs)); then wait -n; running=$((running - 1)); fi
    n=${t##*/}
    ( "$t" >"$logs/$n.log" 2>&1; echo $? >"$logs/$n.rc" ) &
    running=$((running + 1))
done
wait
pass=0 fail=0
for t in "${tests[@]}"; do
    n=${t##*/}
    if [ "$(cat "$logs/$n.rc" 2>/dev/null)" = 0 ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAILED under ASan/UBSan: $t"
        tail -n 30 "$logs/$n.log"
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
