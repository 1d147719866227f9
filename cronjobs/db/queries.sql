-- Every SQL statement cronjobs runs, each under a name. store.py runs them by name;
-- a test checks that every name here is used and every name used exists.
--
-- The clock is a parameter. Every instant a statement compares (lease expiry, due times,
-- backoff, ages, cutoffs) or writes (which later statements compare: eligible_at,
-- lease_expires_at, finished_at, started_at...) is `%(now)s`: the operation's one instant
-- (cronjobs.clock). The database's clock is read in two places only, at the start of an
-- operation: `now` below, and insert_tick when no instant is given. Columns' defaults
-- stay: they record when a row was really written (created_at; job_ticks.started_at, which
-- `status` reads as its dead-man's switch: whether ticks really run, whatever instant
-- they were given).

-- name: now
-- The instant of this transaction, from the database clock (the truth in production).
SELECT now() AS now;

-- name: begin
-- (Session.transaction_at_once: a transaction sent in one pipeline with its statements)
BEGIN;

-- name: commit
COMMIT;

-- name: session_setting
-- A setting of this session, NULL when it has none (e.g. the marker a connection sends as a
-- startup option, to learn whether its options reached the server: see connect.py).
SELECT current_setting(%(name)s, true) AS value;

-- name: migrations_table_exists
SELECT to_regclass('cronjobs_migrations') IS NOT NULL AS present;

-- name: schema_version
SELECT coalesce(max(version), 0) AS version FROM cronjobs_migrations;

-- name: migration_lock
-- Held until the migrating transaction ends: concurrent `cronjobs migrate` calls queue here.
SELECT pg_advisory_xact_lock(7161124402215412275);

-- name: record_migration
INSERT INTO cronjobs_migrations (version, name) VALUES (%(version)s, %(name)s);

-- name: upsert_definition
-- Creates the job, or updates it when anything differs. A new schedule or zone restarts
-- the cursor from now; an unchanged definition is not touched (no row returned). The
-- source is written when the job is created only (an update keeps its owner).
INSERT INTO job_definitions AS d (
    name, schedule, timezone, kind, handler, command, payload, catchup, catchup_limit,
    starting_deadline, overlap, max_attempts, backoff, backoff_max, timeout, lease,
    alert_command, alert_on_failure, pause_after_failures, notify_urls, notify_on,
    cursor_at, next_due_at, schedule_since, source, group_name
) VALUES (
    %(name)s, %(schedule)s, %(timezone)s, %(kind)s, %(handler)s, %(command)s, %(payload)s,
    %(catchup)s, %(catchup_limit)s, %(starting_deadline)s, %(overlap)s, %(max_attempts)s,
    %(backoff)s, %(backoff_max)s, %(timeout)s, %(lease)s,
    %(alert_command)s, %(alert_on_failure)s, %(pause_after_failures)s,
    %(notify_urls)s, %(notify_on)s,
    %(now)s, %(next_due_at)s, %(now)s, %(source)s, %(group_name)s
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
    cursor_at = CASE
        WHEN (d.schedule, d.timezone) IS DISTINCT FROM (excluded.schedule, excluded.timezone)
            OR d.invalid_reason IS NOT NULL
        THEN excluded.cursor_at ELSE d.cursor_at END,
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
       d.pause_after_failures, d.group_name, d.notify_urls, d.notify_on)
    IS DISTINCT FROM
      (excluded.schedule, excluded.timezone, excluded.kind, excluded.handler, excluded.command,
       excluded.payload, excluded.catchup, excluded.catchup_limit, excluded.starting_deadline,
       excluded.overlap, excluded.max_attempts, excluded.backoff, excluded.backoff_max,
       excluded.timeout, excluded.lease, excluded.alert_command, excluded.alert_on_failure,
       excluded.pause_after_failures, excluded.group_name, excluded.notify_urls,
       excluded.notify_on)
   OR d.invalid_reason IS NOT NULL
RETURNING d.*, (xmax = 0) AS created;

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

-- name: recent_runs
SELECT * FROM job_runs WHERE definition_id = %(definition_id)s ORDER BY id DESC LIMIT %(limit)s;

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

-- name: insert_tick
-- The tick's instant is the one given, else the database clock's: no separate `now` query.
-- The tick's own record does not wait for the disk: synchronous_commit is off for this
-- statement's transaction alone (set_config(..., true) is SET LOCAL). A database crash can
-- lose the last ticks' records, never a run: WAL is flushed in order, so the synchronous
-- commit of anything that refers to the tick (a run it materialised) makes it durable too.
--
-- In the same statement (one round trip for an empty tick), the ticks still 'running' that
-- went away before recording their end (killed, or their database unreachable when they
-- finished) are closed as 'lost', at the tick's instant, with the worker named in the
-- error: started more than %(lost_after)s before the instant (both by their instant and by
-- when their row was written: a live tick given an old --now is not lost), and holding no
-- run whose lease is live at it (a tick that runs something renews its leases; one that
-- runs nothing ends within its --max-runtime). Their ids, workers and instants come back.
WITH no_wait AS (SELECT set_config('synchronous_commit', 'off', true)),
instant AS (SELECT coalesce(%(now)s::timestamptz, now()) AS at FROM no_wait),
lost AS (
    UPDATE job_ticks AS t
    SET status = 'lost', finished_at = i.at,
        error = 'lost: the tick of worker ' || t.worker || ' (at ' || t.tick_at
                || ') went away without recording its end'
    FROM instant AS i
    WHERE t.id IN (
        SELECT s.id FROM job_ticks AS s, instant AS i2
        WHERE s.status = 'running' AND s.tick_at < i2.at - %(lost_after)s::interval
          AND s.started_at < i2.at - %(lost_after)s::interval
          AND NOT EXISTS (
              SELECT 1 FROM job_runs AS r
              WHERE r.tick_id = s.id AND r.status = 'running' AND r.lease_expires_at >= i2.at)
        ORDER BY s.tick_at
        LIMIT 100
        FOR UPDATE OF s SKIP LOCKED)
    RETURNING t.id, t.worker, t.tick_at
), tick AS (
    INSERT INTO job_ticks (worker, tick_at, handlers)
    SELECT %(worker)s, i.at, %(handlers)s::text[] FROM instant AS i
    RETURNING id, tick_at
)
SELECT tick.id, tick.tick_at,
       (SELECT array_agg(id ORDER BY tick_at) FROM lost) AS lost_ids,
       (SELECT array_agg(worker ORDER BY tick_at) FROM lost) AS lost_workers,
       (SELECT array_agg(tick_at ORDER BY tick_at) FROM lost) AS lost_tick_ats
FROM tick;

-- name: finish_tick
-- Without waiting for the disk, as insert_tick.
WITH no_wait AS (SELECT set_config('synchronous_commit', 'off', true))
UPDATE job_ticks
SET finished_at = %(now)s, status = %(status)s, materialised = %(materialised)s,
    skipped = %(skipped)s, reclaimed = %(reclaimed)s, claimed = %(claimed)s,
    succeeded = %(succeeded)s, failed = %(failed)s, error = %(error)s
FROM no_wait
WHERE id = %(id)s;

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
-- and runs waiting to start or to be retried. Backfilled runs
-- are not counted: they are a separate stream, claimed after the job's own runs.
SELECT definition_id,
       count(*) FILTER (WHERE status = 'running' AND lease_expires_at > %(now)s)
           AS running,
       count(*) FILTER (WHERE status IN ('queued', 'failed')) AS waiting
FROM job_runs
WHERE definition_id = ANY(%(definition_ids)b::bigint[])
  AND status IN ('queued', 'running', 'failed')
  AND trigger <> 'backfill'
GROUP BY definition_id;

-- name: insert_runs
-- The one place a slot becomes a run: the unique slot key makes it exactly once. The
-- arrays go over in binary: thousands of timestamps are cheaper to send that way.
INSERT INTO job_runs (definition_id, scheduled_for, trigger, max_attempts, exclusive,
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

-- name: request_cancel_running_of
-- The replace overlap policy: running runs of these definitions stop at their next heartbeat
-- (backfilled runs are not replaced: see active_runs).
UPDATE job_runs SET cancel_requested_at = %(now)s, updated_at = %(now)s
WHERE definition_id = ANY(%(definition_ids)s) AND status = 'running'
  AND trigger <> 'backfill' AND cancel_requested_at IS NULL;

-- name: runs_between
-- A job's runs of the slots in [start, end]: those of the slot key through
-- job_runs_slot_key, the others through job_runs_other_slots_idx; two ranges of index
-- entries, however long the job's history.
SELECT * FROM job_runs
WHERE definition_id = %(definition_id)s AND scheduled_for BETWEEN %(start)s AND %(end)s
  AND trigger IN ('schedule', 'backfill')
UNION ALL
SELECT * FROM job_runs
WHERE definition_id = %(definition_id)s AND scheduled_for BETWEEN %(start)s AND %(end)s
  AND trigger NOT IN ('schedule', 'backfill')
ORDER BY scheduled_for, id;

-- name: skips_between
SELECT * FROM job_skips
WHERE definition_id = %(definition_id)s AND last_slot >= %(start)s AND first_slot <= %(end)s
ORDER BY first_slot, id;

-- name: definition_history
-- Every definition (removed ones too) that has carried this name, newest first.
SELECT * FROM job_definitions WHERE name = %(name)s ORDER BY id DESC;

-- name: reclaim_expired
-- Runs whose lease expired (their worker died or froze): the attempt is recorded as lost
-- and the run goes back to the queue at once, or becomes dead when attempts are used up.
WITH expired AS (
    SELECT id, attempt, max_attempts, lease_owner, lease_token, heartbeat_at
    FROM job_runs
    WHERE status = 'running' AND lease_expires_at < %(now)s
    ORDER BY lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), runs AS (
    UPDATE job_runs AS r
    SET status = CASE WHEN e.attempt >= e.max_attempts THEN 'dead' ELSE 'queued' END,
        eligible_at = %(now)s,
        finished_at = CASE WHEN e.attempt >= e.max_attempts THEN %(now)s END,
        error = 'lease lost: worker ' || e.lease_owner || ' stopped heartbeating (last at '
                || e.heartbeat_at || ')',
        lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL,
        updated_at = %(now)s
    FROM expired AS e
    WHERE r.id = e.id
    RETURNING r.id, r.status, r.definition_id, r.error, r.scheduled_for, e.attempt,
              e.lease_token, e.lease_owner
), attempts AS (
    UPDATE job_attempts AS a
    SET outcome = 'lost', finished_at = %(now)s, error = runs.error
    FROM runs
    WHERE a.run_id = runs.id AND a.attempt = runs.attempt AND a.lease_token = runs.lease_token
)
SELECT runs.id, runs.status, runs.definition_id, runs.lease_owner, runs.error,
       runs.scheduled_for, runs.attempt, d.name AS job
FROM runs JOIN job_definitions AS d ON d.id = runs.definition_id;

-- name: lock_claimable_groups
-- [group limit] Run just before claim_runs, in the same transaction: locks the
-- rows of the limited groups that have due runs, in name order, so that the claims of one
-- group take turns across every tick; claim_runs, a new statement, then counts the group's
-- running runs with everything the previous claim committed. (A lock taken inside the
-- claim statement itself would not do: its snapshot predates the wait, so two claims could
-- each count fewer than the limit.) Groups without due runs are not locked.
SELECT g.name FROM job_groups AS g
WHERE EXISTS (
    SELECT 1 FROM job_definitions AS d JOIN job_runs AS r ON r.definition_id = d.id
    WHERE d.group_name = g.name AND r.status IN ('queued', 'failed')
      AND r.eligible_at <= %(now)s)
ORDER BY g.name
FOR UPDATE OF g;

-- name: claim_plan
-- Run in the claim's transaction just before claim_runs (SET LOCAL: until it ends): the
-- claim is planned as the one range scan of job_runs_claim_idx it is written for. Without
-- statistics (a table filled since the last ANALYZE) or with a short queue, the planner
-- would rather read every waiting run and sort them; that reads the whole queue for every
-- claim, and draining a backlog becomes quadratic. These settings only price the other
-- plans out (they stay possible), and the transaction ends right after the claim.
SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true),
       set_config('enable_sort', 'off', true), set_config('enable_hashjoin', 'off', true),
       set_config('enable_mergejoin', 'off', true),
       -- (the price of what is priced out would otherwise make the claim look expensive
       -- enough to be compiled first, which takes longer than the claim itself)
       set_config('jit', 'off', true),
       -- `generic`, on a connection whose pass runs prepared statements (Store._later):
       -- planned once for every later execution. Left to choose, the server keeps planning
       -- the claim again at each execution (its generic plan, priced with the settings
       -- above, looks dearer than the custom ones), which is half its time. The generic
       -- plan is the same range scan (tests/integration/test_claim_plan.py).
       set_config('plan_cache_mode', CASE WHEN %(generic)s::boolean THEN 'force_generic_plan'
                                          ELSE current_setting('plan_cache_mode') END, true);

-- name: claim_runs
-- Claim due runs in one short statement that commits at once, and open their attempts in
-- the same statement. An exclusive run (overlap skip or queue) is claimed only while no
-- other exclusive run of its job is running, at most one per job per claim;
-- job_runs_exclusive_running_key backs this up. Backfilled runs come after every other due
-- run. The candidates are the first `scan` entries of job_runs_claim_idx, in its order
-- (ORDER BY is its key, eligible_at <= now a condition on it): a range scan that stops
-- after them however long the queue (claim_plan sees to it that nothing else is chosen).
-- A run of a limited group is claimed only within the group's free slots (the parts marked
-- [group limit]; lock_claimable_groups runs first, in the same transaction).
WITH group_room AS (
    -- [group limit] each limited group's free slots: its limit minus its runs holding a
    -- lease now
    -- (the running runs are read from job_runs_running_idx, as few as run at once: never
    -- a job's queue or history)
    SELECT g.name, g.max_running - coalesce(busy.n, 0) AS room
    FROM job_groups AS g
    LEFT JOIN (
        SELECT bd.group_name, count(*) AS n
        FROM job_runs AS br JOIN job_definitions AS bd ON bd.id = br.definition_id
        WHERE br.status = 'running' AND br.started_at IS NOT NULL
          AND bd.group_name IS NOT NULL
        GROUP BY bd.group_name
    ) AS busy ON busy.group_name = g.name
), candidates AS MATERIALIZED (
    SELECT r.id, r.definition_id, r.exclusive, r.eligible_at, r.trigger = 'backfill' AS late
    FROM job_runs AS r
    WHERE r.status IN ('queued', 'failed')
      AND r.eligible_at <= %(now)s
      -- one look at the run's job, a subquery evaluated per row of the index scan (not a
      -- join the planner could start from): only what this worker can execute (a command,
      -- or a handler it has loaded; the others wait, attempts untouched, for a worker that
      -- has it), and a paused job's runs wait (a manual trigger still runs)
      AND (SELECT (kd.kind = 'command' OR kd.handler = ANY(%(handlers)s::text[]))
                  AND (r.trigger = 'manual' OR kd.paused_at IS NULL
                       OR kd.paused_until <= %(now)s)
                  -- [group limit] a run of a group with no free slot waits (never failed)
                  AND (kd.group_name IS NULL OR NOT EXISTS (
                      SELECT 1 FROM group_room AS fr
                      WHERE fr.name = kd.group_name AND fr.room <= 0))
           FROM job_definitions AS kd WHERE kd.id = r.definition_id)
      -- an exclusive run only while no exclusive run of its job runs: one probe of
      -- job_runs_exclusive_running_key per exclusive candidate (written as a CASE so that
      -- it is never hashed from every running run instead)
      AND CASE WHEN r.exclusive THEN NOT EXISTS (
          SELECT 1 FROM job_runs AS o
          WHERE o.definition_id = r.definition_id AND o.status = 'running' AND o.exclusive)
          ELSE true END
    ORDER BY r.trigger = 'backfill', r.eligible_at, r.id
    LIMIT %(scan)s
    FOR UPDATE OF r SKIP LOCKED
), picked AS (
    SELECT id, definition_id, late, eligible_at FROM (
        SELECT id, definition_id, exclusive, eligible_at, late,
               row_number() OVER (PARTITION BY definition_id, exclusive
                                  ORDER BY late, eligible_at, id) AS rank
        FROM candidates
    ) AS ranked
    WHERE NOT exclusive OR rank = 1
    ORDER BY late, eligible_at, id
    LIMIT %(limit)s
), within_groups AS (
    -- [group limit] of the picked runs, at most each group's free slots
    -- (the few picked runs, each its job's group looked up by primary key)
    SELECT id FROM (
        SELECT p.id, wr.room,
               row_number() OVER (PARTITION BY wr.name
                                  ORDER BY p.late, p.eligible_at, p.id) AS n
        FROM picked AS p
        LEFT JOIN group_room AS wr ON wr.name = (
            SELECT pd.group_name FROM job_definitions AS pd WHERE pd.id = p.definition_id)
    ) AS numbered
    WHERE room IS NULL OR n <= room
), claimed AS (
    UPDATE job_runs AS r
    SET status = 'running', attempt = r.attempt + 1, lease_owner = %(worker)s,
        -- (a job without a lease, written around the CLI's checks, is held long enough to
        -- record that it cannot run)
        lease_token = gen_random_uuid(),
        lease_expires_at = %(now)s + coalesce(d.lease, interval '60 seconds'),
        heartbeat_at = %(now)s, started_at = %(now)s, finished_at = NULL,
        cancel_requested_at = NULL, tick_id = %(tick_id)s, updated_at = %(now)s,
        -- (the new attempt has printed nothing yet: `logs` must not show the last one's)
        output_tail = NULL, output_bytes = NULL
    FROM job_definitions AS d
    -- the picked runs by id: an array looked up in the primary key, never a join that
    -- could read the table
    WHERE r.id = ANY(ARRAY(SELECT id FROM within_groups)) AND d.id = r.definition_id
    RETURNING r.id, r.definition_id, r.scheduled_for, r.trigger, r.attempt, r.max_attempts,
              r.lease_token, r.lease_owner, r.started_at, coalesce(r.payload, d.payload)
              AS payload, d.name, d.kind, d.command, d.handler, d.timeout, d.lease, d.backoff,
              d.backoff_max, cardinality(d.notify_urls) > 0 AS notifies
), attempts AS (
    INSERT INTO job_attempts (run_id, attempt, worker, lease_token, started_at)
    SELECT id, attempt, lease_owner, lease_token, started_at FROM claimed
)
SELECT * FROM claimed;

-- name: claim_runs_by_id
-- claim_runs for the given runs only (`cronjobs trigger --run`): looked up by id, with the
-- same rules (due, executable by this worker, not paused, exclusivity, group limits).
WITH group_room AS (
    -- [group limit] as in claim_runs
    -- (the running runs are read from job_runs_running_idx, as few as run at once: never
    -- a job's queue or history)
    SELECT g.name, g.max_running - coalesce(busy.n, 0) AS room
    FROM job_groups AS g
    LEFT JOIN (
        SELECT bd.group_name, count(*) AS n
        FROM job_runs AS br JOIN job_definitions AS bd ON bd.id = br.definition_id
        WHERE br.status = 'running' AND br.started_at IS NOT NULL
          AND bd.group_name IS NOT NULL
        GROUP BY bd.group_name
    ) AS busy ON busy.group_name = g.name
), candidates AS MATERIALIZED (
    SELECT r.id, r.definition_id, r.exclusive, r.eligible_at, r.trigger = 'backfill' AS late
    FROM job_runs AS r
    WHERE r.id = ANY(%(run_ids)s::bigint[])
      AND r.status IN ('queued', 'failed')
      AND r.eligible_at <= %(now)s
      AND (SELECT (kd.kind = 'command' OR kd.handler = ANY(%(handlers)s::text[]))
                  AND (r.trigger = 'manual' OR kd.paused_at IS NULL
                       OR kd.paused_until <= %(now)s)
                  -- [group limit] a run of a group with no free slot waits (never failed)
                  AND (kd.group_name IS NULL OR NOT EXISTS (
                      SELECT 1 FROM group_room AS fr
                      WHERE fr.name = kd.group_name AND fr.room <= 0))
           FROM job_definitions AS kd WHERE kd.id = r.definition_id)
      AND NOT (r.exclusive AND EXISTS (
          SELECT 1 FROM job_runs AS o
          WHERE o.definition_id = r.definition_id AND o.status = 'running' AND o.exclusive))
    ORDER BY r.id
    FOR UPDATE OF r SKIP LOCKED
), picked AS (
    SELECT id, definition_id, late, eligible_at FROM (
        SELECT id, definition_id, exclusive, eligible_at, late,
               row_number() OVER (PARTITION BY definition_id, exclusive
                                  ORDER BY late, eligible_at, id) AS rank
        FROM candidates
    ) AS ranked
    WHERE NOT exclusive OR rank = 1
    ORDER BY late, eligible_at, id
    LIMIT %(limit)s
), within_groups AS (
    -- [group limit] as in claim_runs
    -- (the few picked runs, each its job's group looked up by primary key)
    SELECT id FROM (
        SELECT p.id, wr.room,
               row_number() OVER (PARTITION BY wr.name
                                  ORDER BY p.late, p.eligible_at, p.id) AS n
        FROM picked AS p
        LEFT JOIN group_room AS wr ON wr.name = (
            SELECT pd.group_name FROM job_definitions AS pd WHERE pd.id = p.definition_id)
    ) AS numbered
    WHERE room IS NULL OR n <= room
), claimed AS (
    UPDATE job_runs AS r
    SET status = 'running', attempt = r.attempt + 1, lease_owner = %(worker)s,
        -- (a job without a lease, written around the CLI's checks, is held long enough to
        -- record that it cannot run)
        lease_token = gen_random_uuid(),
        lease_expires_at = %(now)s + coalesce(d.lease, interval '60 seconds'),
        heartbeat_at = %(now)s, started_at = %(now)s, finished_at = NULL,
        cancel_requested_at = NULL, tick_id = %(tick_id)s, updated_at = %(now)s,
        -- (the new attempt has printed nothing yet: `logs` must not show the last one's)
        output_tail = NULL, output_bytes = NULL
    FROM job_definitions AS d
    -- the picked runs by id: an array looked up in the primary key, never a join that
    -- could read the table
    WHERE r.id = ANY(ARRAY(SELECT id FROM within_groups)) AND d.id = r.definition_id
    RETURNING r.id, r.definition_id, r.scheduled_for, r.trigger, r.attempt, r.max_attempts,
              r.lease_token, r.lease_owner, r.started_at, coalesce(r.payload, d.payload)
              AS payload, d.name, d.kind, d.command, d.handler, d.timeout, d.lease, d.backoff,
              d.backoff_max, cardinality(d.notify_urls) > 0 AS notifies
), attempts AS (
    INSERT INTO job_attempts (run_id, attempt, worker, lease_token, started_at)
    SELECT id, attempt, lease_owner, lease_token, started_at FROM claimed
)
SELECT * FROM claimed;

-- name: waiting_for_handlers
-- Due handler runs that wait for a handler nobody loaded, per handler: not among
-- %(handlers)s (a tick's own), or when that is NULL, among the handlers of no tick started
-- after %(since)s. A paused job's runs wait for its resumption instead (as claim_runs).
-- The jobs are found first (a handler job nobody loaded), then only their waiting runs are
-- read (job_runs_active_idx), never the whole queue: every tick asks this.
SELECT d.handler, sum(w.runs)::bigint AS runs, min(w.oldest) AS oldest
FROM job_definitions AS d
CROSS JOIN LATERAL (
    SELECT count(*) AS runs, min(r.eligible_at) AS oldest
    FROM job_runs AS r
    WHERE r.definition_id = d.id AND r.status IN ('queued', 'failed')
      AND r.eligible_at <= %(now)s
      AND (r.trigger = 'manual' OR d.paused_at IS NULL OR d.paused_until <= %(now)s)
) AS w
WHERE d.kind = 'handler'
  AND (%(definition_id)s::bigint IS NULL OR d.id = %(definition_id)s::bigint)
  AND d.handler <> ALL(coalesce(%(handlers)s::text[], ARRAY(
      SELECT DISTINCT h FROM job_ticks AS t CROSS JOIN LATERAL unnest(t.handlers) AS h
      WHERE t.started_at > %(since)s)))
  AND w.runs > 0
GROUP BY d.handler
ORDER BY d.handler;

-- name: heartbeat
-- Extend the leases this worker still holds; a run missing from the result was lost.
UPDATE job_runs AS r
SET heartbeat_at = %(now)s, lease_expires_at = %(now)s + v.lease
FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[], %(leases)s::interval[])
     AS v (id, token, lease)
-- (the runs by id, an array looked up in the primary key: a condition on status would let
-- the planner read every entry of job_runs_running_idx instead, finished runs' included
-- until vacuum; the lease token, set only while a run is running, is the fence)
WHERE r.id = ANY(%(ids)s::bigint[]) AND r.id = v.id AND r.lease_token = v.token
RETURNING r.id, r.cancel_requested_at IS NOT NULL AS cancel_requested;

-- name: finish_runs
-- Record the outcomes of several attempts in one statement, each fenced by its lease
-- token: a run missing from the result had lost its lease, and nothing was recorded for
-- it. A success also ends its job's run of consecutive failures (locking the few
-- definitions that had one, in id order, so that concurrent finishes cannot deadlock).
-- The outcomes come as one JSON array of objects (one parameter: a fraction of the cost of
-- an array per column to send).
WITH v AS (
    SELECT *
    FROM jsonb_to_recordset(%(outcomes)s::jsonb)
         AS v (id bigint, token uuid, status text, outcome text, exit_code integer,
               error text, output_tail text, result jsonb, retry_secs float8,
               extra_attempts integer)
), run AS (
    UPDATE job_runs AS r
    SET status = v.status,
        eligible_at = CASE WHEN v.status IN ('queued', 'failed')
                           THEN %(now)s + make_interval(secs => v.retry_secs)
                           ELSE r.eligible_at END,
        max_attempts = r.max_attempts + v.extra_attempts,
        finished_at = CASE WHEN v.status IN ('succeeded', 'dead', 'cancelled')
                           THEN %(now)s END,
        exit_code = v.exit_code, error = v.error, output_tail = v.output_tail,
        result = v.result,
        lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL,
        updated_at = %(now)s
    FROM v
    -- by id, fenced by the lease token (set only while a run is running): see heartbeat
    WHERE r.id = ANY(ARRAY(SELECT id FROM v)) AND r.id = v.id AND r.lease_token = v.token
    RETURNING r.id, r.attempt, r.definition_id, v.token, v.status, v.outcome, v.exit_code,
              v.error, v.output_tail
), attempt AS (
    UPDATE job_attempts AS a
    SET outcome = run.outcome, finished_at = %(now)s, exit_code = run.exit_code,
        error = run.error, output_tail = run.output_tail
    FROM run
    WHERE a.run_id = run.id AND a.attempt = run.attempt AND a.lease_token = run.token
), failing AS (
    SELECT d.id FROM job_definitions AS d
    WHERE d.id IN (SELECT definition_id FROM run WHERE status = 'succeeded')
      AND d.consecutive_failures <> 0
    ORDER BY d.id
    FOR UPDATE OF d
), reset AS (
    UPDATE job_definitions AS d SET consecutive_failures = 0
    FROM failing WHERE d.id = failing.id
)
SELECT id FROM run;

-- name: run_by_id
SELECT r.*, d.name AS job FROM job_runs AS r JOIN job_definitions AS d ON d.id = r.definition_id
WHERE r.id = %(id)s;

-- name: run_by_id_for_update
SELECT r.*, d.name AS job FROM job_runs AS r JOIN job_definitions AS d ON d.id = r.definition_id
WHERE r.id = %(id)s
FOR UPDATE OF r;

-- name: attempts_of_run
SELECT * FROM job_attempts WHERE run_id = %(run_id)s ORDER BY attempt;

-- name: attempts_of_runs
SELECT * FROM job_attempts WHERE run_id = ANY(%(run_ids)s::bigint[]) ORDER BY run_id, attempt;

-- name: requeue_run
-- `cronjobs retry`: a failed, dead or cancelled run goes back to the queue now, with more
-- attempts, keeping its history. Retrying a dead run acknowledges it.
UPDATE job_runs
SET status = 'queued', eligible_at = %(now)s, max_attempts = attempt + %(attempts)s,
    finished_at = NULL, cancel_requested_at = NULL, retry_count = retry_count + 1,
    retried_at = %(now)s, updated_at = %(now)s,
    acknowledged_at = CASE WHEN status = 'dead' THEN %(now)s ELSE acknowledged_at END,
    acknowledged_by = CASE WHEN status = 'dead' THEN %(by)s ELSE acknowledged_by END
WHERE id = %(id)s
RETURNING *;

-- name: acknowledge_run
-- `cronjobs ack RUN_ID`: a person saw this dead run; status --check turns green for it.
-- (Never acknowledged before it died: a tick's clock may run a little ahead of ours.)
UPDATE job_runs
SET acknowledged_at = greatest(%(now)s, finished_at), acknowledged_by = %(by)s,
    updated_at = %(now)s
WHERE id = %(id)s AND status = 'dead'
  AND (acknowledged_at IS NULL OR acknowledged_at < finished_at)
RETURNING *;

-- name: acknowledge_dead_runs
-- `cronjobs ack --all NAME`: every dead run of the job that nobody acknowledged yet.
UPDATE job_runs
SET acknowledged_at = greatest(%(now)s, finished_at), acknowledged_by = %(by)s,
    updated_at = %(now)s
WHERE definition_id = %(definition_id)s AND status = 'dead'
  AND (acknowledged_at IS NULL OR acknowledged_at < finished_at)
RETURNING *;

-- name: insert_manual_run
-- A run outside the schedule: `cronjobs trigger`, or `cronjobs retry --force` of a run that
-- succeeded (trigger 'retry', same slot). Not covered by the slot key, on purpose.
INSERT INTO job_runs (definition_id, scheduled_for, trigger, payload, max_attempts, exclusive,
                      eligible_at, retry_of)
VALUES (%(definition_id)s, %(scheduled_for)s, %(trigger)s, %(payload)s, %(max_attempts)s,
        %(exclusive)s, %(now)s, %(retry_of)s)
RETURNING *;

-- name: cancel_waiting_run
UPDATE job_runs
SET status = 'cancelled', finished_at = %(now)s, error = 'cancelled by an operator',
    updated_at = %(now)s
WHERE id = %(id)s AND status IN ('scheduled', 'queued', 'failed')
RETURNING *;

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
FROM job_runs AS r JOIN job_definitions AS d ON d.id = r.definition_id
WHERE r.status = 'scheduled' AND r.eligible_at <= %(now)s
ORDER BY r.eligible_at, r.id
LIMIT %(limit)s
FOR UPDATE OF r SKIP LOCKED;

-- name: release_one_off_runs
-- Each due one-off run is queued (to be claimed like any run) or cancelled with the reason
-- its job's overlap policy gave.
UPDATE job_runs AS r
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
SELECT * FROM job_runs
WHERE definition_id = %(definition_id)s AND status = 'scheduled'
ORDER BY eligible_at, id;

-- name: request_cancel_run
UPDATE job_runs SET cancel_requested_at = %(now)s, updated_at = %(now)s
WHERE id = %(id)s AND status = 'running'
RETURNING *;

-- name: list_runs
SELECT r.*, d.name AS job
FROM job_runs AS r JOIN job_definitions AS d ON d.id = r.definition_id
WHERE (%(name)s::text IS NULL OR d.name = %(name)s::text)
  AND (%(statuses)s::text[] IS NULL OR r.status = ANY(%(statuses)s::text[]))
  AND (%(since)s::timestamptz IS NULL OR r.created_at >= %(since)s::timestamptz)
ORDER BY r.id DESC
LIMIT %(limit)s;

-- name: record_job_failure
-- After a failed attempt, in the transaction that records its outcome (before finish_runs)
-- and fenced like it by the run's lease token: no row means the lease was lost, and nothing
-- is counted. Counts consecutive failures, and pauses a job that keeps failing when its
-- definition asks for it. Returns whether it was paused just now. (A success ends the count
-- in finish_runs.)
WITH old AS (
    SELECT d.id, d.paused_at
    FROM job_runs AS r JOIN job_definitions AS d ON d.id = r.definition_id
    WHERE r.id = %(run_id)s AND r.lease_token = %(token)s AND r.status = 'running'
    FOR UPDATE OF d
)
UPDATE job_definitions AS d
SET consecutive_failures = d.consecutive_failures + 1,
    paused_at = CASE
        WHEN d.paused_at IS NULL AND d.pause_after_failures IS NOT NULL
             AND d.consecutive_failures + 1 >= d.pause_after_failures
        THEN %(now)s ELSE d.paused_at END,
    pause_note = CASE
        WHEN d.paused_at IS NULL AND d.pause_after_failures IS NOT NULL
             AND d.consecutive_failures + 1 >= d.pause_after_failures
        THEN 'paused after ' || (d.consecutive_failures + 1)
             || ' consecutive failures (last: ' || coalesce(%(error)s, 'unknown error') || ')'
        ELSE d.pause_note END
FROM old
WHERE d.id = old.id
RETURNING d.name, d.alert_command, d.alert_on_failure,
          (old.paused_at IS NULL AND d.paused_at IS NOT NULL) AS just_paused, d.pause_note;

-- name: record_reclaimed_failure
-- record_job_failure for a run whose expired lease reclaim_expired took over in this same
-- transaction (that takeover is its fence: the run's last holder can no longer write).
WITH old AS (
    SELECT id, paused_at FROM job_definitions WHERE id = %(definition_id)s FOR UPDATE
)
UPDATE job_definitions AS d
SET consecutive_failures = d.consecutive_failures + 1,
    paused_at = CASE
        WHEN d.paused_at IS NULL AND d.pause_after_failures IS NOT NULL
             AND d.consecutive_failures + 1 >= d.pause_after_failures
        THEN %(now)s ELSE d.paused_at END,
    pause_note = CASE
        WHEN d.paused_at IS NULL AND d.pause_after_failures IS NOT NULL
             AND d.consecutive_failures + 1 >= d.pause_after_failures
        THEN 'paused after ' || (d.consecutive_failures + 1)
             || ' consecutive failures (last: ' || coalesce(%(error)s, 'unknown error') || ')'
        ELSE d.pause_note END
FROM old
WHERE d.id = old.id
RETURNING d.name, d.alert_command, d.alert_on_failure,
          (old.paused_at IS NULL AND d.paused_at IS NOT NULL) AS just_paused, d.pause_note;

-- name: health
-- One row of numbers for `cronjobs status` and `cronjobs metrics`.
SELECT
    (SELECT max(started_at) FROM job_ticks) AS last_tick_at,
    (SELECT worker FROM job_ticks ORDER BY started_at DESC LIMIT 1) AS last_tick_worker,
    (SELECT status FROM job_ticks ORDER BY started_at DESC LIMIT 1) AS last_tick_status,
    (SELECT count(*) FROM job_ticks WHERE started_at > %(now)s - interval '1 hour')
        AS ticks_last_hour,
    (SELECT count(*) FROM job_runs
     WHERE status IN ('queued', 'failed') AND eligible_at <= %(now)s) AS backlog,
    (SELECT min(eligible_at) FROM job_runs
     WHERE status IN ('queued', 'failed') AND eligible_at <= %(now)s) AS backlog_oldest,
    (SELECT count(*) FROM job_runs WHERE status = 'running') AS running,
    (SELECT count(*) FROM job_runs
     WHERE status = 'failed' AND updated_at > %(now)s - interval '1 day') AS failed_last_day,
    (SELECT count(*) FROM job_runs
     WHERE status = 'dead' AND finished_at > %(now)s - interval '1 day') AS dead_last_day,
    (SELECT count(*) FROM job_definitions WHERE removed_at IS NULL) AS jobs,
    (SELECT count(*) FROM job_ticks
     WHERE status = 'lost' AND finished_at > %(now)s - interval '1 day') AS lost_ticks_last_day,
    (SELECT worker FROM job_ticks WHERE status = 'lost'
     ORDER BY finished_at DESC LIMIT 1) AS last_lost_tick_worker,
    (SELECT tick_at FROM job_ticks WHERE status = 'lost'
     ORDER BY finished_at DESC LIMIT 1) AS last_lost_tick_at;

-- name: running_runs
SELECT r.id, d.name AS job, r.attempt, r.lease_owner, r.started_at, r.heartbeat_at,
       r.lease_expires_at, r.cancel_requested_at
FROM job_runs AS r JOIN job_definitions AS d ON d.id = r.definition_id
WHERE r.status = 'running'
ORDER BY r.started_at;

-- name: job_stats
-- Per job: last success, last run's duration, the lateness of its last scheduled run (its
-- first attempt's start minus its slot: backfilled, manual and retried runs are not late),
-- runs by status and retries (of the runs not finished yet and those finished since
-- %(since)s), and dead runs nobody acknowledged yet. Each number is an index probe per job
-- or a range of recent rows: the cost does not grow with the history (a scrape every 15
-- seconds must not read a million old runs).
WITH recent AS (
    SELECT definition_id, status, count(*) AS n, sum(greatest(attempt - 1, 0)) AS retries
    FROM job_runs WHERE finished_at >= %(since)s
    GROUP BY definition_id, status
    UNION ALL
    SELECT definition_id, status, count(*) AS n, sum(greatest(attempt - 1, 0)) AS retries
    FROM job_runs WHERE status IN ('queued', 'running', 'failed')
    GROUP BY definition_id, status
), per_job AS (
    SELECT definition_id, jsonb_object_agg(status, n) AS runs_by_status,
           sum(retries) AS retries
    FROM (SELECT definition_id, status, sum(n) AS n, sum(retries) AS retries
          FROM recent GROUP BY definition_id, status) AS s
    GROUP BY definition_id
)
SELECT d.id, d.name, d.schedule, d.timezone, d.created_at, d.schedule_since, d.paused_at,
       d.invalid_reason,
       (SELECT max(finished_at) FROM job_runs WHERE definition_id = d.id
            AND status = 'succeeded' AND finished_at IS NOT NULL) AS last_success_at,
       last.finished_at - last.started_at AS last_duration,
       -- never negative (a run started before its slot is on time, not early)
       greatest(scheduled.started_at - scheduled.scheduled_for, interval '0')
           AS last_lateness,
       (SELECT count(*) FROM job_runs WHERE definition_id = d.id AND status = 'dead'
            AND (acknowledged_at IS NULL OR acknowledged_at < finished_at))
           AS dead_unacknowledged,
       (SELECT max(id) FROM job_runs WHERE definition_id = d.id AND status = 'dead'
            AND (acknowledged_at IS NULL OR acknowledged_at < finished_at))
           AS latest_dead_id,
       coalesce(per_job.runs_by_status, '{}'::jsonb) AS runs_by_status,
       coalesce(per_job.retries, 0) AS retries
FROM job_definitions AS d
LEFT JOIN per_job ON per_job.definition_id = d.id
-- the job's last finished run: the latest of each final status (job_runs_latest_idx)
LEFT JOIN LATERAL (
    SELECT l.started_at, l.finished_at
    FROM unnest(ARRAY['succeeded', 'dead', 'cancelled']) AS s (status)
    CROSS JOIN LATERAL (
        SELECT started_at, finished_at, id FROM job_runs
        WHERE definition_id = d.id AND status = s.status AND finished_at IS NOT NULL
        ORDER BY finished_at DESC LIMIT 1) AS l
    ORDER BY l.finished_at DESC, l.id DESC LIMIT 1
) AS last ON true
LEFT JOIN LATERAL (
    SELECT l.scheduled_for, l.started_at
    FROM unnest(ARRAY['succeeded', 'dead', 'cancelled']) AS s (status)
    CROSS JOIN LATERAL (
        SELECT r.id, r.scheduled_for, r.finished_at, a.started_at
        FROM job_runs AS r JOIN job_attempts AS a ON a.run_id = r.id AND a.attempt = 1
        WHERE r.definition_id = d.id AND r.status = s.status AND r.finished_at IS NOT NULL
          AND r.trigger = 'schedule'
        ORDER BY r.finished_at DESC LIMIT 1) AS l
    ORDER BY l.finished_at DESC, l.id DESC LIMIT 1
) AS scheduled ON true
WHERE d.removed_at IS NULL
ORDER BY d.name;

-- name: dashboard_jobs
-- One page of the dashboard's jobs table, in name order after %(after)s (keyset paging:
-- job_definitions_name_key), optionally only the names containing %(search)s; with each
-- job's last %(strip)s runs, oldest first, from job_runs_history_idx (a probe per job, never
-- its whole history).
SELECT d.*, strip.run_ids, strip.run_statuses, strip.run_slots, strip.run_times
FROM job_definitions AS d
LEFT JOIN LATERAL (
    SELECT array_agg(r.id ORDER BY r.id) AS run_ids,
           array_agg(r.status ORDER BY r.id) AS run_statuses,
           array_agg(r.scheduled_for ORDER BY r.id) AS run_slots,
           array_agg(coalesce(r.finished_at, r.started_at, r.eligible_at) ORDER BY r.id)
               AS run_times
    FROM (SELECT id, status, scheduled_for, finished_at, started_at, eligible_at
          FROM job_runs WHERE definition_id = d.id ORDER BY id DESC LIMIT %(strip)s) AS r
) AS strip ON true
WHERE d.removed_at IS NULL AND d.name > %(after)s
  AND (%(search)s::text IS NULL OR strpos(lower(d.name), lower(%(search)s::text)) > 0)
ORDER BY d.name
LIMIT %(limit)s;

-- name: count_jobs
SELECT count(*) AS n FROM job_definitions
WHERE removed_at IS NULL
  AND (%(search)s::text IS NULL OR strpos(lower(name), lower(%(search)s::text)) > 0);

-- name: prune_runs
-- One batch of finished runs older than the cutoff, in job_runs_finished_idx order from
-- just after the previous batch's last deleted run (after_at, after_id). Never a job's
-- latest run of each final status (a later one of the same status exists: one probe of
-- job_runs_latest_idx), nor one of its `keep_last` newest finished runs (that many newer
-- ones exist: at most keep_last entries of job_runs_history_idx). No batch ranks the
-- history: each looks at the rows it deletes and at the few it keeps on the way. Attempts
-- go with their run.
WITH doomed AS (
    SELECT r.id FROM job_runs AS r
    WHERE r.finished_at < %(cutoff)s AND r.finished_at >= %(after_at)s
      AND (r.finished_at, r.id) > (%(after_at)s, %(after_id)s)
      AND r.status IN ('succeeded', 'dead', 'cancelled')
      AND EXISTS (
          SELECT 1 FROM job_runs AS o
          WHERE o.definition_id = r.definition_id AND o.status = r.status
            AND o.finished_at >= r.finished_at
            AND (o.finished_at > r.finished_at OR o.id > r.id))
      AND (SELECT count(*) FROM (
               SELECT 1 FROM job_runs AS o
               WHERE o.definition_id = r.definition_id AND o.id > r.id
                 AND o.status IN ('succeeded', 'dead', 'cancelled')
               LIMIT %(keep_last)s) AS newer) >= %(keep_last)s
    ORDER BY r.finished_at, r.id
    LIMIT %(batch)s
    FOR UPDATE OF r SKIP LOCKED
)
-- (the doomed runs by id: an array looked up in the primary key, never a join that could
-- read the table, as PostgreSQL 18 would plan it)
DELETE FROM job_runs WHERE id = ANY(ARRAY(SELECT id FROM doomed))
RETURNING id, finished_at;

-- name: count_prunable_runs
-- What prune_runs would delete, all batches at once (`prune --dry-run`): one statement, so
-- ranking every finished run once is the cheapest way (15 times faster over 50,000 runs
-- than probing the indexes for each, as a batch does).
WITH keep AS (
    SELECT id FROM (
        SELECT id, row_number() OVER (PARTITION BY definition_id ORDER BY id DESC) AS n,
               row_number() OVER (PARTITION BY definition_id, status
                                  ORDER BY finished_at DESC NULLS LAST, id DESC) AS by_kind
        FROM job_runs
        WHERE status IN ('succeeded', 'dead', 'cancelled')
    ) AS ranked
    WHERE n <= %(keep_last)s OR by_kind = 1
)
SELECT count(*) AS n FROM job_runs
WHERE status IN ('succeeded', 'dead', 'cancelled') AND finished_at < %(cutoff)s
  AND id NOT IN (SELECT id FROM keep);

-- name: prune_skips
DELETE FROM job_skips WHERE id IN (
    SELECT id FROM job_skips WHERE decided_at < %(cutoff)s ORDER BY id LIMIT %(batch)s)
RETURNING id;

-- name: prune_ticks
DELETE FROM job_ticks WHERE id IN (
    SELECT id FROM job_ticks WHERE started_at < %(cutoff)s AND status <> 'running'
    ORDER BY id LIMIT %(batch)s)
RETURNING id;

-- name: listen_trigger
-- `cronjobs worker` wakes up at once when a run is triggered.
LISTEN cronjobs_trigger;

-- name: notify_trigger
-- Delivered when the triggering transaction commits.
NOTIFY cronjobs_trigger;

-- name: set_group_limit
-- `cronjobs group set NAME --max-running N`: create or change a group's limit.
INSERT INTO job_groups (name, max_running, created_at, updated_at)
VALUES (%(name)s, %(max_running)s, %(now)s, %(now)s)
ON CONFLICT (name) DO UPDATE
SET max_running = excluded.max_running, updated_at = excluded.updated_at;

-- name: remove_group_limit
-- `cronjobs group remove NAME`: its jobs stay in the group, without a limit.
DELETE FROM job_groups WHERE name = %(name)s RETURNING name;

-- name: group_usage
-- Every group (limited, or named by a job), or one: its limit (NULL: none), its jobs, its
-- runs holding a lease, and its due runs that wait.
WITH names AS (
    SELECT name FROM job_groups
    UNION
    SELECT group_name FROM job_definitions
    WHERE group_name IS NOT NULL AND removed_at IS NULL
)
SELECT n.name, g.max_running,
       (SELECT count(*) FROM job_definitions AS d
        WHERE d.group_name = n.name AND d.removed_at IS NULL) AS jobs,
       (SELECT count(*) FROM job_runs AS r JOIN job_definitions AS d ON d.id = r.definition_id
        WHERE d.group_name = n.name AND r.status = 'running') AS running,
       (SELECT count(*) FROM job_runs AS r JOIN job_definitions AS d ON d.id = r.definition_id
        WHERE d.group_name = n.name AND r.status IN ('queued', 'failed')
          AND r.eligible_at <= %(now)s) AS waiting
FROM names AS n LEFT JOIN job_groups AS g ON g.name = n.name
WHERE %(name)s::text IS NULL OR n.name = %(name)s::text
ORDER BY n.name;

-- name: group_jobs
SELECT name FROM job_definitions
WHERE group_name = %(name)s AND removed_at IS NULL
ORDER BY name;

-- Notifications and live output (cronjobs/db/observe.py) ------------------------------------

-- name: notify_config
-- The webhook receivers of these jobs (only those that have any).
SELECT id, name, notify_urls, notify_on
FROM job_definitions
WHERE id = ANY (%(ids)s::bigint[]) AND cardinality(notify_urls) > 0;

-- name: previous_run_dead
-- Whether the job's last run that ended before this one died (a success after it is a
-- recovery). Walks the job's history index from this run backwards.
SELECT p.status = 'dead' AS dead
FROM job_runs AS r
JOIN LATERAL (
    SELECT q.status FROM job_runs AS q
    WHERE q.definition_id = r.definition_id AND q.id < r.id
      AND q.status IN ('succeeded', 'dead', 'cancelled')
    ORDER BY q.id DESC
    LIMIT 1
) AS p ON true
WHERE r.id = %(run_id)s;

-- name: record_deliveries
INSERT INTO job_notifications (run_id, attempt, event, target, status, tries, http_status,
                               error, sent_at)
SELECT v.run_id, v.attempt, v.event, v.target, v.status, v.tries, v.http_status, v.error,
       v.sent_at
FROM unnest(%(run_ids)s::bigint[], %(attempts)s::integer[], %(events)s::text[],
            %(targets)s::text[], %(statuses)s::text[], %(tries)s::integer[],
            %(http_statuses)s::integer[], %(errors)s::text[], %(sent_ats)s::timestamptz[])
     AS v (run_id, attempt, event, target, status, tries, http_status, error, sent_at)
WHERE EXISTS (SELECT 1 FROM job_runs AS r WHERE r.id = v.run_id)
RETURNING id;

-- name: deliveries_of_run
SELECT id, run_id, attempt, event, target, status, tries, http_status, error, sent_at
FROM job_notifications WHERE run_id = %(run_id)s ORDER BY id;

-- name: write_live_output
-- The output of running attempts so far, each fenced by its lease token. Changes no
-- indexed column: a HOT update, like a heartbeat.
UPDATE job_runs AS r
SET output_tail = v.tail, output_bytes = v.bytes
FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[], %(tails)s::text[], %(bytes)s::bigint[])
     AS v (id, token, tail, bytes)
WHERE r.id = v.id AND r.lease_token = v.token AND r.status = 'running'
RETURNING r.id;

-- name: live_output
SELECT r.id, r.status, r.attempt, r.max_attempts, r.output_tail, r.output_bytes, r.error,
       r.exit_code, r.eligible_at, r.finished_at, d.name AS job
FROM job_runs AS r JOIN job_definitions AS d ON d.id = r.definition_id
WHERE r.id = %(id)s;
