-- Migration 3: a tick claims only the handler runs it can execute, and records which
-- handlers it had, so that `cronjobs status` can tell a run waiting for a handler no tick
-- has loaded from an ordinary backlog.

ALTER TABLE job_ticks ADD COLUMN handlers text[];
