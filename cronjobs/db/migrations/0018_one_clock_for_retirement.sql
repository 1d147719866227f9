-- Migration 18: one clock for retirement.
--
-- A tick decides what retires by its own instant (--now may set it), as it decides
-- everything else; the database still never drops a day that is not over by its own
-- clock. Such a day used to be refused with an error, which failed the whole tick (ticks
-- with --now ahead of the database's clock, or racing ones); it is now left for a later
-- tick: the function says whether it dropped the day. (A function's result type cannot be
-- replaced: it is made again, and whoever could execute it (deploy/roles.sql grants it to
-- cronjobs_tick) still can: the grantees are noted first, until the transaction ends.)
SELECT set_config('cronjobs.drop_history_day_grantees', coalesce(string_agg(DISTINCT
                  a.grantee::regrole::text, ','), ''), true)
FROM pg_proc AS p CROSS JOIN LATERAL aclexplode(p.proacl) AS a
WHERE p.oid = 'cronjobs_drop_history_day(date)'::regprocedure
  AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> p.proowner;

DROP FUNCTION cronjobs_drop_history_day(date);

CREATE FUNCTION cronjobs_drop_history_day(day date) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp
    AS $$
BEGIN
    IF day >= (now() AT TIME ZONE 'UTC')::date THEN
        RETURN false;
    END IF;
    EXECUTE format('DROP TABLE IF EXISTS %I, %I',
                   'job_runs_history_' || to_char(day, 'YYYYMMDD'),
                   'job_attempts_history_' || to_char(day, 'YYYYMMDD'));
    RETURN true;
END
$$;

REVOKE EXECUTE ON FUNCTION cronjobs_drop_history_day(date) FROM PUBLIC;

DO $$
DECLARE
    grantee text;
BEGIN
    FOREACH grantee IN ARRAY string_to_array(
            current_setting('cronjobs.drop_history_day_grantees', true), ',') LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION cronjobs_drop_history_day(date) TO %s',
                       grantee);
    END LOOP;
END
$$;
