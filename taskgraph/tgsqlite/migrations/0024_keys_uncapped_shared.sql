-- 0024: a concurrency key without a cap keeps no count (issue 27, item 1;
-- the PostgreSQL migration of this number says why: there its claims take
-- the key's row shared). SQLite has one writer, but keeps the same
-- meaning, so that what a reader sees agrees: a key's claimed counts its
-- claimed tasks only while it has a cap (0 otherwise); a change of the
-- limit that sets a cap counts them (LockKeyForLimit). The trigger that
-- gives a slot back lowers the count only when the key is capped.
DROP TRIGGER tasks_key_release;
CREATE TRIGGER tasks_key_release AFTER UPDATE OF state ON tasks
    WHEN OLD.state = 'claimed' AND NEW.state <> 'claimed' AND OLD.concurrency_key <> ''
BEGIN
    UPDATE concurrency_keys SET claimed = claimed - 1 WHERE key = OLD.concurrency_key AND max_claimed > 0;
END;
UPDATE concurrency_keys SET claimed = 0 WHERE max_claimed = 0 AND claimed <> 0;
