-- The health of the storage itself: dead rows in the hot tables, what holds vacuum back, the
-- history's partitions and sizes (cronjobs/db/stores/storage.py). `status`, /healthz and
-- /metrics run these on every call: each reads catalogs and statistics views, or probes an
-- index, and none reads the history's rows (docs/explanation/storage.md, "Storage health").

-- name: hot_tables
-- The hot tables' live and dead row versions and their last vacuums, from the statistics
-- (up to date at the end of each writing transaction, give or take the stats flush).
SELECT relname::text AS name, n_live_tup AS live, n_dead_tup AS dead,
       last_autovacuum, last_vacuum, autovacuum_count
FROM pg_stat_user_tables
WHERE relid IN ('job_runs_queue'::regclass, 'job_attempts_queue'::regclass)
ORDER BY relname DESC;

-- name: xmin_holders
-- What holds back the xmin horizon of this database's tables, oldest first (by the age in
-- transactions of what it holds): sessions with a snapshot or a transaction id (of this
-- database, or WAL senders, whose hot_standby_feedback applies to every database),
-- prepared transactions, replication slots (a slot's catalog_xmin holds back the system
-- catalogs only: its kind says so). Never this session itself; only the first 80 characters
-- of a session's query. ``since``: when the transaction or the prepared transaction began
-- (NULL for slots and WAL senders: PostgreSQL does not record when they took their xmin).
SELECT kind, pid, name, usename, application_name, client_addr, state, query, xid_age,
       since
FROM (
    SELECT 'session' AS kind, a.pid, NULL::text AS name, a.usename::text AS usename,
           a.application_name, host(a.client_addr) AS client_addr, a.state,
           left(a.query, 80) AS query,
           greatest(age(a.backend_xmin), age(a.backend_xid)) AS xid_age,
           a.xact_start AS since
    FROM pg_stat_activity AS a
    WHERE (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
      AND a.pid <> pg_backend_pid()
      AND (a.datname = current_database() OR a.backend_type = 'walsender')
    UNION ALL
    SELECT 'prepared', NULL, p.gid, p.owner::text, NULL, NULL, NULL, NULL,
           age(p.transaction), p.prepared
    FROM pg_prepared_xacts AS p
    WHERE p.database = current_database()
    UNION ALL
    SELECT CASE WHEN s.xmin IS NOT NULL THEN 'replication_slot'
                ELSE 'replication_slot_catalog' END,
           s.active_pid, s.slot_name::text, NULL, NULL, NULL,
           CASE WHEN s.active THEN 'active' ELSE 'inactive' END, NULL,
           greatest(age(s.xmin), age(s.catalog_xmin)), NULL
    FROM pg_replication_slots AS s
    WHERE (s.xmin IS NOT NULL OR s.catalog_xmin IS NOT NULL)
      AND (s.database IS NULL OR s.database = current_database())
) AS holders
ORDER BY xid_age DESC, since NULLS LAST, pid NULLS LAST, name
LIMIT %(limit)s;

-- name: history_storage
-- The partitions of job_runs and job_attempts (pg_partition_tree, pg_class): how many days
-- the history has, the oldest (by its range, read from its bound), the bytes of each stage,
-- and the rows in the default partitions (counted up to %(cap)s: one page or a few, never the
-- history; the oldest by finished_at is one probe of the default partition's index).
-- Bytes: with %(exact)s, pg_total_relation_size (tables, indexes, TOAST: it opens every
-- relation and stats its files, about 0.1 ms a partition); else an estimate from
-- pg_class.relpages (as of each table's and index's last VACUUM, ANALYZE or CREATE INDEX: a
-- catalog read), for /healthz.
WITH leaves AS (
    SELECT t.kind, c.oid, c.reltoastrelid AS toast, greatest(c.relpages, 0) AS pages,
           c.relname::text AS name,
           CASE WHEN p.parentrelid = t.history THEN 'history'
                WHEN c.oid = t.queue THEN 'queue' ELSE 'kept' END AS stage,
           regexp_match(pg_get_expr(c.relpartbound, c.oid),
                        'FROM \(''([^'']*)''\) TO \(''([^'']*)''\)') AS bounds
    FROM (VALUES ('runs', 'job_runs'::regclass, 'job_runs_history'::regclass,
                  'job_runs_queue'::regclass),
                 ('attempts', 'job_attempts'::regclass, 'job_attempts_history'::regclass,
                  'job_attempts_queue'::regclass)) AS t(kind, root, history, queue)
    CROSS JOIN LATERAL pg_partition_tree(t.root) AS p
    JOIN pg_class AS c ON c.oid = p.relid
    WHERE p.isleaf
),
days AS (
    SELECT kind, name, bounds[1]::timestamptz AS from_at, bounds[2]::timestamptz AS until
    FROM leaves WHERE stage = 'history' AND bounds IS NOT NULL
),
sized AS (
    SELECT l.stage,
           CASE WHEN %(exact)s THEN pg_total_relation_size(l.oid)
                ELSE current_setting('block_size')::bigint * (
                    l.pages
                    + coalesce((SELECT greatest(t.relpages, 0) FROM pg_class AS t
                                WHERE t.oid = l.toast), 0)
                    + coalesce((SELECT sum(greatest(i.relpages, 0)) FROM pg_index AS x
                                JOIN pg_class AS i ON i.oid = x.indexrelid
                                WHERE x.indrelid = l.oid), 0))::bigint END AS bytes
    FROM leaves AS l
),
oldest AS (
    -- (of a day both tables have, job_runs' partition is named)
    SELECT name, from_at, until FROM days ORDER BY from_at, kind = 'runs' DESC, name LIMIT 1
)
SELECT
    (SELECT count(*) FROM days WHERE kind = 'runs') AS run_partitions,
    (SELECT count(*) FROM days WHERE kind = 'attempts') AS attempt_partitions,
    (SELECT name FROM oldest) AS oldest_partition,
    (SELECT from_at FROM oldest) AS oldest_from,
    (SELECT until FROM oldest) AS oldest_until,
    (SELECT coalesce(sum(bytes), 0)::bigint FROM sized WHERE stage = 'queue')
        AS queue_bytes,
    (SELECT coalesce(sum(bytes), 0)::bigint FROM sized WHERE stage = 'history')
        AS history_bytes,
    (SELECT coalesce(sum(bytes), 0)::bigint FROM sized WHERE stage = 'kept')
        AS kept_bytes,
    (SELECT count(*) FROM (SELECT FROM job_runs_history_default LIMIT %(cap)s) AS r)
        AS default_runs,
    (SELECT count(*) FROM (SELECT FROM job_attempts_history_default LIMIT %(cap)s) AS a)
        AS default_attempts,
    (SELECT min(finished_at) FROM job_runs_history_default) AS default_oldest_finished_at;
