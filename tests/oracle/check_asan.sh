#!/usr/bin/env bash
# Every C unit test again, built with AddressSanitizer and UBSan (findings are
# fatal), so the malformed-input suites and the rest run clean under both.
set -uo pipefail
cd "$(dirname "$0")/../.."
if ! make -s -j2 asan >/tmp/inferno-asan-build.log 2>&1; then
    tail -n 30 /tmp/inferno-asan-build.log
    echo "check_asan: make asan failed"
    echo "0 passed, 1 failed"
    exit 1
fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
pass=0 fail=0
for t in build-asan/tests/test_*; do
    [ -x "$t" ] || continue
    if "$t" >/tmp/inferno-asan-test.log 2>&1; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAILED under ASan/UBSan: $t"
        tail -n 30 /tmp/inferno-asan-test.log
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
