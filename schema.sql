-- cronjobs: the canonical current schema.
--
-- Apply by hand with `psql -1 -v ON_ERROR_STOP=1 -f schema.sql` on an empty database, or let
-- `cronjobs migrate` do it (it applies this file to an empty database and the numbered
-- migrations to an older one; a test checks that both give the same catalog).
-- Every status and policy column is CHECK-constrained; the Python enums mirror them.


CREATE TABLE cronjobs_migrations (
    version     integer PRIMARY KEY,
    name        text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);

-- One row per job. A removed job keeps its row (removed_at set) so its history stays readable;
-- its name can then be defined again as a new job.
CREATE TABLE job_definitions (
    id                    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name                  text NOT NULL
        CONSTRAINT job_definitions_name_check
        CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$'),
    schedule              text NOT NULL
        CONSTRAINT job_definitions_schedule_check
        CHECK (length(schedule) BETWEEN 1 AND 200),
    timezone              text NOT NULL DEFAULT 'UTC'
        CONSTRAINT job_definitions_timezone_check
        CHECK (length(timezone) BETWEEN 1 AND 64),
    -- what to run: a registered Python handler, or a shell command run with /bin/sh -c
    kind                  text NOT NULL
        CONSTRAINT job_definitions_kind_check CHECK (kind IN ('handler', 'command')),
    handler               text,
    command               text,
    payload               jsonb NOT NULL DEFAULT '{}'::jsonb
        CONSTRAINT job_definitions_payload_check CHECK (jsonb_typeof(payload) = 'object'),
    -- policies
    catchup               text NOT NULL DEFAULT 'latest'
        CONSTRAINT job_definitions_catchup_check CHECK (catchup IN ('latest', 'all', 'none')),
    catchup_limit         integer NOT NULL DEFAULT 100
        CONSTRAINT job_definitions_catchup_limit_check CHECK (catchup_limit BETWEEN 1 AND 10000),
    starting_deadline     interval
        CONSTRAINT job_definitions_starting_deadline_check
        CHECK (starting_deadline > interval '0'),
    overlap               text NOT NULL DEFAULT 'skip'
        CONSTRAINT job_definitions_overlap_check
        CHECK (overlap IN ('skip', 'queue', 'allow', 'replace')),
    max_attempts          integer NOT NULL DEFAULT 3
        CONSTRAINT job_definitions_max_attempts_check CHECK (max_attempts BETWEEN 1 AND 100),
    backoff               interval NOT NULL DEFAULT interval '30 seconds'
        CONSTRAINT job_definitions_backoff_check CHECK (backoff >= interval '0'),
    backoff_max           interval NOT NULL DEFAULT interval '1 hour'
        CONSTRAINT job_definitions_backoff_max_check CHECK (backoff_max >= backoff),
    timeout               interval DEFAULT interval '1 hour'
        CONSTRAINT job_definitions_timeout_check CHECK (timeout > interval '0'),
    lease                 interval NOT NULL DEFAULT interval '60 seconds'
        CONSTRAINT job_definitions_lease_check
        CHECK (lease BETWEEN interval '10 seconds' AND interval '1 hour'),
    -- alerts (run on failure / when a run becomes dead) and automatic pausing
    alert_command         text,
    alert_on_failure      boolean NOT NULL DEFAULT false,
    pause_after_failures  integer
        CONSTRAINT job_definitions_pause_after_failures_check CHECK (pause_after_failures >= 1),
    consecutive_failures  integer NOT NULL DEFAULT 0,
    -- webhook notifications: where to POST (secrets: never printed unmasked), on what
    notify_urls           text[] NOT NULL DEFAULT '{}'
        CONSTRAINT job_definitions_notify_urls_check
        CHECK (cardinality(notify_urls) <= 10),
    notify_on             text[] NOT NULL DEFAULT '{dead,recovery}'
        CONSTRAINT job_definitions_notify_on_check
        CHECK (notify_on <@ ARRAY['dead', 'failure', 'recovery']::text[]),
    -- state
    paused_at             timestamptz,
    paused_until          timestamptz,
    pause_note            text,
    invalid_reason        text,
    removed_at            timestamptz,
    -- where it came from: NULL when made by hand (`define`), else the source `apply`
    -- created it for; `apply --prune` removes only its own source's definitions
    source                text
        CONSTRAINT job_definitions_source_check CHECK (length(source) BETWEEN 1 AND 200),
    -- the group whose limit (job_groups.max_running) applies to its runs, if any
    group_name            text
        CONSTRAINT job_definitions_group_name_check
        CHECK (group_name ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$'),
    -- materialisation: every slot <= cursor_at has been decided (run or recorded skip);
    -- next_due_at is the first slot after the cursor (NULL when the definition cannot be
    -- evaluated), so a tick finds due definitions through an index, whatever the total.
    cursor_at             timestamptz NOT NULL,
    next_due_at           timestamptz,
    schedule_since        timestamptz NOT NULL DEFAULT now(),
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    -- how long this job's finished runs are kept, by outcome: succeeded or cancelled, and
    -- dead (NULL: the global cronjobs_retention's)
    keep_succeeded        interval
        CONSTRAINT job_definitions_keep_succeeded_check
        CHECK (keep_succeeded BETWEEN interval '1 day' AND interval '3650 days'),
    keep_failed           interval
        CONSTRAINT job_definitions_keep_failed_check
        CHECK (keep_failed BETWEEN interval '1 day' AND interval '3650 days'),
    -- when a run of the job last succeeded, and last died (to within a minute: a finish
    -- writes it at most once a minute). Retention keeps the runs they point at.
    last_succeeded_at     timestamptz,
    last_failed_at        timestamptz,
    CONSTRAINT job_definitions_target_check CHECK (
        (kind = 'handler' AND handler IS NOT NULL AND command IS NULL)
        OR (kind = 'command' AND command IS NOT NULL AND handler IS NULL)
    ),
    CONSTRAINT job_definitions_paused_until_check
        CHECK (paused_until IS NULL OR paused_at IS NOT NULL)
);

CREATE UNIQUE INDEX job_definitions_name_key
    ON job_definitions (name) WHERE removed_at IS NULL;
-- every definition that has carried a name, removed ones too (definition_history)
CREATE INDEX job_definitions_name_idx ON job_definitions (name, id);
CREATE INDEX job_definitions_due_idx
    ON job_definitions (next_due_at) WHERE removed_at IS NULL;
CREATE INDEX job_definitions_group_idx
    ON job_definitions (group_name) WHERE group_name IS NOT NULL;
-- the jobs in a run of failures, which a success resets (finish_runs): usually none
CREATE INDEX job_definitions_failing_idx
    ON job_definitions (id) WHERE consecutive_failures <> 0;
-- the jobs with a retention of their own (the tick makes the days their runs retire on)
CREATE INDEX job_definitions_keep_succeeded_idx
    ON job_definitions (keep_succeeded) WHERE keep_succeeded IS NOT NULL;
CREATE INDEX job_definitions_keep_failed_idx
    ON job_definitions (keep_failed) WHERE keep_failed IS NOT NULL;
-- the jobs the verdict must look at (job_problems, health_schedules): invalid ones; the
-- schedules of those with a slot come since their last success (as the definition knows
-- it), not paused, read one schedule at a time; and a job by schedule and by the later of
-- when it was defined (or its schedule changed) and its last success, so that the jobs of
-- a schedule overdue at an instant are a range (those before the slot before the latest)
CREATE INDEX job_definitions_invalid_idx
    ON job_definitions (id) WHERE invalid_reason IS NOT NULL AND removed_at IS NULL;
CREATE INDEX job_definitions_unsucceeded_idx
    ON job_definitions (schedule, timezone)
    WHERE removed_at IS NULL AND paused_at IS NULL AND invalid_reason IS NULL
      AND (last_succeeded_at IS NULL OR last_succeeded_at < cursor_at)
      AND cursor_at > greatest(created_at, schedule_since);
CREATE INDEX job_definitions_verdict_idx
    ON job_definitions (schedule, timezone,
                        (greatest(created_at, schedule_since, last_succeeded_at)))
    WHERE removed_at IS NULL AND paused_at IS NULL AND invalid_reason IS NULL;
-- the handler jobs, by handler (waiting_for_handlers: the handler jobs nobody loaded)
CREATE INDEX job_definitions_handler_idx
    ON job_definitions (handler) WHERE kind = 'handler';

-- The cursor never moves back: every slot up to it is decided, and a slot decided is never
-- decided again, whoever writes the row (a schedule edit, a tick whose instant is behind the
-- cursor, a statement typed by hand), nor by a definition that takes over a removed one's
-- name (it starts where the latest of them left off). Seeding history on purpose (tests,
-- benchmarks) sets cronjobs.rewind_cursor to 'on' in its session: the slots in between are
-- then decided again.
CREATE FUNCTION cronjobs_cursor_never_back() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    left_off timestamptz;
BEGIN
    IF current_setting('cronjobs.rewind_cursor', true) = 'on' THEN
        RETURN NEW;
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.cursor_at < OLD.cursor_at THEN
        RAISE EXCEPTION 'the cursor of job % would move back from % to %: the slots in '
                        'between were decided, and a slot is never decided twice',
                        NEW.name, OLD.cursor_at, NEW.cursor_at
            USING ERRCODE = 'CJ001';
    END IF;
    IF TG_OP = 'INSERT' OR NEW.name <> OLD.name THEN
        SELECT max(cursor_at) INTO left_off FROM job_definitions
        WHERE name = NEW.name AND id <> NEW.id;
        IF NEW.cursor_at < left_off THEN
            RAISE EXCEPTION 'job % would start at %, before %, where a job of that name left '
                            'off: a slot is never decided twice',
                            NEW.name, NEW.cursor_at, left_off
                USING ERRCODE = 'CJ001';
        END IF;
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER job_definitions_cursor_insert_check
    BEFORE INSERT ON job_definitions
    FOR EACH ROW EXECUTE FUNCTION cronjobs_cursor_never_back();
-- (the condition spares the tick's updates, which move cursors forward, a call per row)
CREATE TRIGGER job_definitions_cursor_update_check
    BEFORE UPDATE OF cursor_at, name ON job_definitions
    FOR EACH ROW WHEN (NEW.cursor_at < OLD.cursor_at OR NEW.name <> OLD.name)
    EXECUTE FUNCTION cronjobs_cursor_never_back();

-- Fleet-wide limits: at most max_running runs of a group's jobs hold a lease at once,
-- across every tick (the claim locks the group's row: claims of one group take turns). A
-- group named by jobs but without a row here has no limit.
CREATE TABLE job_groups (
    name         text PRIMARY KEY
        CONSTRAINT job_groups_name_check CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$'),
    max_running  integer NOT NULL
        CONSTRAINT job_groups_max_running_check CHECK (max_running BETWEEN 1 AND 10000),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- How long history is kept, for every job (a job's keep_succeeded and keep_failed win):
-- one row. Runs retire by whole days (their partition is dropped); skipped slots, tick
-- records and notification records are deleted in small batches.
CREATE TABLE cronjobs_retention (
    singleton      boolean PRIMARY KEY DEFAULT true
        CONSTRAINT cronjobs_retention_singleton_check CHECK (singleton),
    succeeded      interval NOT NULL DEFAULT interval '14 days'
        CONSTRAINT cronjobs_retention_succeeded_check
        CHECK (succeeded BETWEEN interval '1 day' AND interval '3650 days'),
    failed         interval NOT NULL DEFAULT interval '90 days'
        CONSTRAINT cronjobs_retention_failed_check
        CHECK (failed BETWEEN interval '1 day' AND interval '3650 days'),
    skips          interval NOT NULL DEFAULT interval '14 days'
        CONSTRAINT cronjobs_retention_skips_check
        CHECK (skips BETWEEN interval '1 day' AND interval '3650 days'),
    ticks          interval NOT NULL DEFAULT interval '14 days'
        CONSTRAINT cronjobs_retention_ticks_check
        CHECK (ticks BETWEEN interval '1 day' AND interval '3650 days'),
    -- runs whose retention ended before this instant may have been dropped: `backfill`
    -- refuses the slots they may have run (NULL: nothing retired yet)
    retired_before timestamptz,
    -- when a tick last looked after the storage (one a minute does: claim_upkeep)
    upkept_at      timestamptz,
    updated_at     timestamptz NOT NULL DEFAULT now()
);
INSERT INTO cronjobs_retention DEFAULT VALUES;

-- Each tick leaves a record: who, when, and what it did. A tick that went away before
-- recording its end (killed, or its database unreachable) is closed as 'lost' by a later one.
CREATE TABLE job_ticks (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    worker        text NOT NULL,
    tick_at       timestamptz NOT NULL,
    started_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at   timestamptz,
    status        text NOT NULL DEFAULT 'running'
        CONSTRAINT job_ticks_status_check
        CHECK (status IN ('running', 'finished', 'failed', 'interrupted', 'lost')),
    materialised  integer NOT NULL DEFAULT 0,
    skipped       integer NOT NULL DEFAULT 0,
    reclaimed     integer NOT NULL DEFAULT 0,
    claimed       integer NOT NULL DEFAULT 0,
    succeeded     integer NOT NULL DEFAULT 0,
    failed        integer NOT NULL DEFAULT 0,
    error         text,
    -- the handlers this tick could run (its --app modules'): runs of other handlers wait
    handlers      text[]
);

CREATE INDEX job_ticks_started_idx ON job_ticks (started_at);
-- the ticks still running (or lost without recording their end: the next tick closes them)
CREATE INDEX job_ticks_running_idx ON job_ticks (tick_at) WHERE status = 'running';
-- the lost ones, newest first (cronjobs status shows them)
CREATE INDEX job_ticks_lost_idx ON job_ticks (finished_at) WHERE status = 'lost';

-- One row per run of a job, in one of three places (the partitions of job_runs, by stage):
-- - job_runs_queue: the runs not finished yet (scheduled, queued, running, waiting to
--   retry). Small whatever the history: claims, heartbeats and finishes touch only it and
--   its few indexes. A scheduled slot becomes a run here through one INSERT ... ON CONFLICT
--   DO NOTHING on job_runs_queue_slot_key.
-- - job_runs_history: finished runs, partitioned by the day they retire (retire_at: when
--   they finished plus their job's retention for their outcome). A run moves here in the
--   statement that finishes it; retention drops whole days (cronjobs/core/retention.py).
-- - job_runs_kept: finished runs that outlive their retention: a job's latest success and
--   latest failure, and dead runs nobody acknowledged.
-- Exactly-once never depends on a row that moves: a slot is decided once, by the tick that
-- holds its job's row and advances job_definitions.cursor_at past it (materialise.sql);
-- the slot key backs that up while the run waits or runs. Readers read job_runs, the
-- parent: every stage at once.
CREATE SEQUENCE job_runs_id_seq AS bigint;

CREATE TABLE job_runs (
    id                   bigint NOT NULL DEFAULT nextval('job_runs_id_seq'),
    definition_id        bigint NOT NULL,
    scheduled_for        timestamptz NOT NULL,
    trigger              text NOT NULL
        CONSTRAINT job_runs_trigger_check
        CHECK (trigger IN ('schedule', 'manual', 'retry', 'backfill')),
    -- scheduled: a one-off run (trigger --at) waiting for its time (eligible_at), when the
    -- tick applies the overlap policy and queues it (or cancels it, saying why);
    -- queued: waits for eligible_at; running: a worker holds its lease;
    -- failed: the last attempt failed and a retry waits for eligible_at;
    -- succeeded, dead (attempts exhausted), cancelled: final.
    status               text NOT NULL DEFAULT 'queued'
        CONSTRAINT job_runs_status_check
        CHECK (status IN ('scheduled', 'queued', 'running', 'failed', 'succeeded', 'dead',
                          'cancelled')),
    payload              jsonb
        CONSTRAINT job_runs_payload_check
        CHECK (payload IS NULL OR jsonb_typeof(payload) = 'object'),
    attempt              integer NOT NULL DEFAULT 0
        CONSTRAINT job_runs_attempt_check CHECK (attempt >= 0),
    max_attempts         integer NOT NULL
        CONSTRAINT job_runs_max_attempts_check CHECK (max_attempts >= 1),
    -- false when the job's overlap policy lets this run run beside another (allow, replace)
    exclusive            boolean NOT NULL DEFAULT true,
    eligible_at          timestamptz NOT NULL,
    lease_owner          text,
    lease_token          uuid,
    lease_expires_at     timestamptz,
    heartbeat_at         timestamptz,
    cancel_requested_at  timestamptz,
    started_at           timestamptz,
    finished_at          timestamptz,
    exit_code            integer,
    error                text,
    output_tail          text,
    -- bytes of output the current attempt has printed so far (flushed with heartbeats)
    output_bytes         bigint,
    result               jsonb,
    -- `cronjobs retry`: how often an operator sent this run back, and when last
    retry_count          integer NOT NULL DEFAULT 0,
    retried_at           timestamptz,
    -- the run this one retries (`retry --force`), and the tick that made or last claimed
    -- it: references for reading, not foreign keys (the rows they name retire on their own)
    retry_of             bigint,
    -- `cronjobs ack` (or `retry`): a person saw this dead run. It is acknowledged while
    -- acknowledged_at is at or after finished_at: dying again needs a new acknowledgement.
    acknowledged_at      timestamptz,
    acknowledged_by      text,
    tick_id              bigint,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    -- which partition holds the run: 'queue', 'history' or 'kept' (above)
    stage                text NOT NULL DEFAULT 'queue',
    -- when its retention ends (history and kept); NULL while it waits or runs
    retire_at            timestamptz,
    CONSTRAINT job_runs_lease_check CHECK (
        (status = 'running') = (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)
    )
) PARTITION BY LIST (stage);

-- The queue. fillfactor: room on every page for the new versions of HOT updates (a
-- heartbeat changes no indexed column). Autovacuum: a small table whose every row is
-- updated and deleted within minutes is vacuumed after a fixed number of dead rows, not a
-- fraction of its size, and without the cost-based pauses (docs/explanation/storage.md explains these).
CREATE TABLE job_runs_queue PARTITION OF job_runs FOR VALUES IN ('queue')
    WITH (fillfactor = 90, autovacuum_vacuum_scale_factor = 0,
          autovacuum_vacuum_threshold = 2000, autovacuum_vacuum_insert_scale_factor = 0,
          autovacuum_vacuum_insert_threshold = 2000, autovacuum_analyze_scale_factor = 0,
          autovacuum_analyze_threshold = 5000, autovacuum_vacuum_cost_delay = 0);
ALTER TABLE job_runs_queue ADD CONSTRAINT job_runs_queue_pkey PRIMARY KEY (id);
CREATE UNIQUE INDEX job_runs_queue_slot_key
    ON job_runs_queue (definition_id, scheduled_for) WHERE trigger IN ('schedule', 'backfill');
-- at most one exclusive run of a job holds a lease at a time, whatever races the claims
CREATE UNIQUE INDEX job_runs_queue_exclusive_running_key
    ON job_runs_queue (definition_id) WHERE status = 'running' AND exclusive;
-- what is due, in the claim's order: only waiting runs are indexed (the WHERE is
-- cronjobs_run_waits(status), below, written out); backfilled runs after all others, so
-- that a backfill never holds up a schedule; then by eligible_at and id, so that a claim
-- of N runs reads its first N entries
CREATE INDEX job_runs_queue_claim_idx
    ON job_runs_queue ((trigger = 'backfill'), eligible_at, id)
    WHERE status IN ('queued', 'failed');
-- one-off runs waiting for their time (trigger --at)
CREATE INDEX job_runs_queue_scheduled_idx
    ON job_runs_queue (eligible_at) WHERE status = 'scheduled';
-- what is running (and so what may have expired): keyed on a column a heartbeat leaves alone
CREATE INDEX job_runs_queue_running_idx
    ON job_runs_queue (started_at) WHERE status = 'running';
-- a job's unfinished runs, newest first (overlap policy, explain, its page)
CREATE INDEX job_runs_queue_definition_idx ON job_runs_queue (definition_id, id);
-- finished runs not moved yet (a run finished by an operator's command or by an older
-- cronjobs): the tick's retention step moves them to the history
CREATE INDEX job_runs_queue_finished_idx
    ON job_runs_queue (id) WHERE status IN ('succeeded', 'dead', 'cancelled');

-- The history, by retirement day: one partition per day (job_runs_history_YYYYMMDD), made
-- ahead of need by the tick; the default partition only catches a run whose day was not
-- made in time (it is retired row by row).
CREATE TABLE job_runs_history PARTITION OF job_runs FOR VALUES IN ('history')
    PARTITION BY RANGE (retire_at);
CREATE TABLE job_runs_history_default PARTITION OF job_runs_history DEFAULT;
-- a run by id; a range of a job's slots (explain, backfill), its runs newest first; the
-- runs finished since an instant (status, metrics). (A BRIN index in
-- place of the one by id or by finish, which a finish would write nothing to, was tried:
-- the planner then read a job's whole index to find a run by id, and prune read the
-- history whole, so these stay B-trees, about 65 bytes of WAL each per run.)
CREATE INDEX job_runs_history_id_idx ON job_runs_history (id);
CREATE INDEX job_runs_history_slot_idx ON job_runs_history (definition_id, scheduled_for);
CREATE INDEX job_runs_history_job_idx ON job_runs_history (definition_id, id);
CREATE INDEX job_runs_history_finished_idx ON job_runs_history (finished_at);

CREATE TABLE job_runs_kept PARTITION OF job_runs FOR VALUES IN ('kept');
CREATE INDEX job_runs_kept_id_idx ON job_runs_kept (id);
CREATE INDEX job_runs_kept_slot_idx ON job_runs_kept (definition_id, scheduled_for);
CREATE INDEX job_runs_kept_job_idx ON job_runs_kept (definition_id, id);
CREATE INDEX job_runs_kept_finished_idx ON job_runs_kept (finished_at);
-- A dead run nobody acknowledged since it died: an acknowledgement applies to the death it
-- acknowledged (acknowledged_at at or after finished_at), so dying again needs another.
-- Such runs keep `cronjobs status --check` red. The one statement of the rule: every query
-- calls it, and so do the indexes below (an SQL function like those of the claim, below:
-- the planner inlines it in a query and in an index's predicate alike, so that a query
-- calling it reads these indexes).
CREATE FUNCTION cronjobs_run_dead_unacknowledged(status text, acknowledged_at timestamptz,
                                                 finished_at timestamptz) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT status = 'dead' AND (acknowledged_at IS NULL OR acknowledged_at < finished_at) $$;
CREATE INDEX job_runs_history_unacknowledged_idx
    ON job_runs_history (definition_id)
    WHERE cronjobs_run_dead_unacknowledged(status, acknowledged_at, finished_at);
CREATE INDEX job_runs_kept_unacknowledged_idx
    ON job_runs_kept (definition_id)
    WHERE cronjobs_run_dead_unacknowledged(status, acknowledged_at, finished_at);
-- the runs that died, by their finish (few: `status` counts those of the last day)
CREATE INDEX job_runs_history_dead_idx ON job_runs_history (finished_at)
    WHERE status = 'dead';
CREATE INDEX job_runs_kept_dead_idx ON job_runs_kept (finished_at) WHERE status = 'dead';

-- What makes a run claimable, written once: SQL functions of a row's columns, each one
-- expression the planner inlines where it is called (LANGUAGE sql, IMMUTABLE, not STRICT),
-- so that a query calling them on job_runs' columns reads the same indexes as one that
-- spelled the expression out. The claim (claim_runs) adds what only it checks: the worker
-- has the handler, the job's group has room, no exclusive run of the job is running.

-- A run that waits in the queue: for its first attempt (queued) or for a retry (failed).
-- (job_runs_queue_claim_idx holds the runs that wait: its WHERE is this body, written out, as an
-- index's predicate must be.)
CREATE FUNCTION cronjobs_run_waits(status text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT status IN ('queued', 'failed') $$;

-- A run that waits and whose time has come at the instant.
CREATE FUNCTION cronjobs_run_is_due(status text, eligible_at timestamptz,
                                    instant timestamptz) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT cronjobs_run_waits(status) AND eligible_at <= instant $$;

-- Whether a job lets a due run of its own start at the instant: a manual run always, any
-- other while the job is not paused or its pause has ended.
CREATE FUNCTION cronjobs_job_lets_run(trigger text, paused_at timestamptz,
                                      paused_until timestamptz, instant timestamptz)
    RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT trigger = 'manual' OR paused_at IS NULL OR paused_until <= instant $$;

-- How long a finished run of a job is kept, by its final status: a dead run for the job's
-- keep_failed, any other for its keep_succeeded, each defaulting to cronjobs_retention's.
CREATE FUNCTION cronjobs_keep(status text, keep_succeeded interval, keep_failed interval)
    RETURNS interval
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT CASE WHEN status = 'dead'
                      THEN coalesce(keep_failed, (SELECT failed FROM cronjobs_retention))
                      ELSE coalesce(keep_succeeded, (SELECT succeeded FROM cronjobs_retention))
                 END $$;

-- Every attempt of a run: worker, times, outcome, output. Partitioned like job_runs, and
-- moved with its run (an attempt's stage and retire_at are its run's).
CREATE SEQUENCE job_attempts_id_seq AS bigint;

CREATE TABLE job_attempts (
    id           bigint NOT NULL DEFAULT nextval('job_attempts_id_seq'),
    run_id       bigint NOT NULL,
    attempt      integer NOT NULL CONSTRAINT job_attempts_attempt_check CHECK (attempt >= 1),
    worker       text NOT NULL,
    lease_token  uuid NOT NULL,
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz,
    outcome      text NOT NULL DEFAULT 'running'
        CONSTRAINT job_attempts_outcome_check
        CHECK (outcome IN ('running', 'succeeded', 'failed', 'timed_out', 'lost',
                           'interrupted', 'cancelled')),
    exit_code    integer,
    error        text,
    output_tail  text,
    stage        text NOT NULL DEFAULT 'queue',
    retire_at    timestamptz
) PARTITION BY LIST (stage);

CREATE TABLE job_attempts_queue PARTITION OF job_attempts FOR VALUES IN ('queue')
    WITH (fillfactor = 90, autovacuum_vacuum_scale_factor = 0,
          autovacuum_vacuum_threshold = 2000, autovacuum_vacuum_insert_scale_factor = 0,
          autovacuum_vacuum_insert_threshold = 2000, autovacuum_analyze_scale_factor = 0,
          autovacuum_analyze_threshold = 5000, autovacuum_vacuum_cost_delay = 0);
ALTER TABLE job_attempts_queue
    ADD CONSTRAINT job_attempts_queue_run_attempt_key UNIQUE (run_id, attempt);

CREATE TABLE job_attempts_history PARTITION OF job_attempts FOR VALUES IN ('history')
    PARTITION BY RANGE (retire_at);
CREATE TABLE job_attempts_history_default PARTITION OF job_attempts_history DEFAULT;
CREATE INDEX job_attempts_history_run_idx ON job_attempts_history (run_id, attempt);

CREATE TABLE job_attempts_kept PARTITION OF job_attempts FOR VALUES IN ('kept');
CREATE INDEX job_attempts_kept_run_idx ON job_attempts_kept (run_id, attempt);

-- The attempts running now, as rows of job_attempts: a claim writes no row for the attempt
-- it opens; while it runs, it is its run's row, and finish_runs or reclaim_expired writes
-- its job_attempts row when it ends. The readers of a run's attempts (db/queries/runs.sql)
-- add these to job_attempts'. (An attempt an older cronjobs opened, which wrote its row at
-- the claim, is read from that row.)
CREATE VIEW job_attempts_running AS
SELECT NULL::bigint AS id, r.id AS run_id, r.attempt, r.lease_owner AS worker, r.lease_token,
       r.started_at, NULL::timestamptz AS finished_at, 'running'::text AS outcome,
       NULL::integer AS exit_code, NULL::text AS error, NULL::text AS output_tail, r.stage,
       NULL::timestamptz AS retire_at
FROM job_runs_queue AS r
WHERE r.status = 'running' AND r.lease_token IS NOT NULL
  -- (a subquery per row, by job_attempts_queue_run_attempt_key: never a join the planner
  -- could make by reading the table whole)
  AND (SELECT a.run_id FROM job_attempts_queue AS a
       WHERE a.run_id = r.id AND a.attempt = r.attempt) IS NULL;

-- The history's day partitions are made and dropped by these two functions, which run as
-- the schema's owner (SECURITY DEFINER): a tick under a least-privilege role
-- (deploy/roles.sql) cannot run DDL itself. Each does the runs' and the attempts' day
-- together. Only a past day can be dropped.
CREATE FUNCTION cronjobs_add_history_day(day date) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp
    AS $$
DECLARE
    parent text;
    part text;
    lower timestamptz := day::timestamp AT TIME ZONE 'UTC';
    upper timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
BEGIN
    -- No run may be on its way to the default partition meanwhile: a row routed there
    -- before the new day is attached would then break the default's new bound. Writers
    -- wait (the caller's lock_timeout bounds it); readers go on.
    LOCK TABLE job_runs_history, job_attempts_history IN SHARE ROW EXCLUSIVE MODE;
    FOREACH parent IN ARRAY ARRAY['job_runs_history', 'job_attempts_history'] LOOP
        part := parent || '_' || to_char(day, 'YYYYMMDD');
        CONTINUE WHEN to_regclass(part) IS NOT NULL;
        -- made empty, filled with the rows the default partition caught for the day (ATTACH
        -- refuses a default partition holding rows of the new range), then attached:
        -- ATTACH locks the parent less than CREATE ... PARTITION OF would, so finishes and
        -- readers go on
        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                       part, parent);
        EXECUTE format('WITH moved AS (DELETE FROM %I WHERE retire_at >= $1 AND retire_at < $2'
                       ' RETURNING *) INSERT INTO %I SELECT * FROM moved',
                       parent || '_default', part) USING lower, upper;
        EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                       parent, part, lower, upper);
    END LOOP;
END
$$;

-- The caller decides what retires by its own instant (a tick's, which --now may set); the
-- database still never drops a day that is not over by its own clock: such a day is left
-- (false) for a later tick, never an error.
CREATE FUNCTION cronjobs_drop_history_day(day date) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp
    AS $$
BEGIN
    IF day >= (now() AT TIME ZONE 'UTC')::date THEN
        RETURN false;
    END IF;
    EXECUTE format('DROP TABLE IF EXISTS %I, %I',
                   'job_runs_history_' || to_char(day, 'YYYYMMDD'),
                   'job_attempts_history_' || to_char(day, 'YYYYMMDD'));
    RETURN true;
END
$$;

REVOKE EXECUTE ON FUNCTION cronjobs_add_history_day(date), cronjobs_drop_history_day(date)
    FROM PUBLIC;

-- Slots that were decided but not run, with the reason. A range of consecutive slots with
-- the same reason may be one row (first_slot .. last_slot, slot_count).
CREATE TABLE job_skips (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    definition_id  bigint NOT NULL REFERENCES job_definitions (id),
    first_slot     timestamptz NOT NULL,
    last_slot      timestamptz NOT NULL,
    -- NULL when too many to count cheaply, or when the schedule could not be evaluated
    slot_count     integer CONSTRAINT job_skips_slot_count_check CHECK (slot_count >= 1),
    reason         text NOT NULL
        CONSTRAINT job_skips_reason_check
        CHECK (reason IN ('missed_deadline', 'coalesced', 'catchup_none', 'catchup_limit',
                          'overlap', 'paused', 'invalid', 'superseded')),
    detail         text,
    tick_id        bigint REFERENCES job_ticks (id) ON DELETE SET NULL,
    decided_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT job_skips_range_check CHECK (first_slot <= last_slot)
);

CREATE INDEX job_skips_definition_idx ON job_skips (definition_id, last_slot);
CREATE INDEX job_skips_tick_idx ON job_skips (tick_id) WHERE tick_id IS NOT NULL;
-- retention: the oldest first
CREATE INDEX job_skips_decided_idx ON job_skips (decided_at);

-- One row per notification of a run to one receiver: an outbox (docs/how-to/notifications.md).
-- Written 'pending' before it is sent; ticks claim the due ones (FOR UPDATE SKIP LOCKED, the
-- claim token fencing the outcome) and try them with exponential back-off until the
-- receiver takes it ('sent'), refuses it for good ('failed': an HTTP 4xx) or the deadline
-- passes ('expired').
CREATE TABLE job_notifications (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- the run (not a foreign key: runs move to the history and retire on their own)
    run_id       bigint NOT NULL,
    attempt      integer NOT NULL,
    event        text NOT NULL
        CONSTRAINT job_notifications_event_check
        CHECK (event IN ('dead', 'failure', 'recovery')),
    -- the receiver's URL, masked (what is shown)
    target       text NOT NULL,
    status       text NOT NULL
        CONSTRAINT job_notifications_status_check
        CHECK (status IN ('pending', 'sent', 'failed', 'expired')),
    -- HTTP requests made so far
    tries        integer NOT NULL CONSTRAINT job_notifications_tries_check CHECK (tries >= 0),
    http_status  integer,
    error        text,
    -- the last try (when it was delivered, for 'sent'); the record's time otherwise
    sent_at      timestamptz NOT NULL,
    -- the receivers' idempotency key (the Cronjobs-Delivery-Id header)
    delivery_id  uuid,
    -- how many times a tick took it (each a short series of tries)
    rounds       integer NOT NULL DEFAULT 1
        CONSTRAINT job_notifications_rounds_check CHECK (rounds >= 0),
    -- while pending: when it is due (or its claim's end), until when it is tried, the claim
    next_attempt_at timestamptz,
    expires_at   timestamptz,
    claim_token  uuid,
    -- while pending: the receiver in full (a secret, never shown) and the document
    url          text,
    body         text,
    CONSTRAINT job_notifications_pending_check
        CHECK (status <> 'pending' OR (next_attempt_at IS NOT NULL AND expires_at IS NOT NULL
                                       AND url IS NOT NULL AND body IS NOT NULL))
);

CREATE INDEX job_notifications_run_idx ON job_notifications (run_id);
-- retention: the oldest first
CREATE INDEX job_notifications_sent_idx ON job_notifications (sent_at);
-- the outbox: the due deliveries, the soonest first
CREATE INDEX job_notifications_due_idx ON job_notifications (next_attempt_at)
    WHERE status = 'pending';

INSERT INTO cronjobs_migrations (version, name) VALUES (1, 'initial');
INSERT INTO cronjobs_migrations (version, name) VALUES (2, 'ack_and_backfill_order');
INSERT INTO cronjobs_migrations (version, name) VALUES (3, 'tick_handlers');
INSERT INTO cronjobs_migrations (version, name) VALUES (4, 'indexes_and_hot_updates');
INSERT INTO cronjobs_migrations (version, name) VALUES (5, 'claim_order');
INSERT INTO cronjobs_migrations (version, name) VALUES (6, 'jobs_as_code');
INSERT INTO cronjobs_migrations (version, name) VALUES (7, 'notifications_and_live_output');
INSERT INTO cronjobs_migrations (version, name) VALUES (8, 'dashboard_indexes');
INSERT INTO cronjobs_migrations (version, name) VALUES (9, 'failing_jobs_index');
INSERT INTO cronjobs_migrations (version, name) VALUES (10, 'claimable_runs');
INSERT INTO cronjobs_migrations (version, name) VALUES (11, 'hot_queue_and_history');
INSERT INTO cronjobs_migrations (version, name) VALUES (12, 'notification_outbox');
INSERT INTO cronjobs_migrations (version, name) VALUES (13, 'verdict_indexes');
INSERT INTO cronjobs_migrations (version, name) VALUES (14, 'definition_names');
INSERT INTO cronjobs_migrations (version, name) VALUES (15, 'running_attempts');
INSERT INTO cronjobs_migrations (version, name) VALUES (16, 'dead_runs_index');
INSERT INTO cronjobs_migrations (version, name) VALUES (17, 'cursor_never_back');
INSERT INTO cronjobs_migrations (version, name) VALUES (18, 'one_clock_for_retirement');
INSERT INTO cronjobs_migrations (version, name) VALUES (19, 'unacknowledged_dead');
