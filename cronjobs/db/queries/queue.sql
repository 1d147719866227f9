-- The queue as the executor sees it: claim, heartbeat, finish, reclaim
-- (cronjobs/db/stores/queue.py).

-- name: leases_expired
-- Whether reclaim_expired would find a run to take over at the instant (no lock taken):
-- none, the usual case, and the reclaim's transaction is not opened at all.
SELECT EXISTS (SELECT 1 FROM job_runs_queue
               WHERE status = 'running' AND lease_expires_at < %(now)s) AS expired;

-- name: reclaim_expired
-- Runs whose lease expired (their worker died or froze): the attempt is recorded as lost
-- and the run goes back to the queue at once, or becomes dead when attempts are used up.
-- (A running attempt is written nowhere but on its run's row, see claim_runs: the lost
-- attempt's row is written here, from the run as it was.)
WITH expired AS (
    SELECT id, attempt, max_attempts, lease_owner, lease_token, heartbeat_at, started_at,
           output_tail
    FROM job_runs_queue
    WHERE status = 'running' AND lease_expires_at < %(now)s
    ORDER BY lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), runs AS (
    UPDATE job_runs_queue AS r
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
              e.lease_token, e.lease_owner, e.started_at, e.output_tail
), attempts AS (
    INSERT INTO job_attempts_queue AS a (run_id, attempt, worker, lease_token, started_at,
                                         finished_at, outcome, error, output_tail)
    SELECT runs.id, runs.attempt, runs.lease_owner, runs.lease_token, runs.started_at,
           %(now)s, 'lost', runs.error, runs.output_tail
    FROM runs
    -- (a run that was never claimed, marked running by hand, has no attempt to record)
    WHERE runs.lease_owner IS NOT NULL AND runs.lease_token IS NOT NULL
      AND runs.started_at IS NOT NULL AND runs.attempt >= 1
    -- (an attempt opened by an older cronjobs, which wrote its row at the claim)
    ON CONFLICT (run_id, attempt) DO UPDATE
    SET outcome = 'lost', finished_at = %(now)s, error = excluded.error
    WHERE a.lease_token = excluded.lease_token
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
-- Each limited group is looked at alone, in subqueries evaluated per row (never joins the
-- planner could start from): its jobs until one has a due run, each job's runs read by
-- its id until the first due one. Never the queue at large, which a join of the jobs and
-- their runs read whole without claim_plan's old sort and join settings
-- (test_claim_plan.py::test_a_pass_records_its_outcomes_by_primary_key).
SELECT g.name FROM job_groups AS g
WHERE (SELECT true FROM job_definitions AS d
       WHERE d.group_name = g.name
         AND (SELECT true FROM job_runs_queue AS r
              WHERE r.definition_id = d.id
                AND cronjobs_run_is_due(r.status, r.eligible_at, %(now)s)
              LIMIT 1)
       LIMIT 1)
ORDER BY g.name
FOR UPDATE OF g;

-- name: claim_plan
-- Run in the claim's transaction just before claim_runs (SET LOCAL: until it ends): the
-- claim is planned as the one range scan of job_runs_queue_claim_idx it is written for. Without
-- statistics (a table filled since the last ANALYZE) or with a short queue, the planner
-- would rather read every waiting run through a bitmap and sort them; that reads the whole
-- queue for every claim, and draining a backlog becomes quadratic. These settings only
-- price the other plans out (they stay possible), and the transaction ends right after
-- the claim. Each stays because a plan test fails without it; the others once set here
-- (no sorts, hash or merge joins) are not needed, every plan test passes without them
-- (lock_claimable_groups, which read the queue without them, now says how it reads):
SELECT -- the bitmap scan of every waiting run, then a sort:
       -- test_claim_plan.py::test_the_claim_is_a_range_scan_bounded_by_the_batch
       set_config('enable_bitmapscan', 'off', true),
       -- a whole job_definitions read by the claim before any ANALYZE: test_query_plans.py::
       -- test_no_statement_of_a_pass_reads_a_table_whole_before_any_analyze[claim_runs]
       set_config('enable_seqscan', 'off', true),
       -- the price of what is priced out would otherwise make the claim look expensive
       -- enough to be compiled first, which takes seconds where the claim takes a
       -- millisecond (test_claim_plan.py: "JIT" not in the plan)
       set_config('jit', 'off', true),
       -- `generic`, on a connection whose pass runs prepared statements (Store._later):
       -- planned once for every later execution. Left to choose, the server keeps planning
       -- the claim again at each execution (its generic plan, priced with the settings
       -- above, looks dearer than the custom ones), which is half its time. The generic
       -- plan is the same range scan (test_claim_plan.py::
       -- test_the_prepared_claim_is_a_range_scan_bounded_by_the_batch_in_its_generic_plan).
       -- It applies to every statement with parameters in the transaction, prepared or not.
       set_config('plan_cache_mode', CASE WHEN %(generic)s::boolean THEN 'force_generic_plan'
                                          ELSE current_setting('plan_cache_mode') END, true);

-- name: claim_runs
-- Claim due runs in one short statement that commits at once: the first due runs in the queue's order or, given %(run_ids)s
-- (`cronjobs trigger --run`), those runs only, by the same rules (due, executable by this
-- worker, not paused, exclusivity, group limits). An exclusive run (overlap skip or queue)
-- is claimed only while no other exclusive run of its job is running, at most one per job
-- per claim; job_runs_queue_exclusive_running_key backs this up. Backfilled runs come after every
-- other due run. The candidates are the first `scan` entries of job_runs_queue_claim_idx, in its
-- order (ORDER BY is its key, eligible_at <= now a condition on it): a range scan that
-- stops after them however long the queue (claim_plan sees to it that nothing else is
-- chosen). Runs by id are found by the primary key instead, then put in the same order:
-- that claim is planned for its ids, never with a generic plan (QueueStore._claim_later),
-- in which the condition on %(run_ids)s is only a filter of the range scan.
-- A run of a limited group is claimed only within the group's free slots (the parts marked
-- [group limit]; lock_claimable_groups runs first, in the same transaction).
-- Given %(from_late)s, %(from_at)s and %(from_id)s, a drain's cursor, it reads only the
-- entries after that key (the parts marked [cursor]).
WITH group_room AS (
    -- [group limit] each limited group's free slots: its limit minus its runs holding a
    -- lease now
    -- (the running runs are read from job_runs_queue_running_idx, as few as run at once: never
    -- a job's queue or history)
    SELECT g.name, g.max_running - coalesce(busy.n, 0) AS room
    FROM job_groups AS g
    LEFT JOIN (
        SELECT bd.group_name, count(*) AS n
        FROM job_runs_queue AS br JOIN job_definitions AS bd ON bd.id = br.definition_id
        WHERE br.status = 'running' AND br.started_at IS NOT NULL
          AND bd.group_name IS NOT NULL
        GROUP BY bd.group_name
    ) AS busy ON busy.group_name = g.name
), candidates AS (
    SELECT r.id, r.definition_id, r.exclusive, r.eligible_at, r.trigger = 'backfill' AS late
    FROM job_runs_queue AS r
    -- (cronjobs_run_is_due, cronjobs_job_lets_run: what makes a run claimable, in schema.sql)
    WHERE cronjobs_run_is_due(r.status, r.eligible_at, %(now)s)
      AND (%(run_ids)s::bigint[] IS NULL OR r.id = ANY(%(run_ids)s::bigint[]))
      -- [cursor] from where the drain's last claim stopped: only the entries after the
      -- key (late, eligible_at, id) of the last run it claimed, a start key of the range
      -- scan (an Index Cond, not a filter) in the plan made for the given key (never a
      -- generic one: QueueStore._claim_later); NULL: from the front, the condition gone
      -- from the plan (a claim by id keeps its lookup by primary key). See ClaimLoop
      -- (cronjobs/execution/claim_loop.py) for when a drain uses it.
      AND (%(from_id)s::bigint IS NULL
           OR ((r.trigger = 'backfill'), r.eligible_at, r.id)
              > (%(from_late)s::boolean, %(from_at)s::timestamptz, %(from_id)s::bigint))
      -- one look at the run's job, a subquery evaluated per row of the index scan (not a
      -- join the planner could start from): only what this worker can execute (a command,
      -- or a handler it has loaded; the others wait, attempts untouched, for a worker that
      -- has it), and a paused job's runs wait (a manual trigger still runs)
      AND (SELECT (kd.kind = 'command' OR kd.handler = ANY(%(handlers)s::text[]))
                  AND cronjobs_job_lets_run(r.trigger, kd.paused_at, kd.paused_until,
                                            %(now)s)
                  -- [group limit] a run of a group with no free slot waits (never failed)
                  AND (kd.group_name IS NULL OR NOT EXISTS (
                      SELECT 1 FROM group_room AS fr
                      WHERE fr.name = kd.group_name AND fr.room <= 0))
           FROM job_definitions AS kd WHERE kd.id = r.definition_id)
      -- an exclusive run only while no exclusive run of its job runs (the running
      -- exclusive runs are read from job_runs_queue_exclusive_running_key, one entry per job at
      -- most)
      AND NOT (r.exclusive AND EXISTS (
          SELECT 1 FROM job_runs_queue AS o
          WHERE o.definition_id = r.definition_id AND o.status = 'running' AND o.exclusive))
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
    UPDATE job_runs_queue AS r
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
    WHERE r.id IN (SELECT id FROM within_groups) AND d.id = r.definition_id
    RETURNING r.id, r.definition_id, r.scheduled_for, r.trigger, r.attempt, r.max_attempts,
              r.eligible_at,  -- [cursor] (with trigger and id: the run's key in the claim's order)
              r.lease_token, r.lease_owner, r.started_at, coalesce(r.payload, d.payload)
              AS payload, d.name, d.kind, d.command, d.handler, d.timeout, d.lease, d.backoff,
              d.backoff_max, cardinality(d.notify_urls) > 0 AS notifies
)
-- (The attempt this opens is the run's row itself while it runs (attempt, lease_owner,
-- lease_token, started_at, heartbeat_at): its job_attempts row is written once, when it
-- ends (finish_runs, reclaim_expired), never inserted here to be deleted at the finish.
-- The view job_attempts_running (schema.sql) reads a running attempt from its run.)
SELECT * FROM claimed;

-- name: claimable_backlog
-- How many runs a claim could take now, counted up to %(limit)s, by kind: what a tick with
-- `--concurrency auto` sizes itself from (cronjobs/execution/sizing.py). The first entries
-- of job_runs_queue_claim_idx in its order, as claim_runs reads them, with the claim's one
-- look at each run's job (a command, or a handler this worker has; not paused). Group
-- limits and exclusivity are left out: a slot more or less. Run after claim_plan, in its
-- transaction (the range scan, never the queue whole). Given the drain's cursor, from
-- there on, as claim_runs (the parts marked [cursor]).
SELECT count(*) FILTER (WHERE due.kind = 'handler')::int AS handlers,
       count(*) FILTER (WHERE due.kind = 'command')::int AS commands
FROM (
    SELECT (SELECT kd.kind FROM job_definitions AS kd WHERE kd.id = r.definition_id) AS kind
    FROM job_runs_queue AS r
    WHERE cronjobs_run_is_due(r.status, r.eligible_at, %(now)s)
      -- [cursor]
      AND (%(from_id)s::bigint IS NULL
           OR ((r.trigger = 'backfill'), r.eligible_at, r.id)
              > (%(from_late)s::boolean, %(from_at)s::timestamptz, %(from_id)s::bigint))
      AND (SELECT (kd.kind = 'command' OR kd.handler = ANY(%(handlers)s::text[]))
                  AND cronjobs_job_lets_run(r.trigger, kd.paused_at, kd.paused_until,
                                            %(now)s)
           FROM job_definitions AS kd WHERE kd.id = r.definition_id)
    ORDER BY r.trigger = 'backfill', r.eligible_at, r.id
    LIMIT %(limit)s
) AS due;

-- name: heartbeat
-- Extend the leases this worker still holds; a run missing from the result was lost.
UPDATE job_runs_queue AS r
SET heartbeat_at = %(now)s, lease_expires_at = %(now)s + v.lease
FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[], %(leases)s::interval[])
     AS v (id, token, lease)
-- (the runs by id, an array looked up in the primary key: joined to the leases alone, a
-- few thousand runs are merged with the whole primary key or read whole
-- (test_claim_plan.py::test_a_heartbeat_finds_its_runs_by_primary_key); a condition on
-- status would let the planner read every entry of job_runs_queue_running_idx instead,
-- finished runs' included until vacuum. The lease token, set only while a run is running,
-- is the fence.)
WHERE r.id = ANY(%(ids)s::bigint[]) AND r.id = v.id AND r.lease_token = v.token
RETURNING r.id, r.cancel_requested_at IS NOT NULL AS cancel_requested;

-- name: finish_runs
-- The one way a run moves to the history (every path that ends a run ends here: a tick's
-- finish, and the runs that ended in the queue: an operator's cancel, a lost lease's last
-- attempt, a removed job's waiting runs; see QueueStore.move_ended).
-- Record the outcomes of several attempts in one statement, each fenced by its lease
-- token: a run missing from the result had lost its lease, and nothing was recorded for
-- it. An outcome of an id alone (no token, no status) is a run that already ended in the
-- queue, moved as it is (fenced by its final status and its lack of a lease). A run that
-- waits for a retry stays in the queue; a run that ended (succeeded, dead, cancelled)
-- moves to the history with its attempts, in this same statement: deleted from the queue,
-- inserted into job_runs (the parent routes it to its retirement day's partition: its end
-- plus cronjobs_keep). (Deleted and inserted, never an UPDATE of the partition key, which
-- would make a heartbeat or a cancel racing the move fail with a serialization error
-- instead of finding the run gone.) A success also ends its job's run of consecutive
-- failures, and the job's last_succeeded_at (or last_failed_at, for a death) moves on to
-- the latest end; the few definitions that change are locked in id order, so that
-- concurrent finishes cannot deadlock, and a job's last success is written at most once a
-- minute (a busy job's row is not a hot spot).
-- The outcomes come as one JSON array of objects (one parameter: a fraction of the cost of
-- an array per column to send).
WITH v AS (
    SELECT *
    FROM jsonb_to_recordset(%(outcomes)s::jsonb)
         AS v (id bigint, token uuid, status text, outcome text, exit_code integer,
               error text, output_tail text, result jsonb, retry_secs float8,
               extra_attempts integer)
), held AS (
    -- who ran the attempts that wait for a retry, read before waits clears the lease
    -- (only those: a retry is rare; by id, in the primary key)
    SELECT r.id, r.lease_owner FROM job_runs_queue AS r
    WHERE r.id = ANY(ARRAY(SELECT id FROM v WHERE cronjobs_run_waits(v.status)))
), waits AS (
    UPDATE job_runs_queue AS r
    SET status = v.status,
        eligible_at = %(now)s + make_interval(secs => v.retry_secs),
        max_attempts = r.max_attempts + v.extra_attempts,
        finished_at = NULL,
        exit_code = v.exit_code, error = v.error, output_tail = v.output_tail,
        result = v.result,
        lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL,
        updated_at = %(now)s
    FROM v
    -- by id, an array looked up in the primary key (joined to the outcomes alone, the
    -- pass's plan merges them with the whole primary key at every finish:
    -- test_claim_plan.py::test_a_pass_records_its_outcomes_by_primary_key), fenced by the
    -- lease token (set only while a run is running): see heartbeat
    WHERE r.id = ANY(ARRAY(SELECT id FROM v WHERE cronjobs_run_waits(v.status)))
      AND r.id = v.id AND r.lease_token = v.token
    RETURNING r.id, r.attempt, r.definition_id, r.started_at, v.token, v.status, v.outcome,
              v.exit_code, v.error, v.output_tail
), ended AS (
    DELETE FROM job_runs_queue AS r
    USING v
    WHERE r.id = ANY(ARRAY(SELECT id FROM v
                           WHERE v.status IS NULL OR NOT cronjobs_run_waits(v.status)))
      AND r.id = v.id
      AND (r.lease_token = v.token
           -- (a run that ended in the queue, moved as it is)
           OR (v.token IS NULL AND v.status IS NULL AND r.lease_token IS NULL
               AND r.status IN ('succeeded', 'dead', 'cancelled')))
    RETURNING r.*, v.token AS held_token,
              -- (the outcome given, or the run's own for one moved as it is)
              coalesce(v.status, r.status) AS final_status,
              v.outcome AS final_outcome,
              CASE WHEN v.token IS NULL THEN r.exit_code ELSE v.exit_code END
                  AS final_exit_code,
              CASE WHEN v.token IS NULL THEN r.error ELSE v.error END AS final_error,
              CASE WHEN v.token IS NULL THEN r.output_tail ELSE v.output_tail END
                  AS final_output_tail,
              CASE WHEN v.token IS NULL THEN r.result ELSE v.result END AS final_result,
              CASE WHEN v.token IS NULL THEN coalesce(r.finished_at, %(now)s)
                   ELSE %(now)s END AS final_at,
              coalesce(v.extra_attempts, 0) AS extra_attempts
), moved AS (
    INSERT INTO job_runs (id, definition_id, scheduled_for, trigger, status, payload, attempt,
                          max_attempts, exclusive, eligible_at, lease_owner, lease_token,
                          lease_expires_at, heartbeat_at, cancel_requested_at, started_at,
                          finished_at, exit_code, error, output_tail, output_bytes, result,
                          retry_count, retried_at, retry_of, acknowledged_at,
                          acknowledged_by, tick_id, created_at, updated_at, stage, retire_at)
    SELECT e.id, e.definition_id, e.scheduled_for, e.trigger, e.final_status, e.payload,
           e.attempt, e.max_attempts + e.extra_attempts, e.exclusive, e.eligible_at, NULL,
           NULL, NULL, e.heartbeat_at, e.cancel_requested_at, e.started_at, e.final_at,
           e.final_exit_code, e.final_error, e.final_output_tail, e.output_bytes,
           e.final_result, e.retry_count, e.retried_at, e.retry_of, e.acknowledged_at,
           e.acknowledged_by, e.tick_id, e.created_at, %(now)s, 'history',
           e.final_at + cronjobs_keep(e.final_status, d.keep_succeeded, d.keep_failed)
    FROM ended AS e JOIN job_definitions AS d ON d.id = e.definition_id
    RETURNING id, retire_at
), retried_attempt AS (
    -- the attempt that ended, its one row written now (claim_runs wrote none); it waits in
    -- the queue with its run
    INSERT INTO job_attempts_queue AS a (run_id, attempt, worker, lease_token, started_at,
                                         finished_at, outcome, exit_code, error, output_tail)
    SELECT w.id, w.attempt, h.lease_owner, w.token, w.started_at, %(now)s, w.outcome,
           w.exit_code, w.error, w.output_tail
    FROM waits AS w JOIN held AS h ON h.id = w.id
    -- (an attempt opened by an older cronjobs, which wrote its row at the claim)
    ON CONFLICT (run_id, attempt) DO UPDATE
    SET outcome = excluded.outcome, finished_at = excluded.finished_at,
        exit_code = excluded.exit_code, error = excluded.error,
        output_tail = excluded.output_tail
    WHERE a.lease_token = excluded.lease_token
), ended_attempts AS (
    -- the run's earlier attempts (retried, lost, interrupted), if any, leave the queue
    DELETE FROM job_attempts_queue AS a
    USING moved
    WHERE a.run_id = moved.id
    RETURNING a.*, moved.retire_at AS run_retire_at
), moved_attempts AS (
    -- into the history: the earlier attempts as they were, and the attempt that ended,
    -- its one row written now from its run (claim_runs wrote none)
    INSERT INTO job_attempts (id, run_id, attempt, worker, lease_token, started_at,
                              finished_at, outcome, exit_code, error, output_tail, stage,
                              retire_at)
    SELECT a.id, a.run_id, a.attempt, a.worker, a.lease_token, a.started_at, a.finished_at,
           a.outcome, a.exit_code, a.error, a.output_tail, 'history', a.run_retire_at
    FROM ended_attempts AS a JOIN ended AS e ON e.id = a.run_id
    -- (not the ending attempt's own row, where an older cronjobs wrote one at its claim)
    WHERE e.held_token IS NULL OR NOT (a.attempt = e.attempt AND a.lease_token = e.held_token)
    UNION ALL
    SELECT nextval('job_attempts_id_seq'), e.id, e.attempt, e.lease_owner, e.held_token,
           e.started_at, %(now)s, e.final_outcome, e.final_exit_code, e.final_error,
           e.final_output_tail, 'history', m.retire_at
    FROM ended AS e JOIN moved AS m ON m.id = e.id
    -- (a run moved as it is has no attempt ending now: its rows are all written)
    WHERE e.held_token IS NOT NULL
), run AS (
    SELECT id, definition_id, status, NULL::timestamptz AS at FROM waits
    UNION ALL
    SELECT id, definition_id, final_status, final_at FROM ended
), per_job AS (
    SELECT definition_id, max(at) FILTER (WHERE status = 'succeeded') AS succeeded,
           max(at) FILTER (WHERE status = 'dead') AS died
    FROM run GROUP BY definition_id
), changed AS (
    SELECT d.id, p.succeeded, p.died FROM job_definitions AS d JOIN per_job AS p
        ON p.definition_id = d.id
    WHERE (p.succeeded IS NOT NULL
           AND (d.consecutive_failures <> 0 OR d.last_succeeded_at IS NULL
                OR d.last_succeeded_at < p.succeeded - interval '1 minute'))
       OR p.died IS NOT NULL
    ORDER BY d.id
    FOR UPDATE OF d
), touched AS (
    UPDATE job_definitions AS d
    SET consecutive_failures = CASE WHEN c.succeeded IS NOT NULL THEN 0
                                    ELSE d.consecutive_failures END,
        last_succeeded_at = greatest(d.last_succeeded_at, c.succeeded),
        last_failed_at = greatest(d.last_failed_at, c.died)
    FROM changed AS c WHERE d.id = c.id
)
SELECT id FROM run;

-- name: record_job_failure
-- A failed attempt counted against its job: counts consecutive failures, and pauses a job
-- that keeps failing when its definition asks for it. Returns whether it was paused just
-- now. (A success ends the count in finish_runs.) Two callers, each with its own fence:
-- - after a failed attempt (run_id and token, definition_id NULL), in the transaction that
--   records its outcome (before finish_runs), fenced like it by the run's lease token: no
--   row means the lease was lost, and nothing is counted;
-- - the lost attempt of a run whose expired lease reclaim_expired took over in this same
--   transaction (definition_id, run_id NULL): that takeover is its fence (the run's last
--   holder can no longer write).
-- (The job's id is found first, by the definition's primary key or the run's; a NULL
-- definition_id leaves the run's lookup to decide.)
WITH old AS (
    SELECT d.id, d.paused_at FROM job_definitions AS d
    WHERE d.id = coalesce(%(definition_id)s::bigint,
                          (SELECT r.definition_id FROM job_runs_queue AS r
                           WHERE r.id = %(run_id)s::bigint AND r.lease_token = %(token)s::uuid
                             AND r.status = 'running'))
    FOR UPDATE
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
