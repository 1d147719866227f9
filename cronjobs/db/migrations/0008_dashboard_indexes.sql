-- Migration 8: what the dashboard reads, by index.

-- A job's runs of a range of slots (`explain`, the job page's timeline): the runs of the slot
-- key are found through job_runs_slot_key; the others (manual runs, forced retries) had no
-- index on their slot, so the whole history of the job was read for them. Partial: a tick's
-- scheduled runs never enter it, so materialising costs the same.
CREATE INDEX job_runs_other_slots_idx
    ON job_runs (definition_id, scheduled_for) WHERE trigger NOT IN ('schedule', 'backfill');
