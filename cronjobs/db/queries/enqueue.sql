-- Runs enqueued by the application, on its own connection and in its own transaction
-- (cronjobs/db/stores/enqueue.py, for cronjobs.enqueue).

-- name: enqueue_runs
-- A batch of runs (one or thousands) in one statement: cronjobs_enqueue_many (schema.sql),
-- the batch as one JSON array, a parameter any driver sends as text.
SELECT * FROM cronjobs_enqueue_many(%(runs)s::jsonb, %(key_mode)s::text,
                                    %(now)s::timestamptz);
