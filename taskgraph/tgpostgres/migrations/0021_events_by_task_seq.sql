-- 0021 (PostgreSQL): a task's events indexed by the task's seq, not its id
-- (issue 23), as SQLite's 0020 does.
--
-- events_by_task (task_id, event_id) took one entry per event keyed by the
-- task's ULID, random within the millisecond the tasks of one creation
-- share: the events of the tasks claimed and completed together
-- (consecutive seqs) went onto as many random leaves, split at random
-- (Btree/SPLIT_L and SPLIT_R records) and each entry some 40 bytes of key.
-- The task's seq rises with creation, so keyed by it the same events go
-- onto the last leaves of the index, in 16-byte keys. The writer takes the
-- seq from tasks' unique index on task_id in the event's INSERT (no round
-- trip more); the readers find a task's events by its seq (from the same
-- index), or by 0 for an id with no task row (none the domain writes; the
-- driver contract allows it). A task's row and its events go together
-- (only PruneWorkflow deletes either), so every event of an existing task
-- has its task's seq. The rows written before this migration take theirs
-- here. See package tgpostgres, "Events".
DROP INDEX events_by_task;
ALTER TABLE events ADD COLUMN task_seq BIGINT NOT NULL DEFAULT 0;
UPDATE events e SET task_seq = t.seq FROM tasks t WHERE t.task_id = e.task_id;
CREATE INDEX events_by_task_seq ON events (task_seq, event_id);
