-- Notifications, wake-ups and live output (cronjobs/db/stores/notifications.py).

-- name: listen_runs
-- `cronjobs worker` claims at once when a run is queued (the payload: the job's name).
LISTEN cronjobs_runs;

-- name: notify_runs
-- A run of this job was queued: delivered to every listening worker when the queueing
-- transaction commits (never if it rolls back).
SELECT pg_notify('cronjobs_runs', %(job)s::text);

-- name: notify_config
-- The webhook receivers of these jobs (only those that have any).
SELECT id, name, notify_urls, notify_on
FROM job_definitions
WHERE id = ANY (%(ids)s::bigint[]) AND cardinality(notify_urls) > 0;

-- name: previous_ended_run
-- The job's last run that ended before this one, and whether it died (a success after it
-- is a recovery). Walks the job's history index from this run backwards.
SELECT p.id, p.status = 'dead' AS dead
FROM job_runs AS r
JOIN LATERAL (
    SELECT q.id, q.status FROM job_runs AS q
    WHERE q.definition_id = r.definition_id AND q.id < r.id
      AND q.status IN ('succeeded', 'dead', 'cancelled')
    ORDER BY q.id DESC
    LIMIT 1
) AS p ON true
WHERE r.id = %(run_id)s;

-- name: enqueue_deliveries
-- The outbox (docs/how-to/notifications.md): one 'pending' delivery per receiver, written before it
-- is sent and claimed by its writer (claim_token) until %(claimed_until)s; tried until
-- %(expires_at)s. Written in the transaction that records the outcome they tell of, so
-- that both commit or neither does. Fenced like that outcome: a delivery with a lease
-- token is written only while that lease holds, and its run's row is locked until the
-- transaction ends (the outcome written next in it, by finish_runs, is then sure to be
-- recorded); one without (a run reclaim_expired took over in this same transaction) only
-- while its run exists (not pruned meanwhile). Returns each row's place in the arrays.
INSERT INTO job_notifications (run_id, attempt, event, target, url, body, status, tries,
                               rounds, sent_at, delivery_id, next_attempt_at, expires_at,
                               claim_token)
SELECT v.run_id, v.attempt, v.event, v.target, v.url, v.body, 'pending', 0, 0, %(now)s,
       gen_random_uuid(), %(claimed_until)s, %(expires_at)s, %(token)s
FROM unnest(%(run_ids)s::bigint[], %(attempts)s::integer[], %(events)s::text[],
            %(targets)s::text[], %(urls)s::text[], %(bodies)s::text[], %(leases)s::uuid[])
     WITH ORDINALITY AS v (run_id, attempt, event, target, url, body, lease, n)
WHERE CASE WHEN v.lease IS NULL
           THEN EXISTS (SELECT 1 FROM job_runs AS r WHERE r.id = v.run_id)
           ELSE EXISTS (SELECT 1 FROM job_runs_queue AS q
                        WHERE q.id = v.run_id AND q.lease_token = v.lease
                          AND q.status = 'running'
                        FOR UPDATE)
      END
ORDER BY v.n
RETURNING id, delivery_id, run_id, url, body, rounds, expires_at;

-- name: claim_deliveries
-- The due deliveries of the outbox, each taken by one caller: locked rows are skipped, and
-- a claimed row is not due again before %(claimed_until)s (a tick that died holding it
-- leaves it to be claimed then). The claim token fences the outcome (finish_deliveries).
WITH due AS (
    SELECT id FROM job_notifications
    WHERE status = 'pending' AND next_attempt_at <= %(now)s
    ORDER BY next_attempt_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE job_notifications AS n
SET claim_token = %(token)s, next_attempt_at = %(claimed_until)s
FROM due
WHERE n.id = due.id
RETURNING n.id, n.delivery_id, n.run_id, n.url, n.body, n.rounds, n.expires_at;

-- name: finish_deliveries
-- How each claimed delivery went, written only while its claim holds. Delivered: 'sent'.
-- Refused for good (an HTTP 4xx but 408, 425, 429): 'failed'. Else it stays 'pending', due
-- again after the back-off of its rounds (1, 2, 4 ... 60 minutes at most, times a jitter
-- between 0.5 and 1), at the latest at its deadline; a try at or past the deadline that
-- failed makes it 'expired'. The receiver and the document go with the last try.
WITH v AS (
    SELECT * FROM unnest(%(ids)s::bigint[], %(sent)s::boolean[], %(retry)s::boolean[],
                         %(tries)s::integer[], %(http_statuses)s::integer[],
                         %(errors)s::text[])
                  AS v (id, sent, retry, tries, http_status, error)
), decided AS (
    SELECT n.id, v.tries, v.http_status, v.error,
           CASE WHEN v.sent THEN 'sent'
                WHEN NOT v.retry THEN 'failed'
                WHEN %(now)s >= n.expires_at THEN 'expired'
                ELSE 'pending' END AS status,
           n.rounds + 1 AS rounds, n.expires_at
    FROM v JOIN job_notifications AS n ON n.id = v.id AND n.claim_token = %(token)s
)
UPDATE job_notifications AS n
SET status = d.status, rounds = d.rounds, tries = n.tries + d.tries,
    http_status = d.http_status, error = d.error, sent_at = %(now)s, claim_token = NULL,
    next_attempt_at = CASE WHEN d.status = 'pending' THEN least(
        d.expires_at,
        %(now)s::timestamptz + make_interval(
            secs => least(3600, 60 * 2 ^ least(d.rounds - 1, 12)) * (0.5 + random() / 2)))
        END,
    expires_at = CASE WHEN d.status IN ('pending', 'expired') THEN n.expires_at END,
    url = CASE WHEN d.status = 'pending' THEN n.url END,
    body = CASE WHEN d.status = 'pending' THEN n.body END
FROM decided AS d
WHERE n.id = d.id
RETURNING n.id, n.status;

-- name: deliveries_of_run
SELECT id, run_id, attempt, event, target, status, tries, http_status, error, sent_at,
       delivery_id, rounds, next_attempt_at, expires_at
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
