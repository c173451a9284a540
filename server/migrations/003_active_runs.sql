-- One running program per student across every worker and instance. The
-- worker running it refreshes heartbeat_at; a row left by a worker that
-- died goes stale and may be taken over.
CREATE TABLE active_runs (
    username text PRIMARY KEY,
    run_id text NOT NULL,
    owner text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);
