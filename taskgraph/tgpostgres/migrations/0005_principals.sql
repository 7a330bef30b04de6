-- 0005 (PostgreSQL): named principals. Each task records the principal whose request
-- created it (NULL when none was authenticated: stdio, operator commands),
-- so the Tasks extension's tasks/get, tasks/update and tasks/cancel act only
-- for their creator. Never a token: a principal's name only.
ALTER TABLE tasks ADD COLUMN created_by TEXT CHECK (created_by IS NULL OR length(created_by) BETWEEN 1 AND 128);
