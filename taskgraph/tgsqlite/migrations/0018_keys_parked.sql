-- 0018: the queued tasks of a full concurrency key leave the ready indexes
-- (issue 27, item 1).
--
-- Claim-next's scans read a ready index in claim order and pass over the
-- tasks of closed keys (0017), one index entry each: 10,000 tasks queued
-- on a full key ahead of a claimable one cost a claim 10,000 entries.
-- key_parked takes such a task out of the ready indexes (their predicates
-- say key_parked = 0), so a scan walks at most one task of each group of
-- a full key: a group is the key's ready tasks of one workflow and one
-- requires, since a scan filters by those.
--
-- The rule the triggers keep (SQLite has one writer, so each runs alone):
-- while a key has F free slots (max_claimed - claimed; no cap: no task is
-- parked), the first max(1, F) ready tasks of each of its groups, in
-- claim order, are not parked. A scan may take at most F of the key's
-- tasks, and the first F matching it are among the first F of its groups,
-- so a scan sees what it would see with nothing parked; the one kept while
-- the key is full lets a slot freed find its task without unparking
-- anything. Unparking is always safe, so a task becomes ready unparked
-- unless its key is full and its group already has an unparked task ahead.
--   - tasks_key_park_insert, tasks_key_park_ready: a task becoming ready
--     (created, unblocked, due, released) while its key is full parks
--     behind an unparked task of its group;
--   - concurrency_keys_park: a key that fills parks every ready task but
--     the first of each group;
--   - tasks_key_leave: an unparked task leaving the ready set (claimed,
--     cancelled, ...) unparks the first parked task of its group;
--   - concurrency_keys_unpark_heads: a slot freed beyond the first unparks
--     the first parked task of each group; concurrency_keys_unpark_all: a
--     cap raised or lifted unparks the key's every parked task;
--   - tasks_key_unpark: a parked task that leaves the ready set is
--     unparked, so it is never parked when it comes back.
-- The triggers' statements cannot name an index (SQLite refuses INDEXED
-- BY in a trigger); TestKeyParkingPlans pins the plans of the same
-- statements outside a trigger.
ALTER TABLE tasks ADD COLUMN key_parked INTEGER NOT NULL DEFAULT 0;
DROP INDEX tasks_ready_plain;
DROP INDEX tasks_ready_by_priority;
DROP INDEX tasks_ready_by_workflow_priority;
CREATE INDEX tasks_ready_plain ON tasks (priority DESC, seq)
    WHERE state = 'pending' AND due_at_ms = 0 AND requires = '' AND key_parked = 0;
CREATE INDEX tasks_ready_by_priority ON tasks (priority DESC, seq, requires)
    WHERE state = 'pending' AND due_at_ms = 0 AND key_parked = 0;
CREATE INDEX tasks_ready_by_workflow_priority ON tasks (workflow_id, priority DESC, seq, requires)
    WHERE state = 'pending' AND due_at_ms = 0 AND key_parked = 0;
-- A key's ready tasks by parked or not, then group, in claim order: the
-- unparked ones a fill parks, the first parked one of a group.
CREATE INDEX tasks_ready_by_key_group ON tasks (concurrency_key, key_parked, workflow_id, requires, priority DESC, seq)
    WHERE state = 'pending' AND due_at_ms = 0 AND concurrency_key <> '';

CREATE TRIGGER tasks_key_park_insert AFTER INSERT ON tasks
    WHEN NEW.state = 'pending' AND NEW.due_at_ms = 0 AND NEW.concurrency_key <> ''
        AND EXISTS (SELECT 1 FROM concurrency_keys WHERE key = NEW.concurrency_key AND max_claimed > 0 AND claimed >= max_claimed)
        AND EXISTS (SELECT 1 FROM tasks WHERE concurrency_key = NEW.concurrency_key AND concurrency_key <> '' AND key_parked = 0
            AND workflow_id = NEW.workflow_id AND requires = NEW.requires AND state = 'pending' AND due_at_ms = 0
            AND seq <> NEW.seq AND (priority > NEW.priority OR (priority = NEW.priority AND seq < NEW.seq)))
BEGIN
    UPDATE tasks SET key_parked = 1 WHERE seq = NEW.seq;
END;
CREATE TRIGGER tasks_key_park_ready AFTER UPDATE OF state, due_at_ms ON tasks
    WHEN NEW.state = 'pending' AND NEW.due_at_ms = 0 AND NEW.concurrency_key <> '' AND NOT (OLD.state = 'pending' AND OLD.due_at_ms = 0)
        AND EXISTS (SELECT 1 FROM concurrency_keys WHERE key = NEW.concurrency_key AND max_claimed > 0 AND claimed >= max_claimed)
        AND EXISTS (SELECT 1 FROM tasks WHERE concurrency_key = NEW.concurrency_key AND concurrency_key <> '' AND key_parked = 0
            AND workflow_id = NEW.workflow_id AND requires = NEW.requires AND state = 'pending' AND due_at_ms = 0
            AND seq <> NEW.seq AND (priority > NEW.priority OR (priority = NEW.priority AND seq < NEW.seq)))
BEGIN
    UPDATE tasks SET key_parked = 1 WHERE seq = NEW.seq;
END;

CREATE TRIGGER tasks_key_unpark AFTER UPDATE OF state, due_at_ms ON tasks
    WHEN OLD.key_parked <> 0 AND (NEW.state <> 'pending' OR NEW.due_at_ms <> 0)
BEGIN
    UPDATE tasks SET key_parked = 0 WHERE seq = NEW.seq;
END;

CREATE TRIGGER tasks_key_leave AFTER UPDATE OF state, due_at_ms ON tasks
    WHEN OLD.state = 'pending' AND OLD.due_at_ms = 0 AND OLD.concurrency_key <> '' AND OLD.key_parked = 0
        AND (NEW.state <> 'pending' OR NEW.due_at_ms <> 0)
BEGIN
    UPDATE tasks SET key_parked = 0 WHERE seq = (SELECT seq FROM tasks
        WHERE concurrency_key = OLD.concurrency_key AND concurrency_key <> '' AND key_parked = 1 AND workflow_id = OLD.workflow_id AND requires = OLD.requires
            AND state = 'pending' AND due_at_ms = 0
        ORDER BY priority DESC, seq LIMIT 1);
END;

CREATE TRIGGER concurrency_keys_park AFTER UPDATE ON concurrency_keys
    WHEN NEW.max_claimed > 0 AND NEW.claimed >= NEW.max_claimed AND NOT (OLD.max_claimed > 0 AND OLD.claimed >= OLD.max_claimed)
BEGIN
    UPDATE tasks SET key_parked = 1 WHERE seq IN (
        SELECT seq FROM (SELECT seq, row_number() OVER (PARTITION BY workflow_id, requires ORDER BY priority DESC, seq) AS n
            FROM tasks WHERE concurrency_key = NEW.key AND concurrency_key <> '' AND key_parked = 0 AND state = 'pending' AND due_at_ms = 0)
        WHERE n > 1);
END;

CREATE TRIGGER concurrency_keys_unpark_all AFTER UPDATE ON concurrency_keys
    WHEN OLD.max_claimed > 0 AND (NEW.max_claimed = 0 OR NEW.max_claimed > OLD.max_claimed)
BEGIN
    UPDATE tasks SET key_parked = 0 WHERE concurrency_key = NEW.key AND concurrency_key <> '' AND key_parked = 1 AND state = 'pending' AND due_at_ms = 0;
END;

-- Every group with a parked task has an unparked one: its first.
CREATE TRIGGER concurrency_keys_unpark_heads AFTER UPDATE ON concurrency_keys
    WHEN OLD.max_claimed > 0 AND NEW.max_claimed > 0 AND NEW.max_claimed <= OLD.max_claimed
        AND NEW.claimed < OLD.claimed AND NEW.max_claimed - NEW.claimed > 1
BEGIN
    UPDATE tasks SET key_parked = 0 WHERE seq IN (
        SELECT (SELECT p.seq FROM tasks p WHERE p.concurrency_key = NEW.key AND p.concurrency_key <> '' AND p.key_parked = 1
                AND p.workflow_id = g.workflow_id AND p.requires = g.requires AND p.state = 'pending' AND p.due_at_ms = 0
            ORDER BY p.priority DESC, p.seq LIMIT 1)
        FROM (SELECT DISTINCT workflow_id, requires FROM tasks
            WHERE concurrency_key = NEW.key AND concurrency_key <> '' AND key_parked = 0 AND state = 'pending' AND due_at_ms = 0) g);
END;
