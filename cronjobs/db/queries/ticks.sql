-- A tick's own record, and the runs waiting for a handler no tick loaded
-- (cronjobs/db/stores/ticks.py).

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

-- name: waiting_for_handlers
-- Due handler runs that wait for a handler nobody loaded, per handler: not among
-- %(handlers)s (a tick's own), or when that is NULL, among the handlers of no tick started
-- after %(since)s. A paused job's runs wait for its resumption instead (as claim_runs).
-- The jobs are found first (a handler job nobody loaded), then only their waiting runs are
-- read (job_runs_queue_definition_idx), never the whole queue: every tick asks this.
SELECT d.handler, sum(w.runs)::bigint AS runs, min(w.oldest) AS oldest
FROM job_definitions AS d
CROSS JOIN LATERAL (
    SELECT count(*) AS runs, min(r.eligible_at) AS oldest
    FROM job_runs_queue AS r
    WHERE r.definition_id = d.id AND cronjobs_run_is_due(r.status, r.eligible_at, %(now)s)
      AND cronjobs_job_lets_run(r.trigger, d.paused_at, d.paused_until, %(now)s)
) AS w
WHERE d.kind = 'handler'
  AND (%(definition_id)s::bigint IS NULL OR d.id = %(definition_id)s::bigint)
  AND d.handler <> ALL(coalesce(%(handlers)s::text[], ARRAY(
      SELECT DISTINCT h FROM job_ticks AS t CROSS JOIN LATERAL unnest(t.handlers) AS h
      WHERE t.started_at > %(since)s)))
  AND w.runs > 0
GROUP BY d.handler
ORDER BY d.handler;
