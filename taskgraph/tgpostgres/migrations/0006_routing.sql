-- 0006 (PostgreSQL): capability routing and retry timing (issue 16, items 5 and 6).
--
-- requires: the capability tags a worker must advertise to claim the task,
-- canonical (sorted, deduplicated, joined by one space); '' requires nothing.
-- due_at_ms: a pending task is claimable from this server time on; 0 means
-- claimable now. A due task is promoted (due_at_ms := 0) by claim-next at its
-- arrival or by the sweeper, so the ready indexes below hold only claimable
-- tasks. retry_delay_ms: the base of a retryable failure's backoff.
-- Existing tasks require nothing, are due now and back off from 1 s.
ALTER TABLE tasks ADD COLUMN requires TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN due_at_ms BIGINT NOT NULL DEFAULT 0 CHECK (due_at_ms >= 0);
ALTER TABLE tasks ADD COLUMN retry_delay_ms BIGINT NOT NULL DEFAULT 1000 CHECK (retry_delay_ms BETWEEN 0 AND 900000);

-- Claim-next without capabilities: the first entry of tasks_ready_plain
-- (claimable tasks requiring nothing), however many routed tasks wait.
-- Claim-next with capabilities scans tasks_ready_by_priority (every
-- claimable task) in (priority DESC, seq) and takes the first whose
-- requires are among the capabilities.
DROP INDEX tasks_ready_by_priority;
DROP INDEX tasks_ready_by_workflow_priority;
CREATE INDEX tasks_ready_plain ON tasks (priority DESC, seq) WHERE state = 'pending' AND due_at_ms = 0 AND requires = '';
CREATE INDEX tasks_ready_by_priority ON tasks (priority DESC, seq, requires) WHERE state = 'pending' AND due_at_ms = 0;
CREATE INDEX tasks_ready_by_workflow_priority ON tasks (workflow_id, priority DESC, seq, requires) WHERE state = 'pending' AND due_at_ms = 0;
-- Pending tasks not yet due, earliest first: promotion and the sweeper's timer.
CREATE INDEX tasks_due ON tasks (due_at_ms) WHERE state = 'pending' AND due_at_ms > 0;
