#!/usr/bin/env bash
# One process or several? The load test of docs/benchmarks.md.
#
# With no options: starts its own PostgreSQL and, in turn, the server with
# TORNADO_PROCESSES=1 and with one process per CPU (at least 2), each on a
# fresh database and data folder; creates real users with real argon2id
# hashes; checks that one can log in and run a program (stops with the
# reason if not); runs the login, files, run and classroom scenarios at 30,
# 50 and 60 users after an uncounted warm-up; prints a table per scenario
# and load with a verdict, and writes report.txt, results.json, results.csv
# and latency.png into loadtest-<timestamp>/ (in the current folder).
#
#   ./simple_load_test.sh                                   # the defaults (about 10 minutes)
#   ./simple_load_test.sh --processes 1,2,4 --concurrency 30,60 --scenario files
#   ./simple_load_test.sh --rate 40 --scenario files,login  # open loop
#   ./simple_load_test.sh --sweep 10:200:10                 # where the time goes as load grows
#   ./simple_load_test.sh --url https://ide.example.org --users users.csv
#   ./simple_load_test.sh --help
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# What the tools need (installed once); its progress is shown only if it fails.
if ! setup=$(make -s -C "$here" system-deps .venv/.installed-test 2>&1); then
  printf '%s\n' "$setup" >&2
  exit 1
fi
# Run from the caller's folder, so that --out and --users paths mean what they say.
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
export LOADTEST_ARGV0="$0"
exec "$here/.venv/bin/python" -m loadtest.loadtest "$@"
