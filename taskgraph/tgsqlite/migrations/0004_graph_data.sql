-- 0004: work that flows through the graph (issue 16): task priority.
-- Claim-next takes the highest priority first, oldest (lowest seq) first
-- within a priority; every existing task keeps priority 0, so the order of
-- existing work is today's.
ALTER TABLE tasks ADD COLUMN priority INTEGER NOT NULL DEFAULT 0 CHECK (priority BETWEEN -100 AND 100);

-- claim-next by (priority DESC, seq): the first entry is the task to claim
CREATE INDEX tasks_ready_by_priority ON tasks (priority DESC, seq) WHERE state = 'pending';
CREATE INDEX tasks_ready_by_workflow_priority ON tasks (workflow_id, priority DESC, seq) WHERE state = 'pending';
