-- Migration 6: jobs as code.

-- Where a definition came from: NULL for one made by hand (`cronjobs define`), else the
-- source that `cronjobs apply` created it for (`--source`, the file's `source`, or the
-- file's name). `apply --prune` removes only the definitions of its own source.
ALTER TABLE job_definitions ADD COLUMN source text
    CONSTRAINT job_definitions_source_check CHECK (length(source) BETWEEN 1 AND 200);
