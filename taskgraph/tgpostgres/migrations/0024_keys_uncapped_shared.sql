-- 0024: a concurrency key without a cap keeps no count, and its claims
-- take its row shared (issue 27, item 1).
--
-- Every claim of a keyed task locked its key's row FOR UPDATE and raised
-- claimed, held to its COMMIT: claims of one key in different batches
-- queued on the row even when the key had no limit. Now a key's claimed
-- counts its claimed tasks only while it has a cap (0 otherwise); a claim
-- of a key without a limit locks its row FOR KEY SHARE and writes nothing
-- to it (tgpostgres LockKey); a key with one, FOR NO KEY UPDATE, then the
-- guarded update. A change of the limit locks the row FOR UPDATE, which
-- waits for both, counts the key's claimed tasks after the lock in a
-- statement of its own and stores the count with a new cap
-- (LockKeyForLimit). So every path that changes whether a task of the
-- key is claimed holds the row at least FOR KEY SHARE until its COMMIT:
--   - tasks_key_release: FOR KEY SHARE, then the count lowered only when
--     the key is capped (read again after that lock: a change of the
--     limit committed meanwhile is seen);
--   - tasks_key_leave, tasks_key_park_entry: FOR NO KEY UPDATE where they
--     took FOR UPDATE (that conflicts with the FOR KEY SHARE a claim or an
--     end takes before its update, and two of them would wait for each
--     other); the unpark after it only when the key is capped (no task of
--     an uncapped key is parked: lifting a cap unparks them all).
-- No claim is refused for a count (uncapped), so none of the counts kept
-- before for uncapped keys is needed: they go to 0.
CREATE OR REPLACE FUNCTION tasks_key_release() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM concurrency_keys WHERE key = OLD.concurrency_key FOR KEY SHARE;
    UPDATE concurrency_keys SET claimed = claimed - 1 WHERE key = OLD.concurrency_key AND max_claimed > 0;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION tasks_key_park_entry() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- The key's row only when it is full: the lock waits for a writer of
    -- the key and reads its row again, so a key freed meanwhile parks
    -- nothing; the next statement sees what that writer committed.
    PERFORM 1 FROM concurrency_keys WHERE key = NEW.concurrency_key AND max_claimed > 0 AND claimed >= max_claimed FOR NO KEY UPDATE;
    IF FOUND AND EXISTS (SELECT 1 FROM tasks WHERE concurrency_key = NEW.concurrency_key AND concurrency_key <> '' AND NOT key_parked
            AND workflow_id = NEW.workflow_id AND requires = NEW.requires AND state = 'pending' AND due_at_ms = 0
            AND seq <> NEW.seq AND (priority > NEW.priority OR (priority = NEW.priority AND seq < NEW.seq))) THEN
        NEW.key_parked := true;
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE FUNCTION tasks_key_leave() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- A claim holds the key's row already; a cancel takes it after the
    -- task's, as whatever ends a claim does (tasks_key_release). Only a
    -- capped key's row is written to (its tasks may be parked).
    PERFORM 1 FROM concurrency_keys WHERE key = OLD.concurrency_key AND max_claimed > 0 FOR NO KEY UPDATE;
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

UPDATE concurrency_keys SET claimed = 0 WHERE max_claimed = 0 AND claimed <> 0;
