-- 0016: reserved for helper pgwal's migration 0016 (session of 2026-12-02).
--
-- Branch keys4 only: migrations are numbered without gaps, so this
-- branch's 0017 needs a 0016 to run. It changes nothing. Delete this
-- file when pgwal's 0016 is merged.
SELECT 1;
