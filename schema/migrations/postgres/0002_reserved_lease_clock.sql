-- 0002 (PostgreSQL): a placeholder on the graph-data branch that keeps the
-- numbering without gaps (PostgreSQL's 0001 holds SQLite's 0001 + 0002). The
-- audit branch adds its own 0002_lease_clock.sql; delete this file at merge.
SELECT 1;
