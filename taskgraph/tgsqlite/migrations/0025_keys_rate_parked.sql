-- 0025: the queued tasks of a concurrency key held back by its rate leave
-- the ready indexes too (issue 27, item 2; the PostgreSQL migration of
-- this number says why and gives the rule). In short: the first K ready
-- tasks of each (workflow, requires) group of a key are not parked, K
-- being the least of max(1, max_claimed - claimed) (a cap) and
-- rate_count (a rate: no window allows more claims), so that what stays
-- unparked does not depend on time, which opens a rate with no write. A
-- key closes when it is full or its window was full at its last write
-- (rate_open_at_ms > 0); parking happens then and to a task that becomes
-- ready while it is closed; unparking keeps the rule whenever K grows.
-- K is written out in each trigger (SQLite has no functions in SQL):
--   min(CASE WHEN max_claimed > 0 THEN max(1, max_claimed - claimed) ELSE 1000000000 END,
--       CASE WHEN rate_count > 0 THEN rate_count ELSE 1000000000 END)
-- tasks_key_leave and tasks_key_unpark stay as 0018 made them: the first
-- unparks for any key, the second is about the task alone.
DROP TRIGGER tasks_key_park_insert;
DROP TRIGGER tasks_key_park_ready;
DROP TRIGGER concurrency_keys_park;
DROP TRIGGER concurrency_keys_unpark_all;
DROP TRIGGER concurrency_keys_unpark_heads;

CREATE TRIGGER tasks_key_park_insert AFTER INSERT ON tasks
    WHEN NEW.state = 'pending' AND NEW.due_at_ms = 0 AND NEW.concurrency_key <> ''
        AND EXISTS (SELECT 1 FROM concurrency_keys c WHERE c.key = NEW.concurrency_key
            AND ((c.max_claimed > 0 AND c.claimed >= c.max_claimed) OR (c.rate_count > 0 AND c.rate_open_at_ms > 0))
            AND (SELECT count(*) FROM tasks WHERE concurrency_key = NEW.concurrency_key AND concurrency_key <> '' AND key_parked = 0
                AND workflow_id = NEW.workflow_id AND requires = NEW.requires AND state = 'pending' AND due_at_ms = 0
                AND seq <> NEW.seq AND (priority > NEW.priority OR (priority = NEW.priority AND seq < NEW.seq)))
                >= min(CASE WHEN c.max_claimed > 0 THEN max(1, c.max_claimed - c.claimed) ELSE 1000000000 END,
                    CASE WHEN c.rate_count > 0 THEN c.rate_count ELSE 1000000000 END))
BEGIN
    UPDATE tasks SET key_parked = 1 WHERE seq = NEW.seq;
END;
CREATE TRIGGER tasks_key_park_ready AFTER UPDATE OF state, due_at_ms ON tasks
    WHEN NEW.state = 'pending' AND NEW.due_at_ms = 0 AND NEW.concurrency_key <> '' AND NOT (OLD.state = 'pending' AND OLD.due_at_ms = 0)
        AND EXISTS (SELECT 1 FROM concurrency_keys c WHERE c.key = NEW.concurrency_key
            AND ((c.max_claimed > 0 AND c.claimed >= c.max_claimed) OR (c.rate_count > 0 AND c.rate_open_at_ms > 0))
            AND (SELECT count(*) FROM tasks WHERE concurrency_key = NEW.concurrency_key AND concurrency_key <> '' AND key_parked = 0
                AND workflow_id = NEW.workflow_id AND requires = NEW.requires AND state = 'pending' AND due_at_ms = 0
                AND seq <> NEW.seq AND (priority > NEW.priority OR (priority = NEW.priority AND seq < NEW.seq)))
                >= min(CASE WHEN c.max_claimed > 0 THEN max(1, c.max_claimed - c.claimed) ELSE 1000000000 END,
                    CASE WHEN c.rate_count > 0 THEN c.rate_count ELSE 1000000000 END))
BEGIN
    UPDATE tasks SET key_parked = 1 WHERE seq = NEW.seq;
END;

CREATE TRIGGER concurrency_keys_park AFTER UPDATE ON concurrency_keys
    WHEN ((NEW.max_claimed > 0 AND NEW.claimed >= NEW.max_claimed) OR (NEW.rate_count > 0 AND NEW.rate_open_at_ms > 0))
        AND NOT ((OLD.max_claimed > 0 AND OLD.claimed >= OLD.max_claimed) OR (OLD.rate_count > 0 AND OLD.rate_open_at_ms > 0))
BEGIN
    UPDATE tasks SET key_parked = 1 WHERE seq IN (
        SELECT seq FROM (SELECT seq, row_number() OVER (PARTITION BY workflow_id, requires ORDER BY priority DESC, seq) AS n
            FROM tasks WHERE concurrency_key = NEW.key AND concurrency_key <> '' AND key_parked = 0 AND state = 'pending' AND due_at_ms = 0)
        WHERE n > min(CASE WHEN NEW.max_claimed > 0 THEN max(1, NEW.max_claimed - NEW.claimed) ELSE 1000000000 END,
            CASE WHEN NEW.rate_count > 0 THEN NEW.rate_count ELSE 1000000000 END));
END;

-- K grew with a limit changed or lifted: every parked task.
CREATE TRIGGER concurrency_keys_unpark_all AFTER UPDATE ON concurrency_keys
    WHEN (NEW.max_claimed <> OLD.max_claimed OR NEW.rate_count <> OLD.rate_count)
        AND min(CASE WHEN NEW.max_claimed > 0 THEN max(1, NEW.max_claimed - NEW.claimed) ELSE 1000000000 END,
                CASE WHEN NEW.rate_count > 0 THEN NEW.rate_count ELSE 1000000000 END)
            > min(CASE WHEN OLD.max_claimed > 0 THEN max(1, OLD.max_claimed - OLD.claimed) ELSE 1000000000 END,
                CASE WHEN OLD.rate_count > 0 THEN OLD.rate_count ELSE 1000000000 END)
BEGIN
    UPDATE tasks SET key_parked = 0 WHERE concurrency_key = NEW.key AND concurrency_key <> '' AND key_parked = 1 AND state = 'pending' AND due_at_ms = 0;
END;

-- K grew by one with a slot freed: every group with a parked task has K
-- unparked ones ahead of it, so its first parked task is unparked.
CREATE TRIGGER concurrency_keys_unpark_heads AFTER UPDATE ON concurrency_keys
    WHEN NEW.max_claimed = OLD.max_claimed AND NEW.rate_count = OLD.rate_count
        AND min(CASE WHEN NEW.max_claimed > 0 THEN max(1, NEW.max_claimed - NEW.claimed) ELSE 1000000000 END,
                CASE WHEN NEW.rate_count > 0 THEN NEW.rate_count ELSE 1000000000 END)
            > min(CASE WHEN OLD.max_claimed > 0 THEN max(1, OLD.max_claimed - OLD.claimed) ELSE 1000000000 END,
                CASE WHEN OLD.rate_count > 0 THEN OLD.rate_count ELSE 1000000000 END)
BEGIN
    UPDATE tasks SET key_parked = 0 WHERE seq IN (
        SELECT (SELECT p.seq FROM tasks p WHERE p.concurrency_key = NEW.key AND p.concurrency_key <> '' AND p.key_parked = 1
                AND p.workflow_id = g.workflow_id AND p.requires = g.requires AND p.state = 'pending' AND p.due_at_ms = 0
            ORDER BY p.priority DESC, p.seq LIMIT 1)
        FROM (SELECT DISTINCT workflow_id, requires FROM tasks
            WHERE concurrency_key = NEW.key AND concurrency_key <> '' AND key_parked = 0 AND state = 'pending' AND due_at_ms = 0) g);
END;
