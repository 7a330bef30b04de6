-- 0010 (PostgreSQL): flow control (issue 27): pausing claims and poison tasks.
--
-- claim_pauses holds the pauses in effect: one row per paused workflow,
-- and the row of workflow_id '' while all claiming on the database is
-- paused. A claim (claim-next's scan and a claim by id's update) takes
-- nothing from a paused workflow, nor anything while '' is paused; leases
-- already granted run on. The sets are tiny, so the claim scan excludes
-- them with uncorrelated subqueries evaluated once per statement. A
-- workflow's row goes with its prune.
CREATE TABLE claim_pauses (
    workflow_id  TEXT PRIMARY KEY,
    paused_at_ms BIGINT NOT NULL,
    reason       TEXT NOT NULL,
    paused_by    TEXT NOT NULL
);

-- lease_losses counts the leases of a task that lapsed (its worker
-- stopped heartbeating); at the store's bound (3 unless configured) the
-- task fails as a poison task instead of being claimed again, and the
-- reclaims before it back off (package taskgraph, "Poison tasks"). An
-- operator's requeue sets it back to 0.
ALTER TABLE tasks ADD COLUMN lease_losses INTEGER NOT NULL DEFAULT 0;
