-- Migration 7: webhook notifications per job (and a record of every delivery), and the
-- output of a running run, flushed with its heartbeats (`cronjobs logs --follow`).

-- Where to POST (secrets: never printed unmasked) and on which events.
ALTER TABLE job_definitions
    ADD COLUMN notify_urls text[] NOT NULL DEFAULT '{}'
        CONSTRAINT job_definitions_notify_urls_check
        CHECK (cardinality(notify_urls) <= 10),
    ADD COLUMN notify_on text[] NOT NULL DEFAULT '{dead,recovery}'
        CONSTRAINT job_definitions_notify_on_check
        CHECK (notify_on <@ ARRAY['dead', 'failure', 'recovery']::text[]);

-- Bytes of output the current attempt has printed so far (its tail is output_tail).
ALTER TABLE job_runs ADD COLUMN output_bytes bigint;

-- One row per notification sent (or tried) about a run: to which receiver (masked), on
-- which event, how it went.
CREATE TABLE job_notifications (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id       bigint NOT NULL REFERENCES job_runs (id) ON DELETE CASCADE,
    attempt      integer NOT NULL,
    event        text NOT NULL
        CONSTRAINT job_notifications_event_check
        CHECK (event IN ('dead', 'failure', 'recovery')),
    target       text NOT NULL,
    status       text NOT NULL
        CONSTRAINT job_notifications_status_check
        CHECK (status IN ('sent', 'failed')),
    tries        integer NOT NULL CONSTRAINT job_notifications_tries_check CHECK (tries >= 0),
    http_status  integer,
    error        text,
    sent_at      timestamptz NOT NULL
);

CREATE INDEX job_notifications_run_idx ON job_notifications (run_id);
