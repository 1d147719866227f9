-- Least-privilege roles for cronjobs. Run as the owner of the cronjobs tables (the role
-- that ran `cronjobs migrate`), then grant the roles to login users:
--
--   psql -v ON_ERROR_STOP=1 -f deploy/roles.sql
--   CREATE ROLE tick_worker LOGIN PASSWORD '…' IN ROLE cronjobs_tick;
--   CREATE ROLE ops_person LOGIN PASSWORD '…' IN ROLE cronjobs_admin;
--
-- cronjobs_tick can run ticks (and `status`, `runs`, `show`, `explain`, `metrics`,
-- `prune`) but cannot define or change what a job runs: the columns that say what to run
-- are not writable by it, nor are group limits. cronjobs_admin can also define, apply,
-- pause, resume, remove, retry, trigger and cancel, and set group limits. Neither can
-- change the schema.
--
-- Session limits for login users (settings on a group role are not inherited), useful
-- behind PgBouncer, which does not pass cronjobs' own startup settings on:
--   ALTER ROLE tick_worker SET statement_timeout = '60s';
--   ALTER ROLE tick_worker SET lock_timeout = '10s';
--   ALTER ROLE tick_worker SET idle_in_transaction_session_timeout = '60s';

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'cronjobs_tick') THEN
        CREATE ROLE cronjobs_tick NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'cronjobs_admin') THEN
        CREATE ROLE cronjobs_admin NOLOGIN;
    END IF;
END
$$;

GRANT USAGE ON SCHEMA public TO cronjobs_tick, cronjobs_admin;
GRANT SELECT ON cronjobs_migrations TO cronjobs_tick, cronjobs_admin;

-- The tick decides slots (cursor, next slot, invalid), pauses a job that keeps failing,
-- and writes runs, attempts, skips and its own records.
GRANT SELECT ON job_definitions TO cronjobs_tick;
GRANT UPDATE (cursor_at, next_due_at, invalid_reason, paused_at, paused_until, pause_note,
              consecutive_failures)
    ON job_definitions TO cronjobs_tick;
GRANT SELECT, INSERT, UPDATE, DELETE ON job_runs, job_attempts, job_ticks TO cronjobs_tick;
GRANT SELECT, INSERT, DELETE ON job_skips TO cronjobs_tick;
-- Group limits: the tick reads them and locks a group's row while it claims (FOR UPDATE
-- needs UPDATE on one column: updated_at, which changes nothing a limit means).
GRANT SELECT, UPDATE (updated_at) ON job_groups TO cronjobs_tick;

-- An administrator does everything the tick does, and defines jobs.
GRANT cronjobs_tick TO cronjobs_admin;
GRANT INSERT, UPDATE ON job_definitions TO cronjobs_admin;
GRANT INSERT, UPDATE, DELETE ON job_groups TO cronjobs_admin;
