-- 0018: the queued tasks of a full concurrency key leave the ready indexes
-- (issue 27, item 1).
--
-- Claim-next's scans read a ready index in claim order and pass over the
-- tasks of closed keys (0017), one index entry each: 10,000 tasks queued
-- on a full key ahead of a claimable one cost a claim 10,000 entries.
-- key_parked takes such a task out of the ready indexes (their predicates
-- say NOT key_parked), so a scan walks at most one task of each group of
-- a full key: a group is the key's ready tasks of one workflow and one
-- requires, since a scan filters by those.
--
-- The rule the triggers keep, each under the key's row lock: while a key
-- has F free slots (max_claimed - claimed; no cap: no task is parked), the
-- first max(1, F) ready tasks of each of its groups, in claim order, are
-- not parked. A scan may take at most F of the key's tasks, and the first
-- F matching it are among the first F of its groups, so a scan sees what
-- it would see with nothing parked; the one kept while the key is full
-- lets a slot freed find its task without unparking anything. Unparking
-- is always safe, so a task becomes ready unparked unless its key is
-- full and its group already has an unparked task ahead of it.
--   - tasks_key_park_insert, tasks_key_park_ready: a task becoming ready
--     (created, unblocked, due, released) while its key is full parks
--     behind an unparked task of its group;
--   - concurrency_keys_park: a key that fills parks every ready task but
--     the first of each group (rows another transaction holds stay
--     unparked: SKIP LOCKED, never a wait on a task after the key);
--   - tasks_key_leave: an unparked task leaving the ready set (claimed,
--     cancelled, ...) unparks the first parked task of its group;
--   - concurrency_keys_unpark: a slot freed beyond the first unparks the
--     first parked task of each group; a cap raised or lifted unparks the
--     key's every parked task;
--   - tasks_key_unpark: a parked task that leaves the ready set is
--     unparked, so it is never parked when it comes back.
ALTER TABLE tasks ADD COLUMN key_parked BOOLEAN NOT NULL DEFAULT false;
DROP INDEX tasks_ready_plain;
DROP INDEX tasks_ready_by_priority;
DROP INDEX tasks_ready_by_workflow_priority;
CREATE INDEX tasks_ready_plain ON tasks (priority DESC, seq)
    WHERE state = 'pending' AND due_at_ms = 0 AND requires = '' AND NOT key_parked;
CREATE INDEX tasks_ready_by_priority ON tasks (priority DESC, seq, requires)
    WHERE state = 'pending' AND due_at_ms = 0 AND NOT key_parked;
CREATE INDEX tasks_ready_by_workflow_priority ON tasks (workflow_id, priority DESC, seq, requires)
    WHERE state = 'pending' AND due_at_ms = 0 AND NOT key_parked;
-- A key's ready tasks by parked or not, then group, in claim order: the
-- unparked ones a fill parks, the first parked one of a group.
CREATE INDEX tasks_ready_by_key_group ON tasks (concurrency_key, key_parked, workflow_id, requires, priority DESC, seq)
    WHERE state = 'pending' AND due_at_ms = 0 AND concurrency_key <> '';

CREATE FUNCTION tasks_key_park_entry() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- The key's row only when it is full: the lock waits for a writer of
    -- the key and reads its row again, so a key freed meanwhile parks
    -- nothing; the next statement sees what that writer committed.
    PERFORM 1 FROM concurrency_keys WHERE key = NEW.concurrency_key AND max_claimed > 0 AND claimed >= max_claimed FOR UPDATE;
    IF FOUND AND EXISTS (SELECT 1 FROM tasks WHERE concurrency_key = NEW.concurrency_key AND concurrency_key <> '' AND NOT key_parked
            AND workflow_id = NEW.workflow_id AND requires = NEW.requires AND state = 'pending' AND due_at_ms = 0
            AND seq <> NEW.seq AND (priority > NEW.priority OR (priority = NEW.priority AND seq < NEW.seq))) THEN
        NEW.key_parked := true;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER tasks_key_park_insert BEFORE INSERT ON tasks FOR EACH ROW
    WHEN (NEW.state = 'pending' AND NEW.due_at_ms = 0 AND NEW.concurrency_key <> '')
    EXECUTE FUNCTION tasks_key_park_entry();
CREATE TRIGGER tasks_key_park_ready BEFORE UPDATE OF state, due_at_ms ON tasks FOR EACH ROW
    WHEN (NEW.state = 'pending' AND NEW.due_at_ms = 0 AND NEW.concurrency_key <> '' AND NOT (OLD.state = 'pending' AND OLD.due_at_ms = 0))
    EXECUTE FUNCTION tasks_key_park_entry();

CREATE FUNCTION tasks_key_unpark() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.key_parked := false;
    RETURN NEW;
END
$$;
CREATE TRIGGER tasks_key_unpark BEFORE UPDATE OF state, due_at_ms ON tasks FOR EACH ROW
    WHEN (OLD.key_parked AND (NEW.state <> 'pending' OR NEW.due_at_ms <> 0))
    EXECUTE FUNCTION tasks_key_unpark();

CREATE FUNCTION tasks_key_leave() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- A claim holds the key's row already; a cancel takes it after the
    -- task's, as whatever ends a claim does (tasks_key_release).
    PERFORM 1 FROM concurrency_keys WHERE key = OLD.concurrency_key FOR UPDATE;
    UPDATE tasks SET key_parked = false WHERE seq = (SELECT seq FROM tasks
        WHERE concurrency_key = OLD.concurrency_key AND concurrency_key <> '' AND key_parked AND workflow_id = OLD.workflow_id AND requires = OLD.requires
            AND state = 'pending' AND due_at_ms = 0
        ORDER BY priority DESC, seq LIMIT 1);
    RETURN NULL;
END
$$;
CREATE TRIGGER tasks_key_leave AFTER UPDATE OF state, due_at_ms ON tasks FOR EACH ROW
    WHEN (OLD.state = 'pending' AND OLD.due_at_ms = 0 AND OLD.concurrency_key <> '' AND NOT OLD.key_parked
        AND (NEW.state <> 'pending' OR NEW.due_at_ms <> 0))
    EXECUTE FUNCTION tasks_key_leave();

CREATE FUNCTION concurrency_keys_park() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE tasks SET key_parked = true WHERE seq IN (
        SELECT t.seq FROM tasks t WHERE t.seq IN (
            SELECT g.seq FROM (SELECT seq, row_number() OVER (PARTITION BY workflow_id, requires ORDER BY priority DESC, seq) AS n
                FROM tasks WHERE concurrency_key = NEW.key AND concurrency_key <> '' AND NOT key_parked AND state = 'pending' AND due_at_ms = 0) g
            WHERE g.n > 1)
            AND t.state = 'pending' AND t.due_at_ms = 0 AND NOT t.key_parked
        FOR UPDATE SKIP LOCKED);
    RETURN NULL;
END
$$;
CREATE TRIGGER concurrency_keys_park AFTER UPDATE ON concurrency_keys FOR EACH ROW
    WHEN (NEW.max_claimed > 0 AND NEW.claimed >= NEW.max_claimed AND NOT (OLD.max_claimed > 0 AND OLD.claimed >= OLD.max_claimed))
    EXECUTE FUNCTION concurrency_keys_park();

CREATE FUNCTION concurrency_keys_unpark() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.max_claimed = 0 OR NEW.max_claimed > OLD.max_claimed THEN
        UPDATE tasks SET key_parked = false
            WHERE concurrency_key = NEW.key AND concurrency_key <> '' AND key_parked AND state = 'pending' AND due_at_ms = 0;
    ELSE
        -- Every group with a parked task has an unparked one: its first.
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
    WHEN (OLD.max_claimed > 0 AND (NEW.max_claimed = 0 OR NEW.max_claimed > OLD.max_claimed
        OR (NEW.claimed < OLD.claimed AND NEW.max_claimed - NEW.claimed > 1)))
    EXECUTE FUNCTION concurrency_keys_unpark();
