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
-- by INSERT ... ON CONFLICT DO NOTHING, and a key that is taken is then locked and read
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
    key_defs bigint[];
    key_names text[];
    key_ids bigint[];
    key_fresh boolean[];
    held record;
    holder job_runs;
    holders job_runs[] := '{}';
    made job_runs[];
    ids bigint[];
    new_id bigint;
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
    -- the first bad run, if any, and what is wrong with it
    SELECT CASE
               WHEN jobs[i] IS NULL THEN 'no job given'
               WHEN payloads[i] IS NOT NULL AND jsonb_typeof(payloads[i]) <> 'object'
                   THEN 'the payload is a JSON ' || jsonb_typeof(payloads[i])
                        || ', not an object'
               WHEN length(keys[i]) NOT BETWEEN 1 AND 200
                   THEN 'the key is ' || length(keys[i]) || ' characters long: 1 to 200'
               WHEN priorities[i] NOT BETWEEN -100 AND 100
                   THEN 'the priority ' || priorities[i] || ' is not between -100 and 100'
               WHEN run_ats[i] < at - interval '1 day'
                   THEN 'the time ' || run_ats[i] || ' is more than a day in the past'
           END || CASE WHEN n > 1 THEN ' (run ' || i || ' of ' || n || ')' ELSE '' END
    INTO problem
    FROM generate_subscripts(jobs, 1) AS i
    WHERE jobs[i] IS NULL
       OR (payloads[i] IS NOT NULL AND jsonb_typeof(payloads[i]) <> 'object')
       OR length(keys[i]) NOT BETWEEN 1 AND 200
       OR priorities[i] NOT BETWEEN -100 AND 100
       OR run_ats[i] < at - interval '1 day'
    ORDER BY i LIMIT 1;
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'cannot enqueue: %', problem USING ERRCODE = '22023';
    END IF;
    -- the jobs, by name (a removed job's name is no job)
    SELECT array_agg(d.id ORDER BY i) INTO defs
    FROM generate_subscripts(jobs, 1) AS i
    LEFT JOIN job_definitions AS d ON d.name = jobs[i] AND d.removed_at IS NULL;
    SELECT jobs[i] INTO problem FROM generate_subscripts(jobs, 1) AS i
    WHERE defs[i] IS NULL ORDER BY i LIMIT 1;
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'no job named %', quote_literal(problem)
            USING ERRCODE = 'CJ002', HINT = 'define it first (cronjobs define)';
    END IF;

    key_defs := '{}';
    key_names := '{}';
    key_ids := '{}';
    key_fresh := '{}';
    -- each key once, in key order (two batches of the same keys wait for each other instead
    -- of deadlocking); again for a key pruned between the two statements (free now)
    WHILE keys IS NOT NULL AND EXISTS (
        SELECT 1 FROM generate_subscripts(jobs, 1) AS i
        WHERE keys[i] IS NOT NULL
          AND (defs[i], keys[i]) NOT IN (SELECT * FROM unnest(key_defs, key_names)))
    LOOP
        -- the keys nobody holds are taken here
        WITH wanted AS (
            SELECT DISTINCT defs[i] AS definition_id, keys[i] AS key
            FROM generate_subscripts(jobs, 1) AS i
            WHERE keys[i] IS NOT NULL
              AND (defs[i], keys[i]) NOT IN (SELECT * FROM unnest(key_defs, key_names))
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
        -- the keys another run holds (or held): locked, then each kept or taken over
        FOR held IN
            SELECT k.definition_id, k.key, k.run_id, k.expires_at, d.key_window
            FROM job_run_keys AS k JOIN job_definitions AS d ON d.id = k.definition_id
            WHERE (k.definition_id, k.key) IN (
                SELECT defs[i], keys[i] FROM generate_subscripts(jobs, 1) AS i
                WHERE keys[i] IS NOT NULL)
              AND (k.definition_id, k.key) NOT IN (SELECT * FROM unnest(key_defs, key_names))
            ORDER BY k.definition_id, k.key
            FOR UPDATE OF k
        LOOP
            SELECT * INTO holder FROM job_runs WHERE id = held.run_id;
            IF FOUND AND (holder.stage = 'queue'
                          OR coalesce(held.expires_at, holder.finished_at + held.key_window)
                             > at) THEN
                IF key_mode = 'replace' AND holder.stage = 'queue'
                   AND holder.status IN ('scheduled', 'queued') AND holder.attempt = 0 THEN
                    UPDATE job_runs_queue AS r
                    SET payload = v.payload, scheduled_for = v.run_at, eligible_at = v.run_at,
                        status = CASE WHEN v.run_at > at THEN 'scheduled' ELSE 'queued' END,
                        priority = coalesce(v.priority, d.priority), updated_at = at
                    FROM (SELECT payloads[i] AS payload, coalesce(run_ats[i], at) AS run_at,
                                 priorities[i] AS priority
                          FROM generate_subscripts(jobs, 1) AS i
                          WHERE defs[i] = held.definition_id AND keys[i] = held.key
                          ORDER BY i DESC LIMIT 1) AS v,
                         job_definitions AS d
                    WHERE r.id = holder.id AND r.status IN ('scheduled', 'queued')
                      AND r.attempt = 0 AND d.id = r.definition_id
                    RETURNING r.* INTO holder;
                    IF NOT FOUND THEN  -- claimed meanwhile: kept as it now is
                        SELECT * INTO holder FROM job_runs WHERE id = held.run_id;
                    END IF;
                END IF;
                holders := holders || holder;
                key_fresh := key_fresh || false;
                key_ids := key_ids || held.run_id;
            ELSE
                -- expired, or its run retired: the key goes to a new run
                UPDATE job_run_keys
                SET run_id = nextval('job_runs_id_seq'), expires_at = NULL
                WHERE definition_id = held.definition_id AND key = held.key
                RETURNING run_id INTO new_id;
                key_fresh := key_fresh || true;
                key_ids := key_ids || new_id;
            END IF;
            key_defs := key_defs || held.definition_id;
            key_names := key_names || held.key;
        END LOOP;
    END LOOP;

    -- each run's id: its key's run, or a new one
    SELECT array_agg(coalesce(m.run_id, nextval('job_runs_id_seq')) ORDER BY i) INTO ids
    FROM generate_subscripts(jobs, 1) AS i
    LEFT JOIN unnest(key_defs, key_names, key_ids) AS m (definition_id, key, run_id)
        ON m.definition_id = defs[i] AND m.key = keys[i];
    WITH made_runs AS (
        INSERT INTO job_runs_queue AS r (id, definition_id, scheduled_for, trigger, status,
                                         payload, max_attempts, exclusive, eligible_at,
                                         priority, key, created_at, updated_at)
        SELECT DISTINCT ON (ids[i]) ids[i], d.id, coalesce(run_ats[i], at), origin,
               CASE WHEN run_ats[i] > at THEN 'scheduled' ELSE 'queued' END, payloads[i],
               d.max_attempts, coalesce(exclusive, d.overlap IN ('skip', 'queue')),
               coalesce(run_ats[i], at), coalesce(priorities[i], d.priority), keys[i], at, at
        FROM generate_subscripts(jobs, 1) AS i
        JOIN job_definitions AS d ON d.id = defs[i]
        LEFT JOIN unnest(key_ids, key_fresh) AS m (run_id, fresh) ON m.run_id = ids[i]
        WHERE m.fresh IS DISTINCT FROM false
        ORDER BY ids[i], i
        RETURNING r.*
    )
    SELECT array_agg(ROW(made_runs.*)::job_runs) INTO made FROM made_runs;
    -- a worker listening starts the runs due now (one notification per job, at commit)
    PERFORM pg_notify('cronjobs_runs', d.name)
    FROM job_definitions AS d
    WHERE d.id IN (SELECT m.definition_id FROM unnest(made) AS m WHERE m.status = 'queued');
    RETURN QUERY
    SELECT r.* FROM unnest(ids) WITH ORDINALITY AS x (id, n)
    JOIN unnest(coalesce(made, '{}') || holders) AS r ON (r).id = x.id
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
