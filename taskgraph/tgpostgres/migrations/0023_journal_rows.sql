-- 0023 (PostgreSQL): one journal row per writer statement and workflow
-- (issue 23).
--
-- Since 0016 a writer journaled each event as a pointer row (journal_id =
-- the event's id) with its entry in event_journal_by_workflow, and the
-- linker deleted it: 710-740 bytes of WAL per task of three events. Now
-- the statement that inserts the bodies inserts one journal row per
-- workflow it wrote events of: journal_id is the first event's id and
-- event_ids the ids of its events in order. The linker deletes the rows it
-- links, each whole, and links all of a row's events (see package
-- tgpostgres, "Events").
ALTER TABLE event_journal ADD COLUMN event_ids BIGINT[];
-- The pointers journaled before this migration and not yet linked become
-- rows of one event each: the next linker links them, in the same order.
UPDATE event_journal SET event_ids = ARRAY[journal_id] WHERE event_ids IS NULL;
ALTER TABLE event_journal ALTER COLUMN event_ids SET NOT NULL;
