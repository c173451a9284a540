-- Runners that registered with the web tier (issue 32): each runner's
-- latest heartbeat, which says where it listens and how many sandboxes it
-- runs of how many it may. A runner whose heartbeat is older than a few
-- seconds is not asked for sandboxes. `sent` is the runner's own clock in
-- nanoseconds: only a later heartbeat replaces one, so none can be replayed.
CREATE TABLE runners (
    id text PRIMARY KEY,
    address text NOT NULL,
    capacity integer NOT NULL,
    busy integer NOT NULL,
    sent bigint NOT NULL,
    seen timestamptz NOT NULL DEFAULT now()
);
