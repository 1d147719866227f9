-- Notifications, wake-ups and live output (cronjobs/db/stores/notifications.py).

-- name: listen_trigger
-- `cronjobs worker` wakes up at once when a run is triggered.
LISTEN cronjobs_trigger;

-- name: notify_trigger
-- Delivered when the triggering transaction commits.
NOTIFY cronjobs_trigger;

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
