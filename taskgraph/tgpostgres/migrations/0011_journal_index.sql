-- 0011 (PostgreSQL): the store at its limit, again (issue 23).
--
-- A journaled event lives from its writer's commit to the linker's next
-- pass (tens of milliseconds), yet every event paid for an index entry by
-- task that only the rare reader of one task's history used. Those readers
-- now find the task's journaled events through its workflow
-- (event_journal_by_workflow), which the linker needs anyway.
DROP INDEX IF EXISTS event_journal_by_task;
