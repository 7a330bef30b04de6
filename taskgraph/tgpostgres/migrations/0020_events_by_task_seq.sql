-- 0020: kept in step with SQLite's 0020, which indexes a task's events by
-- the task's seq instead of its id, so that the events of tasks claimed
-- together go onto the same leaves of the index rather than random ones
-- (task ids are ULIDs, random within their millisecond). PostgreSQL's
-- events_by_task is unchanged here: its events are written by the hot lane
-- and linked later, and the cost of its index is measured with the rest of
-- PostgreSQL's writes per cycle (package tgpostgres).
SELECT 1;
