-- The run lock is held for seconds and written twice per run: with no WAL,
-- a claim or release commits without waiting for a WAL flush. A crash of
-- PostgreSQL empties the table (as does a failover to a replica): the
-- programs running then lose their locks, so a student's other tab could
-- start a second program while the first runs on; that lasts until their
-- runs end, bounded by the run limits.
ALTER TABLE active_runs SET UNLOGGED;
