-- 0021: kept in step with PostgreSQL's 0021, which ports this series' 0020
-- (a task's events indexed by the task's seq: events.task_seq,
-- events_by_task_seq) to PostgreSQL. SQLite has it since 0020.
SELECT 1;
