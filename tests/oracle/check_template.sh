#!/usr/bin/env bash
# Chat templates byte for byte against Jinja2 in Hugging Face's environment
# (see tests/oracle/templates/oracle.py). Optional argument: a case-name filter.
set -uo pipefail
cd "$(dirname "$0")/../.."
exec python3 tests/oracle/templates/oracle.py "$@"
