-- 0020: a task's events indexed by the task's seq, not its id (issue 23).
--
-- events_by_task (task_id, event_id) took one entry per event keyed by the
-- task's ULID: 48 bits of creation time, then 80 random bits. The tasks of
-- one CreateTasks call share their millisecond, so within it their ids, and
-- so their entries, are in random order: the events of the tasks claimed
-- and completed together (consecutive seqs) landed on as many different
-- leaves, each a page the commit writes to the WAL, and random splits left
-- the leaves about half full. The task's seq (the tasks rowid) rises with
-- creation, so the same events now go onto the last leaves of the index.
-- A task's events are found by its seq (from tasks' unique index on
-- task_id); the task's row and its events go together (only PruneWorkflow
-- deletes either), so every event of an existing task has its task's seq.
-- An event whose task id has no row (none the domain writes; the driver
-- contract allows it) has task_seq 0, where the readers look for such an
-- id. The rows written before this migration take theirs here.
DROP INDEX events_by_task;
ALTER TABLE events ADD COLUMN task_seq INTEGER NOT NULL DEFAULT 0;
UPDATE events SET task_seq = COALESCE((SELECT t.seq FROM tasks t WHERE t.task_id = events.task_id), 0);
CREATE INDEX events_by_task_seq ON events (task_seq, event_id);
