-- 0015: drop tasks_by_state (issue 23).
--
-- Every change of a task's state is an update of an indexed column, so
-- each claim and each completion wrote a new entry into tasks_by_state
-- (state, seq): two of the nine index entries of a claim+complete cycle.
-- Nothing on a path that matters reads it: every lookup by state is served
-- by a partial index (tasks_ready_*, tasks_leases, tasks_due,
-- tasks_gate_due) or by a workflow's own rows, and the count of tasks per
-- state (metrics, status) reads every row either way.
DROP INDEX IF EXISTS tasks_by_state;
