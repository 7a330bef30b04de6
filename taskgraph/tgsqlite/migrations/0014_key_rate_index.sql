-- 0014: when concurrency keys' rates open (issue 27, item 2).
--
-- A claim-next that found nothing says when the earliest key whose rate
-- holds back a task it could take allows its next claim
-- (next_claimable_at). concurrency_keys_rate_open lists the keys that
-- have had a rate-limited claim by the time their rate opens, so that the
-- keys held back now are read in that order from the first one, a bounded
-- range of the index, however many keys the database has.
CREATE INDEX concurrency_keys_rate_open ON concurrency_keys (rate_open_at_ms, key) WHERE rate_open_at_ms > 0;
