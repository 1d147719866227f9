-- The session's own statements (cronjobs/db/session.py): the database clock and the
-- transaction a pipeline sends at once.
--
-- The clock is a parameter. Every instant a statement compares (lease expiry, due times,
-- backoff, ages, cutoffs) or writes (which later statements compare: eligible_at,
-- lease_expires_at, finished_at, started_at...) is `%(now)s`: the operation's one instant
-- (cronjobs.clock). The database's clock is read in two places only, at the start of an
-- operation: `now` below, and insert_tick (ticks.sql) when no instant is given. Columns'
-- defaults stay: they record when a row was really written (created_at;
-- job_ticks.started_at, which `status` reads as its dead-man's switch: whether ticks
-- really run, whatever instant they were given).

-- name: now
-- The instant of this transaction, from the database clock (the truth in production).
SELECT now() AS now;

-- name: lock_timeout
-- How long the statements of this transaction wait for a lock at most (SET LOCAL: until it
-- ends): the storage's DDL, which gives up and leaves its work to later rather than make
-- claims queue behind it.
SELECT set_config('lock_timeout', %(timeout)s, true);

-- name: generic_plans
-- The prepared statements of this transaction run their generic plan (SET LOCAL: until it
-- ends), the one PostgreSQL makes once per connection, never one planned for the values
-- at each execution. Left to choose, PostgreSQL keeps planning a statement whose generic
-- plan it prices higher, as it does one that counts the rows of the last day in a history
-- partitioned by another column: the same plan, made again over every partition at every
-- execution (the server's verdict, see web/site.py: about 8 ms of health's 12).
SELECT set_config('plan_cache_mode', 'force_generic_plan', true);

-- name: begin
-- (Session.transaction_at_once: a transaction sent in one pipeline with its statements)
BEGIN;

-- name: commit
COMMIT;
