"""PyClassroom's load test and benchmarks, measured against the real server
from outside it (none of this ships in the server image).

One harness, one client library, thin scripts on top:

- `harness`: the server under test as a subprocess (also the tests'),
  a scratch PostgreSQL, users with real argon2id hashes.
- `client` (HTTP, the browser's way) and `run_client` (/ws/run): the
  simulated students, also used by the tests.
- `loadgen` (closed and open loop), `recording` (HDR histograms, figures),
  `machine` (this machine and its CPU), `server_metrics` (/metrics).
- Scripts: `loadtest` (./simple_load_test.sh: options, modes, cell,
  scenarios, classroom, report, charts), `bench_login`, `bench_files`,
  `bench_runs` (run_phases, runs_report) and `efs_bench` (a file system,
  through the server's own Store).

Dependencies: loadtest/requirements.txt, beside the server's.
"""
