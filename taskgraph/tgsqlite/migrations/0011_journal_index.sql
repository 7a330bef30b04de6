-- 0011: kept in step with PostgreSQL's 0011, which drops the journal's index
-- by task (readers find a task's journaled events through its workflow).
-- SQLite links every event in its writer's transaction, so its journal is
-- always empty and the index was never used.
DROP INDEX IF EXISTS event_journal_by_task;
