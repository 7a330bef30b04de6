-- 0013: approval gates (issue 27, item 3).
--
-- kind: 'task' (claimed by workers) or 'gate' (never claimed: decided by a
-- person). A gate whose dependencies all completed stays 'blocked' with
-- unmet = 0, awaiting approval; approval completes it, rejection fails it
-- (package taskgraph, "Approval gates"). A gate keeps the stored states of
-- every task, so the unfinished sets, cascades and indexes need no change.
-- gate_timeout_ms (0: none) and gate_on_timeout ('approve', 'reject' or ''
-- for none): a gate awaiting approval is decided so by the server when
-- nobody decided within gate_timeout_ms; its decision time is due_at_ms,
-- set when it starts awaiting. tasks_gate_due finds the gates whose time
-- came (the sweeper's timer), outside the ready indexes, which hold only
-- pending tasks.
ALTER TABLE tasks ADD COLUMN kind TEXT NOT NULL DEFAULT 'task' CHECK (kind IN ('task', 'gate'));
ALTER TABLE tasks ADD COLUMN gate_timeout_ms BIGINT NOT NULL DEFAULT 0 CHECK (gate_timeout_ms >= 0);
ALTER TABLE tasks ADD COLUMN gate_on_timeout TEXT NOT NULL DEFAULT '' CHECK (gate_on_timeout IN ('', 'approve', 'reject'));
CREATE INDEX tasks_gate_due ON tasks (due_at_ms) WHERE kind = 'gate' AND state = 'blocked' AND due_at_ms > 0;
