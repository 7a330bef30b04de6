-- 0017: the concurrency keys at their cap, indexed (issue 27, item 1).
--
-- Claim-next's scan passes over the tasks of closed keys with one
-- uncorrelated subquery: the keys at their cap, and those whose rate
-- opens after the scan's time. It read every row of concurrency_keys to
-- find them, so its cost grew with the number of keys (per-repository
-- keys run to thousands). at_cap says whether a key is at its cap, and
-- concurrency_keys_at_cap lists those keys: the subquery reads that index
-- and the range of concurrency_keys_rate_open past the scan's time, so
-- it costs the closed keys, whatever the number of keys.
--
-- at_cap is generated, so that no writer can leave it stale, and stored:
-- an update of a key's row changes the index only when the key fills or
-- frees (a claim that leaves it below its cap stays a HOT update).
ALTER TABLE concurrency_keys ADD COLUMN at_cap BOOLEAN NOT NULL
    GENERATED ALWAYS AS (max_claimed > 0 AND claimed >= max_claimed) STORED;
CREATE INDEX concurrency_keys_at_cap ON concurrency_keys (key) WHERE at_cap;
