-- 0022: kept in step with PostgreSQL's 0022 (apply_guard, the server-side
-- check of a batch's last round, whose COMMIT travels with it). SQLite's
-- single writer commits a batch itself, after the driver counted the rows.
SELECT 1;
