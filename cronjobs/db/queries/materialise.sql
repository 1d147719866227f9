-- Materialisation: due definitions become runs and skips, exactly once; one-off runs are
-- released when their time comes (cronjobs/db/stores/materialise.py).

-- name: due_definitions
-- Definitions with a slot due, locked so that concurrent ticks share them instead of
-- deciding the same ones; the partial index on next_due_at keeps this proportional to
-- the due definitions, not to all of them. Only what deciding reads, in the order of
-- models.DueDefinition.
SELECT id, name, schedule, timezone, catchup, catchup_limit, starting_deadline, overlap,
       max_attempts, paused_at, paused_until, pause_note, cursor_at, next_due_at
FROM job_definitions
WHERE removed_at IS NULL AND next_due_at <= %(now)s
ORDER BY next_due_at, id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: definitions_due
-- Whether any definition has a slot due at the instant (no lock taken: a tick that already
-- materialised uses it to see that other ticks are still materialising).
SELECT EXISTS (
    SELECT 1 FROM job_definitions WHERE removed_at IS NULL AND next_due_at <= %(now)s
) AS due;

-- name: anything_to_materialise
-- Whether a tick has anything to decide at the instant: a definition with a slot due, one
-- with no next slot, a one-off run whose time has come (what due_definitions,
-- unscheduled_definitions and due_one_off_runs look for, without taking a lock). Nothing:
-- the tick skips materialising, one round trip instead of a transaction of five. (Rows
-- another tick holds are counted: that tick's transaction then runs as before and skips
-- them.)
SELECT EXISTS (SELECT 1 FROM job_definitions
               WHERE removed_at IS NULL AND next_due_at <= %(now)s)
    OR EXISTS (SELECT 1 FROM job_definitions
               WHERE removed_at IS NULL AND next_due_at IS NULL AND invalid_reason IS NULL)
    OR EXISTS (SELECT 1 FROM job_runs_queue
               WHERE status = 'scheduled' AND eligible_at <= %(now)s) AS due;

-- name: unscheduled_definitions
-- Valid definitions with no next slot (e.g. inserted with SQL): the tick schedules them.
-- The columns of due_definitions.
SELECT id, name, schedule, timezone, catchup, catchup_limit, starting_deadline, overlap,
       max_attempts, paused_at, paused_until, pause_note, cursor_at, next_due_at
FROM job_definitions
WHERE removed_at IS NULL AND next_due_at IS NULL AND invalid_reason IS NULL
ORDER BY id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: active_runs
-- Per definition, what the overlap policy counts: runs holding a live lease at the instant,
-- and runs waiting to start or to be retried, with the earliest slot (or trigger instant)
-- among them: a slot is held back only by runs asked for at or before it. Backfilled runs
-- are not counted: they are a separate stream, claimed after the job's own runs.
SELECT definition_id,
       count(*) FILTER (WHERE status = 'running' AND lease_expires_at > %(now)s)
           AS running,
       count(*) FILTER (WHERE cronjobs_run_waits(status)) AS waiting,
       min(scheduled_for) FILTER (WHERE (status = 'running' AND lease_expires_at > %(now)s)
                                   OR cronjobs_run_waits(status)) AS earliest
FROM job_runs_queue
WHERE definition_id = ANY(%(definition_ids)b::bigint[])
  AND status IN ('queued', 'running', 'failed')
  AND trigger <> 'backfill'
GROUP BY definition_id;

-- name: insert_runs
-- The one place a scheduled slot becomes a run. Exactly once: the caller holds the job's
-- row (due_definitions) and advances its cursor past these slots in the same transaction
-- (advance_definitions), so no tick decides them again, whether their runs still wait
-- here or have moved to the history; the queue's slot key backs that up. The arrays go
-- over in binary: thousands of timestamps are cheaper to send that way.
INSERT INTO job_runs_queue (definition_id, scheduled_for, trigger, max_attempts, exclusive,
                      eligible_at, tick_id, created_at, updated_at)
SELECT v.definition_id, v.scheduled_for, v.trigger, v.max_attempts, v.exclusive,
       v.eligible_at, %(tick_id)s, %(now)s, %(now)s
FROM unnest(%(definition_ids)b::bigint[], %(slots)b::timestamptz[], %(triggers)b::text[],
            %(max_attempts)b::integer[], %(exclusive)b::boolean[],
            %(eligible)b::timestamptz[])
     AS v (definition_id, scheduled_for, trigger, max_attempts, exclusive, eligible_at)
ON CONFLICT (definition_id, scheduled_for) WHERE trigger IN ('schedule', 'backfill')
DO NOTHING
RETURNING definition_id, scheduled_for;

-- name: insert_skips
INSERT INTO job_skips (definition_id, first_slot, last_slot, slot_count, reason, detail,
                       tick_id, decided_at)
SELECT v.definition_id, v.first_slot, v.last_slot, v.slot_count, v.reason, v.detail,
       %(tick_id)s, %(now)s
FROM unnest(%(definition_ids)b::bigint[], %(first_slots)b::timestamptz[],
            %(last_slots)b::timestamptz[], %(slot_counts)b::integer[], %(reasons)b::text[],
            %(details)b::text[])
     AS v (definition_id, first_slot, last_slot, slot_count, reason, detail);

-- name: advance_definitions
-- Every slot up to the new cursor is now decided; same transaction as the runs and skips.
UPDATE job_definitions AS d
SET cursor_at = v.cursor_at,
    next_due_at = v.next_due_at,
    invalid_reason = v.invalid_reason,
    paused_at = CASE WHEN v.resumed THEN NULL ELSE d.paused_at END,
    paused_until = CASE WHEN v.resumed THEN NULL ELSE d.paused_until END,
    pause_note = CASE WHEN v.resumed THEN NULL ELSE d.pause_note END
FROM unnest(%(ids)b::bigint[], %(cursors)b::timestamptz[], %(next_dues)b::timestamptz[],
            %(invalid_reasons)b::text[], %(resumed)b::boolean[])
     AS v (id, cursor_at, next_due_at, invalid_reason, resumed)
WHERE d.id = v.id;

-- name: runs_between
-- A job's runs of the slots in [start, end], wherever they are: a range of each
-- partition's (definition_id, scheduled_for) index, however long the job's history.
SELECT * FROM job_runs
WHERE definition_id = %(definition_id)s AND scheduled_for BETWEEN %(start)s AND %(end)s
ORDER BY scheduled_for, id;

-- name: lock_definition
-- Held until the transaction ends: the job's row, as a tick deciding its slots holds it
-- (due_definitions), so that a backfill and a tick never decide the same job at once.
SELECT id FROM job_definitions WHERE id = %(id)s FOR UPDATE;

-- name: insert_backfill_runs
-- `cronjobs backfill`: past slots become runs, except those that already have a run of
-- the slot key anywhere (waiting, running or in the history). The caller holds the job's
-- row (lock_definition): this statement's snapshot, taken after that, sees every run of
-- these slots (a tick makes them only while holding the row), and a run moving from the
-- queue to the history is seen in one place or the other, never in neither.
INSERT INTO job_runs_queue (definition_id, scheduled_for, trigger, max_attempts, exclusive,
                            eligible_at, created_at, updated_at)
SELECT v.definition_id, v.scheduled_for, 'backfill', v.max_attempts, v.exclusive,
       v.eligible_at, %(now)s, %(now)s
FROM unnest(%(definition_ids)b::bigint[], %(slots)b::timestamptz[],
            %(max_attempts)b::integer[], %(exclusive)b::boolean[],
            %(eligible)b::timestamptz[]) WITH ORDINALITY
     AS v (definition_id, scheduled_for, max_attempts, exclusive, eligible_at, n)
WHERE NOT EXISTS (
    SELECT 1 FROM job_runs AS o
    WHERE o.definition_id = v.definition_id AND o.scheduled_for = v.scheduled_for
      AND o.trigger IN ('schedule', 'backfill'))
-- (ids in the slots' order, as given)
ORDER BY v.n
ON CONFLICT (definition_id, scheduled_for) WHERE trigger IN ('schedule', 'backfill')
DO NOTHING
RETURNING definition_id, scheduled_for;

-- name: retention_horizon
-- The oldest slot of this job whose run retention cannot have dropped (NULL: any): runs
-- retired before cronjobs_retention.retired_before finished at least the job's shortest
-- retention before it.
SELECT r.retired_before
       - least(cronjobs_keep('succeeded', d.keep_succeeded, d.keep_failed),
               cronjobs_keep('dead', d.keep_succeeded, d.keep_failed)) AS horizon
FROM job_definitions AS d CROSS JOIN cronjobs_retention AS r
WHERE d.id = %(id)s;

-- name: skips_between
SELECT * FROM job_skips
WHERE definition_id = %(definition_id)s AND last_slot >= %(start)s AND first_slot <= %(end)s
ORDER BY first_slot, id;

-- name: insert_one_off_run
-- `cronjobs trigger NAME --at TIME`: one manual run for a later time. It waits as
-- 'scheduled' (claim_runs never sees it) until release_one_off_runs decides it.
INSERT INTO job_runs (definition_id, scheduled_for, trigger, status, payload, max_attempts,
                      exclusive, eligible_at, created_at, updated_at)
VALUES (%(definition_id)s, %(at)s, 'manual', 'scheduled', %(payload)s, %(max_attempts)s,
        %(exclusive)s, %(at)s, %(now)s, %(now)s)
RETURNING *;

-- name: due_one_off_runs
-- One-off runs whose time has come, with what their job's overlap policy needs; locked so
-- that concurrent ticks decide each once.
SELECT r.id, r.definition_id, r.scheduled_for, d.name, d.overlap
FROM job_runs_queue AS r JOIN job_definitions AS d ON d.id = r.definition_id
WHERE r.status = 'scheduled' AND r.eligible_at <= %(now)s
ORDER BY r.eligible_at, r.id
LIMIT %(limit)s
FOR UPDATE OF r SKIP LOCKED;

-- name: release_one_off_runs
-- Each due one-off run is queued (to be claimed like any run) or cancelled with the reason
-- its job's overlap policy gave.
UPDATE job_runs_queue AS r
SET status = CASE WHEN v.error IS NULL THEN 'queued' ELSE 'cancelled' END,
    exclusive = v.exclusive,
    finished_at = CASE WHEN v.error IS NULL THEN NULL ELSE %(now)s END,
    error = v.error,
    updated_at = %(now)s
FROM unnest(%(ids)s::bigint[], %(exclusive)s::boolean[], %(errors)s::text[])
     AS v (id, exclusive, error)
WHERE r.id = v.id AND r.status = 'scheduled';

-- name: one_off_runs_of
-- A job's one-off runs still waiting for their time (explain shows them, whatever range).
SELECT * FROM job_runs_queue
WHERE definition_id = %(definition_id)s AND status = 'scheduled'
ORDER BY eligible_at, id;
