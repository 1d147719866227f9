-- Migration 11: a small hot queue and a history partitioned by retirement day
-- (schema.sql explains the model), retention on by default.
--
-- This migration only changes the structure, in one short transaction: the old job_runs and
-- job_attempts become the 'legacy' partitions of the new tables (readers see every run at
-- once, nothing is copied here), and the runs not finished yet move to the queue. Then
-- `cronjobs migrate` moves the legacy history to the day partitions in small batches while
-- ticks go on (cronjobs/core/upgrade.py), and drops the emptied legacy tables.

ALTER TABLE job_definitions
    ADD COLUMN keep_succeeded interval
        CONSTRAINT job_definitions_keep_succeeded_check
        CHECK (keep_succeeded BETWEEN interval '1 day' AND interval '3650 days'),
    ADD COLUMN keep_failed interval
        CONSTRAINT job_definitions_keep_failed_check
        CHECK (keep_failed BETWEEN interval '1 day' AND interval '3650 days'),
    ADD COLUMN last_succeeded_at timestamptz,
    ADD COLUMN last_failed_at timestamptz;

-- the jobs with a retention of their own (the tick makes the days their runs retire on)
CREATE INDEX job_definitions_keep_succeeded_idx
    ON job_definitions (keep_succeeded) WHERE keep_succeeded IS NOT NULL;
CREATE INDEX job_definitions_keep_failed_idx
    ON job_definitions (keep_failed) WHERE keep_failed IS NOT NULL;
-- the jobs /healthz must look at (job_health): invalid ones, and those with a slot come
-- since their last success (as the definition knows it), not paused
CREATE INDEX job_definitions_invalid_idx
    ON job_definitions (id) WHERE invalid_reason IS NOT NULL AND removed_at IS NULL;
CREATE INDEX job_definitions_unsucceeded_idx
    ON job_definitions (id)
    WHERE removed_at IS NULL AND paused_at IS NULL
      AND (last_succeeded_at IS NULL OR last_succeeded_at < cursor_at)
      AND cursor_at > greatest(created_at, schedule_since);

-- each job's last success and death, from the old latest-run index (one probe per job)
UPDATE job_definitions AS d
SET last_succeeded_at = (SELECT max(finished_at) FROM job_runs
                         WHERE definition_id = d.id AND status = 'succeeded'
                           AND finished_at IS NOT NULL),
    last_failed_at = (SELECT max(finished_at) FROM job_runs
                      WHERE definition_id = d.id AND status = 'dead'
                        AND finished_at IS NOT NULL);

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

-- The old tables keep their rows and indexes as the legacy partitions. Their identity
-- sequences become plain sequences (the new tables' ids continue theirs); the foreign keys
-- that pointed at runs go (runs move and retire on their own).
ALTER TABLE job_runs DROP CONSTRAINT job_runs_definition_id_fkey,
    DROP CONSTRAINT job_runs_retry_of_fkey, DROP CONSTRAINT job_runs_tick_id_fkey;
ALTER TABLE job_attempts DROP CONSTRAINT job_attempts_run_id_fkey;
ALTER TABLE job_notifications DROP CONSTRAINT job_notifications_run_id_fkey;
ALTER TABLE job_runs RENAME TO job_runs_legacy;
ALTER TABLE job_attempts RENAME TO job_attempts_legacy;
CREATE TEMPORARY TABLE cronjobs_next_ids ON COMMIT DROP AS
SELECT (SELECT last_value FROM job_runs_id_seq) AS runs,
       (SELECT last_value FROM job_attempts_id_seq) AS attempts;
ALTER TABLE job_runs_legacy ALTER COLUMN id DROP IDENTITY;
ALTER TABLE job_attempts_legacy ALTER COLUMN id DROP IDENTITY;
ALTER TABLE job_runs_legacy
    ADD COLUMN stage text NOT NULL DEFAULT 'legacy', ADD COLUMN retire_at timestamptz;
ALTER TABLE job_attempts_legacy
    ADD COLUMN stage text NOT NULL DEFAULT 'legacy', ADD COLUMN retire_at timestamptz;

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
-- runs finished since an instant (status, metrics, prune's batches). (A BRIN index in
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
-- dead runs nobody acknowledged yet: they keep `cronjobs status --check` red
CREATE INDEX job_runs_history_unacknowledged_idx
    ON job_runs_history (definition_id)
    WHERE status = 'dead' AND (acknowledged_at IS NULL OR acknowledged_at < finished_at);
CREATE INDEX job_runs_kept_unacknowledged_idx
    ON job_runs_kept (definition_id)
    WHERE status = 'dead' AND (acknowledged_at IS NULL OR acknowledged_at < finished_at);

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

CREATE FUNCTION cronjobs_drop_history_day(day date) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp
    AS $$
BEGIN
    IF day >= (now() AT TIME ZONE 'UTC')::date THEN
        RAISE EXCEPTION 'the history of % has not retired yet', day;
    END IF;
    EXECUTE format('DROP TABLE IF EXISTS %I, %I',
                   'job_runs_history_' || to_char(day, 'YYYYMMDD'),
                   'job_attempts_history_' || to_char(day, 'YYYYMMDD'));
END
$$;

REVOKE EXECUTE ON FUNCTION cronjobs_add_history_day(date), cronjobs_drop_history_day(date)
    FROM PUBLIC;

SELECT setval('job_runs_id_seq', (SELECT runs FROM cronjobs_next_ids));
SELECT setval('job_attempts_id_seq', (SELECT attempts FROM cronjobs_next_ids));

ALTER TABLE job_runs ATTACH PARTITION job_runs_legacy FOR VALUES IN ('legacy');
ALTER TABLE job_attempts ATTACH PARTITION job_attempts_legacy FOR VALUES IN ('legacy');

-- the runs not finished yet, and their attempts, move to the queue now (a few rows)
WITH moved AS (
    UPDATE job_runs SET stage = 'queue'
    WHERE stage = 'legacy' AND status IN ('scheduled', 'queued', 'running', 'failed')
    RETURNING id
)
UPDATE job_attempts SET stage = 'queue'
WHERE stage = 'legacy' AND run_id = ANY(ARRAY(SELECT id FROM moved));

-- retention of notifications and skipped slots: the oldest first
CREATE INDEX job_notifications_sent_idx ON job_notifications (sent_at);
CREATE INDEX job_skips_decided_idx ON job_skips (decided_at);
