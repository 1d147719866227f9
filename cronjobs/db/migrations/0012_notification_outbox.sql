-- Migration 12: webhook notifications through an outbox (docs/how-to/notifications.md).
--
-- A delivery is written 'pending' before it is sent, with the receiver and the document, and
-- stays so until the receiver takes it: ticks claim the due ones (FOR UPDATE SKIP LOCKED, a
-- claim token fencing the outcome), try them, and set the next try with exponential back-off
-- up to the delivery's deadline, when it is 'expired'. No rewrite: the new columns have no
-- default, the records written before keep their 'sent' or 'failed'.

ALTER TABLE job_notifications
    DROP CONSTRAINT job_notifications_status_check,
    ADD CONSTRAINT job_notifications_status_check
        CHECK (status IN ('pending', 'sent', 'failed', 'expired')),
    -- the receivers' idempotency key (the Cronjobs-Delivery-Id header)
    ADD COLUMN delivery_id uuid,
    -- how many times a tick took it (each a short series of tries)
    ADD COLUMN rounds integer NOT NULL DEFAULT 1
        CONSTRAINT job_notifications_rounds_check CHECK (rounds >= 0),
    -- while pending: when it is due (or its claim's end), until when it is tried, the claim
    ADD COLUMN next_attempt_at timestamptz,
    ADD COLUMN expires_at timestamptz,
    ADD COLUMN claim_token uuid,
    -- while pending: the receiver in full (a secret, never shown) and the document
    ADD COLUMN url text,
    ADD COLUMN body text,
    ADD CONSTRAINT job_notifications_pending_check
        CHECK (status <> 'pending' OR (next_attempt_at IS NOT NULL AND expires_at IS NOT NULL
                                       AND url IS NOT NULL AND body IS NOT NULL));

-- the outbox: the due deliveries, the soonest first
CREATE INDEX job_notifications_due_idx ON job_notifications (next_attempt_at)
    WHERE status = 'pending';
