-- 0002 (PostgreSQL): nothing. SQLite's 0002 (lease durations and the
-- servers' alive time) is part of PostgreSQL's 0001; this file keeps the two
-- series numbered in step.
SELECT 1;
