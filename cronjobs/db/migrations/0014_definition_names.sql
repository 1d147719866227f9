-- Migration 14: every definition that has carried a name, found by the name.
--
-- job_definitions_name_key holds the names of the current definitions only (removed_at
-- IS NULL); a job's page and `cronjobs explain` read every definition of the name, the
-- removed ones too (definition_history, timeline_start), which was a scan of the whole
-- table: a third of a second with 100,000 jobs, on every refresh of a job's page.
CREATE INDEX job_definitions_name_idx ON job_definitions (name, id);
