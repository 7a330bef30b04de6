-- 0023: kept in step with PostgreSQL's 0023, which journals one row per
-- writer statement and workflow (the array of its events' ids) instead of
-- a pointer per event. SQLite's journal is unchanged (always empty there:
-- its writers link at once).
SELECT 1;
