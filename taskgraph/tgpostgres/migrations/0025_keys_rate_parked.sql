-- 0025: the queued tasks of a concurrency key held back by its rate leave
-- the ready indexes too (issue 27, item 2).
--
-- 0018 parks the queued tasks of a full key. A key held back by its rate
-- parked nothing, so every claim scan of the database walked its queued
-- tasks one index entry each and passed over them: 10,000 queued behind
-- a rate of 60 a minute cost every claim 10,000 entries (15-20 ms).
--
-- A rate opens by time alone, with no write, so what stays unparked must
-- not depend on how many claims the window holds. The rule 0018's
-- triggers keep becomes: the first K ready tasks of each (workflow,
-- requires) group of a key, in claim order, are not parked, where K
-- (concurrency_key_kept) is the least of
--   - max(1, max_claimed - claimed) when the key has a cap, and
--   - rate_count when it has a rate: no window ever allows more claims;
-- and no task is parked when the key has neither. A scan may take at
-- most K of a key's tasks, whatever the time, and the first K matching it
-- are among the first K of its groups, so a scan sees what it would see
-- with nothing parked. Parking stays lazy: it happens when a key closes
-- (full, or its window full at its last write: rate_open_at_ms > 0) and
-- to a task that becomes ready while it is closed; unparking keeps the
-- rule whenever K grows (a slot freed: the first parked task of each
-- group; a limit changed or lifted: all of them).
--   - tasks_key_park_entry: a task becoming ready while its key is closed
--     parks when K unparked tasks of its group are ahead of it;
--   - concurrency_keys_park: a key that closes parks every ready task
--     past the first K of each group;
--   - tasks_key_leave: an unparked task leaving the ready set unparks the
--     first parked task of its group, for a key with a cap or a rate (it
--     takes the row FOR NO KEY UPDATE, as a claim of such a key does);
--   - concurrency_keys_unpark: K grown.
CREATE OR REPLACE FUNCTION concurrency_key_kept(max_claimed integer, claimed integer, rate_count integer) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT LEAST(CASE WHEN max_claimed > 0 THEN GREATEST(1, max_claimed - claimed) ELSE 1000000000 END,
        CASE WHEN rate_count > 0 THEN rate_count ELSE 1000000000 END)
$$;

CREATE OR REPLACE FUNCTION concurrency_key_closed(max_claimed integer, claimed integer, rate_count integer, rate_open_at_ms bigint) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (max_claimed > 0 AND claimed >= max_claimed) OR (rate_count > 0 AND rate_open_at_ms > 0)
$$;

CREATE OR REPLACE FUNCTION tasks_key_park_entry() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    kept integer;
BEGIN
    -- The key's row only when it is closed: the lock waits for a writer
    -- of the key and reads its row again, so a key opened meanwhile parks
    -- nothing; the next statement sees what that writer committed.
    SELECT concurrency_key_kept(max_claimed, claimed, rate_count) INTO kept FROM concurrency_keys
        WHERE key = NEW.concurrency_key AND concurrency_key_closed(max_claimed, claimed, rate_count, rate_open_at_ms) FOR NO KEY UPDATE;
    IF FOUND AND (SELECT count(*) FROM tasks WHERE concurrency_key = NEW.concurrency_key AND concurrency_key <> '' AND NOT key_parked
            AND workflow_id = NEW.workflow_id AND requires = NEW.requires AND state = 'pending' AND due_at_ms = 0
            AND seq <> NEW.seq AND (priority > NEW.priority OR (priority = NEW.priority AND seq < NEW.seq))) >= kept THEN
        NEW.key_parked := true;
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE FUNCTION tasks_key_leave() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- A claim holds the key's row already; a cancel takes it after the
    -- task's, as whatever ends a claim does (tasks_key_release). Only the
    -- row of a key with a cap or a rate is written to (its tasks may be
    -- parked).
    PERFORM 1 FROM concurrency_keys WHERE key = OLD.concurrency_key AND (max_claimed > 0 OR rate_count > 0) FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        PERFORM 1 FROM concurrency_keys WHERE key = OLD.concurrency_key FOR KEY SHARE;
        RETURN NULL;
    END IF;
    UPDATE tasks SET key_parked = false WHERE seq = (SELECT seq FROM tasks
        WHERE concurrency_key = OLD.concurrency_key AND concurrency_key <> '' AND key_parked AND workflow_id = OLD.workflow_id AND requires = OLD.requires
            AND state = 'pending' AND due_at_ms = 0
        ORDER BY priority DESC, seq LIMIT 1);
    RETURN NULL;
END
$$;

DROP TRIGGER concurrency_keys_park ON concurrency_keys;
CREATE OR REPLACE FUNCTION concurrency_keys_park() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE tasks SET key_parked = true WHERE seq IN (
        SELECT t.seq FROM tasks t WHERE t.seq IN (
            SELECT g.seq FROM (SELECT seq, row_number() OVER (PARTITION BY workflow_id, requires ORDER BY priority DESC, seq) AS n
                FROM tasks WHERE concurrency_key = NEW.key AND concurrency_key <> '' AND NOT key_parked AND state = 'pending' AND due_at_ms = 0) g
            WHERE g.n > concurrency_key_kept(NEW.max_claimed, NEW.claimed, NEW.rate_count))
            AND t.state = 'pending' AND t.due_at_ms = 0 AND NOT t.key_parked
        FOR UPDATE SKIP LOCKED);
    RETURN NULL;
END
$$;
CREATE TRIGGER concurrency_keys_park AFTER UPDATE ON concurrency_keys FOR EACH ROW
    WHEN (concurrency_key_closed(NEW.max_claimed, NEW.claimed, NEW.rate_count, NEW.rate_open_at_ms)
        AND NOT concurrency_key_closed(OLD.max_claimed, OLD.claimed, OLD.rate_count, OLD.rate_open_at_ms))
    EXECUTE FUNCTION concurrency_keys_park();

DROP TRIGGER concurrency_keys_unpark ON concurrency_keys;
CREATE OR REPLACE FUNCTION concurrency_keys_unpark() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.max_claimed <> OLD.max_claimed OR NEW.rate_count <> OLD.rate_count THEN
        UPDATE tasks SET key_parked = false
            WHERE concurrency_key = NEW.key AND concurrency_key <> '' AND key_parked AND state = 'pending' AND due_at_ms = 0;
    ELSE
        -- A slot freed: K grew by one. Every group with a parked task has
        -- K unparked ones ahead of it, so the groups are those of the
        -- unparked tasks, and each needs its first parked task unparked.
        UPDATE tasks SET key_parked = false WHERE seq IN (
            SELECT (SELECT p.seq FROM tasks p WHERE p.concurrency_key = NEW.key AND p.concurrency_key <> '' AND p.key_parked
                    AND p.workflow_id = g.workflow_id AND p.requires = g.requires AND p.state = 'pending' AND p.due_at_ms = 0
                ORDER BY p.priority DESC, p.seq LIMIT 1)
            FROM (SELECT DISTINCT workflow_id, requires FROM tasks
                WHERE concurrency_key = NEW.key AND concurrency_key <> '' AND NOT key_parked AND state = 'pending' AND due_at_ms = 0) g);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER concurrency_keys_unpark AFTER UPDATE ON concurrency_keys FOR EACH ROW
    WHEN (concurrency_key_kept(NEW.max_claimed, NEW.claimed, NEW.rate_count) > concurrency_key_kept(OLD.max_claimed, OLD.claimed, OLD.rate_count))
    EXECUTE FUNCTION concurrency_keys_unpark();
