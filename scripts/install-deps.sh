#!/usr/bin/env bash
# Installs what inferno needs to build and test on Debian 12: the -dev
# libraries, Debian's NumPy (for the reference model) and the npm oracles.
# Idempotent: installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(build-essential pkg-config clang libclang-rt-14-dev libjansson-dev libpcre2-dev
      libutf8proc-dev libmicrohttpd-dev libxxhash-dev python3-numpy python3-regex nodejs npm
      gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user  # these three: the NEON check
      chromium haproxy)  # the web page's browser test; replicas behind a load balancer
missing=()
for p in "${pkgs[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# nodejs/npm may come from outside Debian's packages; accept any working node >= 20.
if command -v node >/dev/null && command -v npm >/dev/null; then
    missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
fi
missing=($(printf '%s\n' "${missing[@]}" | grep -v '^$' || true))
npm_needed() { [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; }
# With node already there, npm ci runs beside apt-get (both mostly wait on downloads).
npm_pid=
if npm_needed && command -v node >/dev/null && command -v npm >/dev/null; then
    echo "install-deps: npm ci"
    npm ci --no-audit --no-fund --loglevel=error &
    npm_pid=$!
fi
if ((${#missing[@]})); then
    echo "install-deps: installing ${missing[*]}"
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ -n "$npm_pid" ]; then
    wait "$npm_pid" || { echo "install-deps: npm ci failed"; exit 1; }
elif npm_needed; then
    echo "install-deps: npm ci"
    npm ci --no-audit --no-fund --loglevel=error
fi
scripts/tokenizer-files.sh check
