-- 0012 (PostgreSQL): concurrency keys and rate limits per key (issue 27, items 1 and 2).
--
-- concurrency_key: a task may name a key ('' for none); a key's row in
-- concurrency_keys caps how many of its tasks are claimed at once
-- (max_claimed, 0 for no cap) and how many claims it grants per
-- interval (rate_count per rate_interval_ms, 0 for no rate). Every key a
-- task names has a row (created with the task, limits 0 unless given).
--
-- claimed counts the key's claimed tasks. A claim takes a slot in its
-- own transaction by a guarded update of the key's row (the domain:
-- claimed < max_claimed and the rate, compare-and-set on claimed and
-- recent_ms); the trigger below gives the slot back in the transaction
-- of whatever ends the claim (complete, fail, release, cancel, expiry,
-- an operator's command), so no path can forget it. recent_ms lists the
-- server times (ms) of the key's claims within the last rate interval,
-- oldest first, at most rate_count of them; rate_open_at_ms is the first
-- time the rate allows another claim (0: now). Claim-next's scan passes
-- over the tasks of a key that is full or rate-limited at its time (one
-- uncorrelated subquery over this small table per statement).
ALTER TABLE tasks ADD COLUMN concurrency_key TEXT NOT NULL DEFAULT '';
CREATE TABLE concurrency_keys (
    key              TEXT PRIMARY KEY,
    max_claimed      INTEGER NOT NULL DEFAULT 0 CHECK (max_claimed >= 0),
    claimed          INTEGER NOT NULL DEFAULT 0 CHECK (claimed >= 0),
    rate_count       INTEGER NOT NULL DEFAULT 0 CHECK (rate_count >= 0),
    rate_interval_ms INTEGER NOT NULL DEFAULT 0 CHECK (rate_interval_ms >= 0),
    recent_ms        TEXT NOT NULL DEFAULT '',
    rate_open_at_ms  BIGINT NOT NULL DEFAULT 0,
    updated_at_ms    BIGINT NOT NULL,
    updated_by       TEXT NOT NULL DEFAULT ''
);
-- The claimable tasks of each key in claim-next order: the task a freed
-- slot wakes a parked claim for, and whether a limited key has work.
CREATE INDEX tasks_ready_by_key ON tasks (concurrency_key, priority DESC, seq)
    WHERE state = 'pending' AND due_at_ms = 0 AND concurrency_key <> '';
CREATE FUNCTION tasks_key_release() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE concurrency_keys SET claimed = claimed - 1 WHERE key = OLD.concurrency_key;
    RETURN NULL;
END
$$;
CREATE TRIGGER tasks_key_release AFTER UPDATE OF state ON tasks FOR EACH ROW
    WHEN (OLD.state = 'claimed' AND NEW.state <> 'claimed' AND OLD.concurrency_key <> '')
    EXECUTE FUNCTION tasks_key_release();
