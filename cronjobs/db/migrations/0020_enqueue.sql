-- Migration 21: runs enqueued from the application's own transaction, with idempotency keys
-- and priorities.
--
-- - job_definitions.priority, job_runs.priority: higher first among the due runs; the
--   claim's index leads with it (negated: an ascending scan takes the highest first).
-- - job_definitions.key_window: how long after a run finished its key still returns it.
-- - job_runs.key, and job_run_keys: who holds a key now. The key's row does not move when
--   its run moves to the history or retires, so a repeat finds it wherever the run is.
-- - job_runs.trigger gains 'enqueue' (a run asked for by cronjobs_enqueue).
-- - cronjobs_add_runs, cronjobs_enqueue, cronjobs_enqueue_many (schema.sql says how).
-- Adding the columns rewrites nothing (constant defaults); their CHECKs and the trigger's
-- new CHECK read job_runs once.

ALTER TABLE job_definitions
    ADD COLUMN priority integer NOT NULL DEFAULT 0
        CONSTRAINT job_definitions_priority_check CHECK (priority BETWEEN -100 AND 100),
    ADD COLUMN key_window interval NOT NULL DEFAULT interval '1 day'
        CONSTRAINT job_definitions_key_window_check
        CHECK (key_window BETWEEN interval '0' AND interval '3650 days');

ALTER TABLE job_runs
    ADD COLUMN priority integer NOT NULL DEFAULT 0
        CONSTRAINT job_runs_priority_check CHECK (priority BETWEEN -100 AND 100),
    ADD COLUMN key text
        CONSTRAINT job_runs_key_check CHECK (length(key) BETWEEN 1 AND 200);
ALTER TABLE job_runs DROP CONSTRAINT job_runs_trigger_check;
ALTER TABLE job_runs ADD CONSTRAINT job_runs_trigger_check
    CHECK (trigger IN ('schedule', 'manual', 'retry', 'backfill', 'enqueue'));

DROP INDEX job_runs_queue_claim_idx;
CREATE INDEX job_runs_queue_claim_idx
    ON job_runs_queue ((-priority), (trigger = 'backfill'), eligible_at, id)
    WHERE status IN ('queued', 'failed');
CREATE INDEX job_runs_key_idx ON job_runs (key, definition_id) WHERE key IS NOT NULL;

CREATE TABLE job_run_keys (
    definition_id  bigint NOT NULL,
    key            text NOT NULL
        CONSTRAINT job_run_keys_key_check CHECK (length(key) BETWEEN 1 AND 200),
    run_id         bigint NOT NULL,
    expires_at     timestamptz,
    CONSTRAINT job_run_keys_pkey PRIMARY KEY (definition_id, key)
);
CREATE INDEX job_run_keys_expires_idx ON job_run_keys (expires_at)
    WHERE expires_at IS NOT NULL;

CREATE FUNCTION cronjobs_run_key_expires() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE job_run_keys AS k
    SET expires_at = NEW.finished_at + d.key_window
    FROM job_definitions AS d
    WHERE k.definition_id = NEW.definition_id AND k.key = NEW.key AND k.run_id = NEW.id
      AND d.id = NEW.definition_id
      AND k.expires_at IS DISTINCT FROM NEW.finished_at + d.key_window;
    RETURN NULL;
END $$;

CREATE TRIGGER job_runs_history_key_expires
    AFTER INSERT ON job_runs_history
    FOR EACH ROW WHEN (NEW.key IS NOT NULL) EXECUTE FUNCTION cronjobs_run_key_expires();
CREATE TRIGGER job_runs_kept_key_expires
    AFTER INSERT ON job_runs_kept
    FOR EACH ROW WHEN (NEW.key IS NOT NULL) EXECUTE FUNCTION cronjobs_run_key_expires();

-- The one way a run is asked for outside the schedule: cronjobs_enqueue and
-- cronjobs_enqueue_many (the application's, origin 'enqueue') and `cronjobs trigger`
-- (origin 'manual') all come here. Arrays of one element per run (NULL: none given for any);
-- the runs come back in the order asked. A run for a later time (run_ats) waits as
-- 'scheduled' until the tick releases it (an enqueued run is then always queued; a manual
-- one meets its job's overlap policy). exclusive: NULL for the job's own rule (overlap skip
-- or queue: core.materialise.exclusive is its Python twin). instant: the clock (NULL: now()).
--
-- A key held by a run of the job (waiting, running, or finished less than the job's
-- key_window ago) returns that run, never a second one: job_run_keys' primary key decides,
-- by INSERT ... ON CONFLICT DO NOTHING, and a key that is taken is then read
-- (a later statement: under READ COMMITTED it sees the winner's commit). With key_mode
-- 'replace', a held run that has not started yet takes the new payload, time and priority
-- (the last given in the batch); 'keep' (the default) leaves it as it is. An expired key,
-- or one whose run has retired, goes to a new run.
-- Bad input raises SQLSTATE 22023 (invalid_parameter_value), an unknown job CJ002, and
-- nothing is written. One notification on channel cronjobs_runs per job with a run due now,
-- delivered at commit.
CREATE FUNCTION cronjobs_add_runs(jobs text[], payloads jsonb[], run_ats timestamptz[],
                                  keys text[], priorities integer[], key_mode text,
                                  origin text, exclusive boolean, instant timestamptz)
    RETURNS SETOF job_runs
    LANGUAGE plpgsql
    SET search_path = public, pg_temp
    AS $$
DECLARE
    at timestamptz := coalesce(instant, now());
    n integer := coalesce(cardinality(jobs), 0);
    problem text;
    defs bigint[];
    -- the batch's keys settled so far: each key's run, and whether that run is new
    key_defs bigint[] := '{}';
    key_names text[] := '{}';
    key_ids bigint[] := '{}';
    key_fresh boolean[] := '{}';
    -- the keys held by others, and the runs they name
    held_defs bigint[];
    held_keys text[];
    held_ids bigint[];
    held_expiries timestamptz[];
    held_windows interval[];
    found job_runs[];
    holders job_runs[] := '{}';
    ids bigint[];
BEGIN
    IF n = 0 THEN
        RETURN;
    END IF;
    IF key_mode IS NULL OR key_mode NOT IN ('keep', 'replace') THEN
        RAISE EXCEPTION 'invalid key mode %: use keep or replace', quote_nullable(key_mode)
            USING ERRCODE = '22023';
    END IF;
    IF origin IS NULL OR origin NOT IN ('enqueue', 'manual') THEN
        RAISE EXCEPTION 'invalid origin %', quote_nullable(origin) USING ERRCODE = '22023';
    END IF;
    IF coalesce(cardinality(payloads), n) <> n OR coalesce(cardinality(run_ats), n) <> n
       OR coalesce(cardinality(keys), n) <> n OR coalesce(cardinality(priorities), n) <> n
    THEN
        RAISE EXCEPTION 'the arrays of runs differ in length' USING ERRCODE = '22023';
    END IF;
    -- the first bad run, if any, and what is wrong with it (the arrays are read through
    -- unnest, never by subscript: an element of a text or jsonb array is found by reading
    -- those before it)
    SELECT CASE
               WHEN v.job IS NULL THEN 'no job given'
               WHEN jsonb_typeof(v.payload) <> 'object'
                   THEN 'the payload is a JSON ' || jsonb_typeof(v.payload) || ', not an object'
               WHEN length(v.key) NOT BETWEEN 1 AND 200
                   THEN 'the key is ' || length(v.key) || ' characters long: 1 to 200'
               WHEN v.priority NOT BETWEEN -100 AND 100
                   THEN 'the priority ' || v.priority || ' is not between -100 and 100'
               ELSE 'the time ' || v.run_at || ' is more than a day in the past'
           END || CASE WHEN n > 1 THEN ' (run ' || v.i || ' of ' || n || ')' ELSE '' END
    INTO problem
    FROM unnest(jobs, payloads, run_ats, keys, priorities) WITH ORDINALITY
         AS v (job, payload, run_at, key, priority, i)
    WHERE v.job IS NULL OR jsonb_typeof(v.payload) <> 'object'
       OR length(v.key) NOT BETWEEN 1 AND 200 OR v.priority NOT BETWEEN -100 AND 100
       OR v.run_at < at - interval '1 day'
    ORDER BY v.i LIMIT 1;
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'cannot enqueue: %', problem USING ERRCODE = '22023';
    END IF;
    -- the jobs, by name (a removed job's name is no job)
    SELECT array_agg(d.id ORDER BY v.i), (array_agg(v.job ORDER BY v.i)
                                          FILTER (WHERE d.id IS NULL))[1]
    INTO defs, problem
    FROM unnest(jobs) WITH ORDINALITY AS v (job, i)
    LEFT JOIN job_definitions AS d ON d.name = v.job AND d.removed_at IS NULL;
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'no job named %', quote_literal(problem)
            USING ERRCODE = 'CJ002', HINT = 'define it first (cronjobs define)';
    END IF;

    -- Each key of the batch once: a free key is taken for a new run, in key order (two
    -- batches of the same new keys wait for each other instead of deadlocking); a taken one
    -- is read, and kept by its run, or, expired, given to a new one (the only keys locked
    -- then: never one whose run is finishing, so a finish, which writes the expiry of its
    -- run's key, never waits for an enqueue that waits for it). Again for a key that moved
    -- meanwhile (deleted as expired, or given to a new run by another batch).
    WHILE keys IS NOT NULL AND EXISTS (
        SELECT 1 FROM unnest(defs, keys) AS v (definition_id, key)
        LEFT JOIN unnest(key_defs, key_names) AS s (definition_id, key)
            ON s.definition_id = v.definition_id AND s.key = v.key
        WHERE v.key IS NOT NULL AND s.key IS NULL)
    LOOP
        WITH wanted AS (
            SELECT DISTINCT v.definition_id, v.key FROM unnest(defs, keys) AS v (definition_id, key)
            LEFT JOIN unnest(key_defs, key_names) AS s (definition_id, key)
                ON s.definition_id = v.definition_id AND s.key = v.key
            WHERE v.key IS NOT NULL AND s.key IS NULL
        ), taken AS (
            INSERT INTO job_run_keys (definition_id, key, run_id)
            SELECT definition_id, key, nextval('job_runs_id_seq') FROM wanted
            ORDER BY definition_id, key
            ON CONFLICT (definition_id, key) DO NOTHING
            RETURNING definition_id, key, run_id
        )
        SELECT key_defs || array_agg(definition_id), key_names || array_agg(key),
               key_ids || array_agg(run_id), key_fresh || array_agg(true)
        INTO key_defs, key_names, key_ids, key_fresh
        FROM taken;
        -- (a new statement: under READ COMMITTED it sees the keys committed meanwhile)
        SELECT array_agg(k.definition_id), array_agg(k.key), array_agg(k.run_id),
               array_agg(k.expires_at), array_agg(d.key_window)
        INTO held_defs, held_keys, held_ids, held_expiries, held_windows
        FROM job_run_keys AS k JOIN job_definitions AS d ON d.id = k.definition_id
        WHERE (k.definition_id, k.key) IN (
            SELECT v.definition_id, v.key FROM unnest(defs, keys) AS v (definition_id, key)
            LEFT JOIN unnest(key_defs, key_names) AS s (definition_id, key)
                ON s.definition_id = v.definition_id AND s.key = v.key
            WHERE v.key IS NOT NULL AND s.key IS NULL);
        CONTINUE WHEN held_ids IS NULL;
        -- their runs: in the queue by its primary key, else wherever they are now
        SELECT array_agg(ROW(r.*)::job_runs) INTO found
        FROM job_runs_queue AS r WHERE r.id = ANY(held_ids);
        SELECT coalesce(found, '{}') || coalesce(array_agg(ROW(r.*)::job_runs), '{}')
        INTO found
        FROM job_runs AS r
        WHERE r.id = ANY(ARRAY(SELECT h FROM unnest(held_ids) AS h
                               EXCEPT SELECT f.id FROM unnest(found) AS f));
        holders := holders || found;
        -- a key stays with its run while the run waits or runs, and for the job's
        -- key_window after it finished; else (or its run retired) it goes to a new run
        WITH judged AS (
            SELECT k.*, f.id IS NOT NULL
                        AND (f.stage = 'queue'
                             OR coalesce(k.expires_at, f.finished_at + k.key_window) > at)
                        AS kept
            FROM unnest(held_defs, held_keys, held_ids, held_expiries, held_windows)
                 AS k (definition_id, key, run_id, expires_at, key_window)
            LEFT JOIN unnest(found) AS f ON f.id = k.run_id
        ), expired AS (
            -- locked in key order, each only if it still names the run judged (else another
            -- batch took it over meanwhile: it is looked at again)
            SELECT k.definition_id, k.key FROM job_run_keys AS k
            JOIN judged AS j ON j.definition_id = k.definition_id AND j.key = k.key
            WHERE NOT j.kept AND k.run_id = j.run_id
            ORDER BY k.definition_id, k.key
            FOR UPDATE OF k
        ), retaken AS (
            UPDATE job_run_keys AS k
            SET run_id = nextval('job_runs_id_seq'), expires_at = NULL
            FROM expired AS e
            WHERE k.definition_id = e.definition_id AND k.key = e.key
            RETURNING k.definition_id, k.key, k.run_id
        )
        SELECT key_defs || array_agg(s.definition_id), key_names || array_agg(s.key),
               key_ids || array_agg(s.run_id), key_fresh || array_agg(s.fresh)
        INTO key_defs, key_names, key_ids, key_fresh
        FROM (SELECT definition_id, key, run_id, false AS fresh FROM judged WHERE kept
              UNION ALL
              SELECT definition_id, key, run_id, true FROM retaken) AS s;
    END LOOP;
    IF key_mode = 'replace' AND cardinality(holders) > 0 THEN
        -- the kept runs that have not started take the batch's last values for their key
        WITH last AS (
            SELECT DISTINCT ON (v.definition_id, v.key) v.definition_id, v.key, v.payload,
                   coalesce(v.run_at, at) AS run_at, v.priority
            FROM unnest(defs, keys, payloads, run_ats, priorities) WITH ORDINALITY
                 AS v (definition_id, key, payload, run_at, priority, i)
            WHERE v.key IS NOT NULL
            ORDER BY v.definition_id, v.key, v.i DESC
        ), replaced AS (
            UPDATE job_runs_queue AS r
            SET payload = l.payload, scheduled_for = l.run_at, eligible_at = l.run_at,
                status = CASE WHEN l.run_at > at THEN 'scheduled' ELSE 'queued' END,
                priority = coalesce(l.priority, d.priority), updated_at = at
            FROM unnest(key_defs, key_names, key_ids, key_fresh)
                     AS s (definition_id, key, run_id, fresh),
                 last AS l, job_definitions AS d
            WHERE NOT s.fresh AND l.definition_id = s.definition_id AND l.key = s.key
              AND r.id = s.run_id AND d.id = s.definition_id
              AND r.status IN ('scheduled', 'queued') AND r.attempt = 0
            RETURNING r.*
        )
        SELECT array_agg(ROW(replaced.*)::job_runs) INTO found FROM replaced;
        holders := coalesce(found, '{}') || ARRAY(
            SELECT h FROM unnest(holders) AS h
            WHERE h.id NOT IN (SELECT f.id FROM unnest(found) AS f));
    END IF;

    -- each run's id: its key's run, or a new one
    SELECT array_agg(coalesce(s.run_id, nextval('job_runs_id_seq')) ORDER BY v.i) INTO ids
    FROM unnest(defs, keys) WITH ORDINALITY AS v (definition_id, key, i)
    LEFT JOIN unnest(key_defs, key_names, key_ids) AS s (definition_id, key, run_id)
        ON s.definition_id = v.definition_id AND s.key = v.key;
    -- the new runs (a key given twice: its first run), and all in the order asked
    RETURN QUERY
    WITH made_runs AS (
        INSERT INTO job_runs_queue AS r (id, definition_id, scheduled_for, trigger, status,
                                         payload, max_attempts, exclusive, eligible_at,
                                         priority, key, created_at, updated_at)
        SELECT DISTINCT ON (v.id) v.id, d.id, coalesce(v.run_at, at), origin,
               CASE WHEN v.run_at > at THEN 'scheduled' ELSE 'queued' END, v.payload,
               d.max_attempts, coalesce(exclusive, d.overlap IN ('skip', 'queue')),
               coalesce(v.run_at, at), coalesce(v.priority, d.priority), v.key, at, at
        FROM unnest(ids, defs, payloads, run_ats, keys, priorities) WITH ORDINALITY
             AS v (id, definition_id, payload, run_at, key, priority, i)
        JOIN job_definitions AS d ON d.id = v.definition_id
        LEFT JOIN unnest(key_ids, key_fresh) AS s (run_id, fresh) ON s.run_id = v.id
        WHERE s.fresh IS DISTINCT FROM false
        ORDER BY v.id, v.i
        RETURNING r.*
    ), woken AS (
        -- a worker listening starts the runs due now: one notification per job, at commit
        SELECT count(pg_notify('cronjobs_runs', d.name)) AS jobs FROM job_definitions AS d
        WHERE d.id IN (SELECT m.definition_id FROM made_runs AS m WHERE m.status = 'queued')
    )
    SELECT r.* FROM unnest(ids) WITH ORDINALITY AS x (id, n)
    JOIN (SELECT * FROM made_runs UNION ALL SELECT * FROM unnest(holders)) AS r
        ON r.id = x.id
    CROSS JOIN woken
    ORDER BY x.n;
END $$;

-- The application's way in (docs/how-to/enqueue.md): a run of job `job` now (or at
-- run_at), by cronjobs_add_runs (above), as the owner of the tables: a role allowed only
-- these functions (deploy/roles.sql: cronjobs_enqueue) can enqueue and nothing else.
CREATE FUNCTION cronjobs_enqueue(job text, payload jsonb DEFAULT NULL,
                                 run_at timestamptz DEFAULT NULL, key text DEFAULT NULL,
                                 priority integer DEFAULT NULL, key_mode text DEFAULT 'keep',
                                 instant timestamptz DEFAULT NULL)
    RETURNS job_runs
    LANGUAGE sql SECURITY DEFINER SET search_path = public, pg_temp
    AS $$ SELECT * FROM cronjobs_add_runs(ARRAY[job], ARRAY[payload], ARRAY[run_at],
                                          ARRAY[key], ARRAY[priority], key_mode, 'enqueue',
                                          NULL, instant) $$;

-- A batch in one statement: `runs` is a JSON array of objects with the arguments of
-- cronjobs_enqueue (job, and optionally payload, run_at, key, priority); one run returned
-- per object, in order (a key given twice: one run, the first's unless key_mode is
-- 'replace').
CREATE FUNCTION cronjobs_enqueue_many(runs jsonb, key_mode text DEFAULT 'keep',
                                      instant timestamptz DEFAULT NULL)
    RETURNS SETOF job_runs
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp
    AS $$
DECLARE
    problem text;
BEGIN
    IF jsonb_typeof(runs) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'cannot enqueue: the runs are a JSON %, not an array',
                        coalesce(jsonb_typeof(runs), 'null') USING ERRCODE = '22023';
    END IF;
    SELECT CASE WHEN jsonb_typeof(e.item) <> 'object'
                THEN 'run ' || e.n || ' is a JSON ' || jsonb_typeof(e.item) || ', not an object'
                ELSE 'run ' || e.n || ' has an unknown field '
                     || quote_literal((SELECT min(f) FROM jsonb_object_keys(e.item) AS f
                                       WHERE f NOT IN ('job', 'payload', 'run_at', 'key',
                                                       'priority')))
                     || ' (use job, payload, run_at, key, priority)'
           END
    INTO problem
    FROM jsonb_array_elements(runs) WITH ORDINALITY AS e (item, n)
    WHERE jsonb_typeof(e.item) <> 'object'
       OR EXISTS (SELECT 1 FROM jsonb_object_keys(e.item) AS f
                  WHERE f NOT IN ('job', 'payload', 'run_at', 'key', 'priority'))
    ORDER BY e.n LIMIT 1;
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'cannot enqueue: %', problem USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT r.*
    FROM (SELECT array_agg(v.job ORDER BY e.n) AS jobs,
                 array_agg(v.payload ORDER BY e.n) AS payloads,
                 array_agg(v.run_at ORDER BY e.n) AS run_ats,
                 array_agg(v.key ORDER BY e.n) AS keys,
                 array_agg(v.priority ORDER BY e.n) AS priorities
          FROM jsonb_array_elements(runs) WITH ORDINALITY AS e (item, n)
          CROSS JOIN LATERAL jsonb_to_record(e.item)
              AS v (job text, payload jsonb, run_at timestamptz, key text, priority integer)
         ) AS a
    CROSS JOIN LATERAL cronjobs_add_runs(a.jobs, a.payloads, a.run_ats, a.keys,
                                         a.priorities, key_mode, 'enqueue', NULL,
                                         instant) AS r;
END $$;

-- What a role allowed only to enqueue may read: the runs enqueued, by id.
CREATE FUNCTION cronjobs_enqueued_runs(ids bigint[])
    RETURNS SETOF job_runs
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp
    AS $$ SELECT * FROM job_runs WHERE id = ANY(ids) AND trigger = 'enqueue' ORDER BY id $$;

REVOKE EXECUTE ON FUNCTION cronjobs_add_runs(text[], jsonb[], timestamptz[], text[],
                                             integer[], text, text, boolean, timestamptz),
                           cronjobs_enqueue(text, jsonb, timestamptz, text, integer, text,
                                            timestamptz),
                           cronjobs_enqueue_many(jsonb, text, timestamptz),
                           cronjobs_enqueued_runs(bigint[])
    FROM PUBLIC;
