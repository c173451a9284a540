#!/usr/bin/env bash
# Single- versus multi-process latency, measured with real users.
#
# Starts its own PostgreSQL and server (TORNADO_PROCESSES=1, then 2), creates
# real accounts with real argon2id hashes, checks one can log in, then has
# 30 and 60 students log in at once and prints p50/p95/p99, logins/s and
# errors per mode, with the ratio measured in the same run. Every answer is
# checked: a 401 or a 5xx is an error, never a success.
#
#   ./simple_load_test.sh                      # defaults
#   ./simple_load_test.sh --processes 1,2,4 --concurrency 30,60 --json out.json
#   ./simple_load_test.sh --help
set -euo pipefail
cd "$(dirname "$0")"
make -s system-deps .venv/.installed
exec .venv/bin/python -m server.ops.bench_login "$@"
