-- Job definitions: define, apply, pause, resume, remove (cronjobs/db/stores/definitions.py).

-- name: upsert_definition
-- Creates the job, or updates it when anything differs. A new schedule or zone continues
-- from the start the caller gives, the later of now and where the cursor was (a new job's:
-- where the removed jobs of its name left off, name_left_off), and its next slot is the
-- caller's, worked out from that instant; the cursor never moves back. An unchanged
-- definition is not touched (no row returned). The source is written when the job is
-- created only (an update keeps its owner).
INSERT INTO job_definitions AS d (
    name, schedule, timezone, kind, handler, command, payload, catchup, catchup_limit,
    starting_deadline, overlap, max_attempts, backoff, backoff_max, timeout, lease,
    alert_command, alert_on_failure, pause_after_failures, notify_urls, notify_on,
    keep_succeeded, keep_failed, cursor_at, next_due_at, schedule_since, source, group_name
) VALUES (
    %(name)s, %(schedule)s, %(timezone)s, %(kind)s, %(handler)s, %(command)s, %(payload)s,
    %(catchup)s, %(catchup_limit)s, %(starting_deadline)s, %(overlap)s, %(max_attempts)s,
    %(backoff)s, %(backoff_max)s, %(timeout)s, %(lease)s,
    %(alert_command)s, %(alert_on_failure)s, %(pause_after_failures)s,
    %(notify_urls)s, %(notify_on)s, %(keep_succeeded)s, %(keep_failed)s,
    %(start)s, %(next_due_at)s, %(start)s, %(source)s, %(group_name)s
)
ON CONFLICT (name) WHERE removed_at IS NULL DO UPDATE SET
    schedule = excluded.schedule,
    timezone = excluded.timezone,
    kind = excluded.kind,
    handler = excluded.handler,
    command = excluded.command,
    payload = excluded.payload,
    catchup = excluded.catchup,
    catchup_limit = excluded.catchup_limit,
    starting_deadline = excluded.starting_deadline,
    overlap = excluded.overlap,
    max_attempts = excluded.max_attempts,
    backoff = excluded.backoff,
    backoff_max = excluded.backoff_max,
    timeout = excluded.timeout,
    lease = excluded.lease,
    alert_command = excluded.alert_command,
    alert_on_failure = excluded.alert_on_failure,
    pause_after_failures = excluded.pause_after_failures,
    group_name = excluded.group_name,
    notify_urls = excluded.notify_urls,
    notify_on = excluded.notify_on,
    keep_succeeded = excluded.keep_succeeded,
    keep_failed = excluded.keep_failed,
    cursor_at = CASE
        WHEN (d.schedule, d.timezone) IS DISTINCT FROM (excluded.schedule, excluded.timezone)
            OR d.invalid_reason IS NOT NULL
        THEN greatest(d.cursor_at, excluded.cursor_at) ELSE d.cursor_at END,
    next_due_at = CASE
        WHEN (d.schedule, d.timezone) IS DISTINCT FROM (excluded.schedule, excluded.timezone)
            OR d.invalid_reason IS NOT NULL
        THEN excluded.next_due_at ELSE d.next_due_at END,
    schedule_since = CASE
        WHEN (d.schedule, d.timezone) IS DISTINCT FROM (excluded.schedule, excluded.timezone)
        THEN excluded.schedule_since ELSE d.schedule_since END,
    invalid_reason = NULL,
    updated_at = excluded.updated_at
WHERE (d.schedule, d.timezone, d.kind, d.handler, d.command, d.payload, d.catchup,
       d.catchup_limit, d.starting_deadline, d.overlap, d.max_attempts, d.backoff,
       d.backoff_max, d.timeout, d.lease, d.alert_command, d.alert_on_failure,
       d.pause_after_failures, d.group_name, d.notify_urls, d.notify_on, d.keep_succeeded,
       d.keep_failed)
    IS DISTINCT FROM
      (excluded.schedule, excluded.timezone, excluded.kind, excluded.handler, excluded.command,
       excluded.payload, excluded.catchup, excluded.catchup_limit, excluded.starting_deadline,
       excluded.overlap, excluded.max_attempts, excluded.backoff, excluded.backoff_max,
       excluded.timeout, excluded.lease, excluded.alert_command, excluded.alert_on_failure,
       excluded.pause_after_failures, excluded.group_name, excluded.notify_urls,
       excluded.notify_on, excluded.keep_succeeded, excluded.keep_failed)
   OR d.invalid_reason IS NOT NULL
RETURNING d.*, (xmax = 0) AS created;

-- name: name_left_off
-- Where the definitions that carried this name (the current one and removed ones) left off:
-- a job defined under it continues from there at the earliest (the cursor never moves back).
SELECT max(cursor_at) FROM job_definitions WHERE name = %(name)s;

-- name: apply_lock
-- Held until the applying transaction ends: concurrent `cronjobs apply` calls (many pods
-- starting at once) run one after the other, each seeing what the previous one wrote.
SELECT pg_advisory_xact_lock(7161124402215412276);

-- name: adopt_definition
-- `apply --adopt`: the declaring source takes over a hand-made or another source's job.
UPDATE job_definitions SET source = %(source)s, updated_at = %(now)s
WHERE id = %(id)s
RETURNING *;

-- name: definition_by_name
SELECT * FROM job_definitions WHERE name = %(name)s AND removed_at IS NULL;

-- name: definition_by_name_for_update
SELECT * FROM job_definitions WHERE name = %(name)s AND removed_at IS NULL FOR UPDATE;

-- name: list_definitions
SELECT d.*, last.status AS last_run_status,
       coalesce(last.finished_at, last.started_at, last.scheduled_for) AS last_run_at
FROM job_definitions AS d
LEFT JOIN LATERAL (
    SELECT r.status, r.finished_at, r.started_at, r.scheduled_for
    FROM job_runs AS r
    WHERE r.definition_id = d.id
    ORDER BY r.id DESC
    LIMIT 1
) AS last ON true
WHERE d.removed_at IS NULL
ORDER BY d.name;

-- name: pause_definition
UPDATE job_definitions
SET paused_at = coalesce(paused_at, %(now)s),
    paused_until = %(until)s,
    pause_note = %(note)s,
    updated_at = %(now)s
WHERE id = %(id)s
RETURNING *;

-- name: resume_definition
-- Slots decided while paused are recorded by the caller; the cursor continues from now.
UPDATE job_definitions
SET paused_at = NULL,
    paused_until = NULL,
    pause_note = NULL,
    cursor_at = greatest(cursor_at, %(now)s),
    next_due_at = %(next_due_at)s,
    updated_at = %(now)s
WHERE id = %(id)s
RETURNING *;

-- name: record_skip
INSERT INTO job_skips (definition_id, first_slot, last_slot, slot_count, reason, detail, tick_id,
                       decided_at)
VALUES (%(definition_id)s, %(first_slot)s, %(last_slot)s, %(slot_count)s, %(reason)s,
        %(detail)s, %(tick_id)s, %(now)s);

-- name: remove_definition
UPDATE job_definitions SET removed_at = %(now)s, next_due_at = NULL, updated_at = %(now)s
WHERE id = %(id)s
RETURNING *;

-- name: cancel_waiting_runs
-- Runs of a removed job that have not started will never start.
UPDATE job_runs
SET status = 'cancelled', finished_at = %(now)s, error = %(reason)s, updated_at = %(now)s
WHERE definition_id = %(definition_id)s AND status IN ('scheduled', 'queued', 'failed');

-- name: request_cancel_running_of
-- The replace overlap policy: running runs of these definitions stop at their next heartbeat
-- (backfilled runs are not replaced: see active_runs).
UPDATE job_runs SET cancel_requested_at = %(now)s, updated_at = %(now)s
WHERE definition_id = ANY(%(definition_ids)s) AND status = 'running'
  AND trigger <> 'backfill' AND cancel_requested_at IS NULL;

-- name: definition_history
-- Every definition (removed ones too) that has carried this name, newest first.
SELECT * FROM job_definitions WHERE name = %(name)s ORDER BY id DESC;
