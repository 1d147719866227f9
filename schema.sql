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
    CONSTRAINT job_definitions_target_check CHECK (
        (kind = 'handler' AND handler IS NOT NULL AND command IS NULL)
        OR (kind = 'command' AND command IS NOT NULL AND handler IS NULL)
    ),
    CONSTRAINT job_definitions_paused_until_check
        CHECK (paused_until IS NULL OR paused_at IS NOT NULL)
);

CREATE UNIQUE INDEX job_definitions_name_key
    ON job_definitions (name) WHERE removed_at IS NULL;
CREATE INDEX job_definitions_due_idx
    ON job_definitions (next_due_at) WHERE removed_at IS NULL;
CREATE INDEX job_definitions_group_idx
    ON job_definitions (group_name) WHERE group_name IS NOT NULL;
-- the jobs in a run of failures, which a success resets (finish_runs): usually none
CREATE INDEX job_definitions_failing_idx
    ON job_definitions (id) WHERE consecutive_failures <> 0;

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

-- One row per run of a job. A scheduled slot becomes a run through one
-- INSERT ... ON CONFLICT DO NOTHING on job_runs_slot_key: the run row is the marker.
CREATE TABLE job_runs (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    definition_id        bigint NOT NULL REFERENCES job_definitions (id),
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
    retry_of             bigint REFERENCES job_runs (id) ON DELETE SET NULL,
    -- `cronjobs ack` (or `retry`): a person saw this dead run. It is acknowledged while
    -- acknowledged_at is at or after finished_at: dying again needs a new acknowledgement.
    acknowledged_at      timestamptz,
    acknowledged_by      text,
    tick_id              bigint REFERENCES job_ticks (id) ON DELETE SET NULL,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT job_runs_lease_check CHECK (
        (status = 'running') = (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)
    )
) WITH (fillfactor = 90);
-- fillfactor: room on every page for the new versions of HOT updates. A heartbeat
-- (heartbeat_at, lease_expires_at) and a cancel request change no indexed column, so they
-- are HOT updates when the page has room. A claim or a finish changes status, which the
-- queue's partial indexes are defined on: those can never be HOT.

CREATE UNIQUE INDEX job_runs_slot_key
    ON job_runs (definition_id, scheduled_for) WHERE trigger IN ('schedule', 'backfill');
-- at most one exclusive run of a job holds a lease at a time, whatever races the claims
CREATE UNIQUE INDEX job_runs_exclusive_running_key
    ON job_runs (definition_id) WHERE status = 'running' AND exclusive;
-- what is due, in the claim's order: only waiting runs are indexed (the WHERE is
-- cronjobs_run_waits(status), below, written out), however many finished runs the table
-- holds; backfilled runs after all others, so that a backfill never holds up a schedule;
-- then by eligible_at and id, so that a claim of N runs reads its first N entries
CREATE INDEX job_runs_claim_idx
    ON job_runs ((trigger = 'backfill'), eligible_at, id) WHERE status IN ('queued', 'failed');
-- one-off runs waiting for their time (trigger --at)
CREATE INDEX job_runs_scheduled_idx ON job_runs (eligible_at) WHERE status = 'scheduled';
-- what is running (and so what may have expired): keyed on a column a heartbeat leaves alone
CREATE INDEX job_runs_running_idx
    ON job_runs (started_at) WHERE status = 'running';
-- unfinished runs of one job (overlap policy)
CREATE INDEX job_runs_active_idx
    ON job_runs (definition_id) WHERE status IN ('queued', 'running', 'failed');
-- history of one job, newest first
CREATE INDEX job_runs_history_idx ON job_runs (definition_id, id DESC);
-- the runs of a job's slots outside the slot key (manual runs, forced retries): with
-- job_runs_slot_key, a range of slots is a range of index entries (explain, the dashboard)
CREATE INDEX job_runs_other_slots_idx
    ON job_runs (definition_id, scheduled_for) WHERE trigger NOT IN ('schedule', 'backfill');
CREATE INDEX job_runs_finished_idx ON job_runs (finished_at) WHERE finished_at IS NOT NULL;
-- each job's latest run of each final status (prune keeps them; status reads them)
CREATE INDEX job_runs_latest_idx
    ON job_runs (definition_id, status, finished_at) WHERE finished_at IS NOT NULL;
-- the foreign keys: deleting a tick or a run finds the rows that refer to it
CREATE INDEX job_runs_tick_idx ON job_runs (tick_id) WHERE tick_id IS NOT NULL;
CREATE INDEX job_runs_retry_of_idx ON job_runs (retry_of) WHERE retry_of IS NOT NULL;
-- dead runs nobody acknowledged yet: they keep `cronjobs status --check` red
CREATE INDEX job_runs_unacknowledged_idx
    ON job_runs (definition_id)
    WHERE status = 'dead' AND (acknowledged_at IS NULL OR acknowledged_at < finished_at);

-- What makes a run claimable, written once: SQL functions of a row's columns, each one
-- expression the planner inlines where it is called (LANGUAGE sql, IMMUTABLE, not STRICT),
-- so that a query calling them on job_runs' columns reads the same indexes as one that
-- spelled the expression out. The claim (claim_runs) adds what only it checks: the worker
-- has the handler, the job's group has room, no exclusive run of the job is running.

-- A run that waits in the queue: for its first attempt (queued) or for a retry (failed).
-- (job_runs_claim_idx holds the runs that wait: its WHERE is this body, written out, as an
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

-- Every attempt of a run, kept for history: worker, times, outcome, output.
CREATE TABLE job_attempts (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id       bigint NOT NULL REFERENCES job_runs (id) ON DELETE CASCADE,
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
    CONSTRAINT job_attempts_run_attempt_key UNIQUE (run_id, attempt)
);

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

-- One row per notification sent (or tried) about a run: to which receiver (masked), on
-- which event, how it went.
CREATE TABLE job_notifications (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id       bigint NOT NULL REFERENCES job_runs (id) ON DELETE CASCADE,
    attempt      integer NOT NULL,
    event        text NOT NULL
        CONSTRAINT job_notifications_event_check
        CHECK (event IN ('dead', 'failure', 'recovery')),
    target       text NOT NULL,
    status       text NOT NULL
        CONSTRAINT job_notifications_status_check
        CHECK (status IN ('sent', 'failed')),
    tries        integer NOT NULL CONSTRAINT job_notifications_tries_check CHECK (tries >= 0),
    http_status  integer,
    error        text,
    sent_at      timestamptz NOT NULL
);

CREATE INDEX job_notifications_run_idx ON job_notifications (run_id);

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
