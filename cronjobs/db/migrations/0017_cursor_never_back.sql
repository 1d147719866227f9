-- Migration 17: the cursor never moves back, and the database refuses a write that would.
--
-- A schedule or zone change restarted a job's cursor at the database's now, which is behind
-- the cursor after ticks that ran ahead (`tick --allow-future --now ...`) or after the
-- database's clock stepped back (a failover, a restored machine, a clock step): the slots in
-- between were decided again, and ran twice, once their first runs had moved to the
-- history (the queue's slot key covers the queue only). cronjobs now continues a changed
-- schedule, and a job defined again under a removed job's name, from the later of now and
-- where the cursor was; this trigger refuses any other writer that would move it back.
--
-- A current job that already starts before where a removed job of its name left off (defined
-- again after a clock step) continues from there: its cursor only moves forward (the next
-- tick works out its next slot from it).
UPDATE job_definitions AS d
SET cursor_at = earlier.cursor_at
FROM (SELECT name, max(cursor_at) AS cursor_at FROM job_definitions
      WHERE removed_at IS NOT NULL GROUP BY name) AS earlier
WHERE d.removed_at IS NULL AND d.name = earlier.name AND d.cursor_at < earlier.cursor_at;

-- The cursor never moves back: every slot up to it is decided, and a slot decided is never
-- decided again, whoever writes the row (a schedule edit, a tick whose instant is behind the
-- cursor, a statement typed by hand), nor by a definition that takes over a removed one's
-- name (it starts where the latest of them left off). Seeding history on purpose (tests,
-- benchmarks) sets cronjobs.rewind_cursor to 'on' in its session: the slots in between are
-- then decided again.
CREATE FUNCTION cronjobs_cursor_never_back() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    left_off timestamptz;
BEGIN
    IF current_setting('cronjobs.rewind_cursor', true) = 'on' THEN
        RETURN NEW;
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.cursor_at < OLD.cursor_at THEN
        RAISE EXCEPTION 'the cursor of job % would move back from % to %: the slots in '
                        'between were decided, and a slot is never decided twice',
                        NEW.name, OLD.cursor_at, NEW.cursor_at
            USING ERRCODE = 'CJ001';
    END IF;
    IF TG_OP = 'INSERT' OR NEW.name <> OLD.name THEN
        SELECT max(cursor_at) INTO left_off FROM job_definitions
        WHERE name = NEW.name AND id <> NEW.id;
        IF NEW.cursor_at < left_off THEN
            RAISE EXCEPTION 'job % would start at %, before %, where a job of that name left '
                            'off: a slot is never decided twice',
                            NEW.name, NEW.cursor_at, left_off
                USING ERRCODE = 'CJ001';
        END IF;
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER job_definitions_cursor_insert_check
    BEFORE INSERT ON job_definitions
    FOR EACH ROW EXECUTE FUNCTION cronjobs_cursor_never_back();
-- (the condition spares the tick's updates, which move cursors forward, a call per row)
CREATE TRIGGER job_definitions_cursor_update_check
    BEFORE UPDATE OF cursor_at, name ON job_definitions
    FOR EACH ROW WHEN (NEW.cursor_at < OLD.cursor_at OR NEW.name <> OLD.name)
    EXECUTE FUNCTION cronjobs_cursor_never_back();
