-- 0026: kept in step with PostgreSQL's 0026, which has ANALYZE skip the
-- columns no statement filters on (per-column statistics targets). SQLite
-- keeps no statistics unless ANALYZE is run by hand, and then only of
-- indexes.
SELECT 1;
