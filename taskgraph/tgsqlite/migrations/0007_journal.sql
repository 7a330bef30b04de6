-- 0007: the store at its limit (issue 23).
--
-- dependents counts each task's dependents (its edges out), kept by the
-- store as it adds edges, so that a completion without dependents skips
-- looking for them. Existing tasks are counted from their edges.
ALTER TABLE tasks ADD COLUMN dependents INTEGER NOT NULL DEFAULT 0 CHECK (dependents >= 0);
UPDATE tasks SET dependents = (SELECT COUNT(*) FROM edges WHERE edges.dep_seq = tasks.seq)
    WHERE seq IN (SELECT dep_seq FROM edges);

-- The event journal: events recorded but not yet linked into their
-- workflow's hash chain, in the order they happened (journal_id). A driver
-- whose writers of one workflow run at once (PostgreSQL) journals events so
-- that no writer waits for the chain head; the store links them right
-- after the commit, in journal order, and moves them into events. The
-- SQLite driver links events as it records them and keeps this table for
-- the drivers' common contract. The columns are those of events without
-- the link (wseq, prev_hash, hash).
CREATE TABLE event_journal (
    journal_id      INTEGER PRIMARY KEY,
    workflow_id     TEXT NOT NULL,
    task_id         TEXT NOT NULL,
    kind            TEXT NOT NULL,
    owner           TEXT NOT NULL DEFAULT '',
    generation      INTEGER NOT NULL,
    at_ms           INTEGER NOT NULL,
    detail          TEXT NOT NULL,
    hash_version    INTEGER NOT NULL,
    actor_kind      TEXT NOT NULL DEFAULT '',
    actor_name      TEXT NOT NULL DEFAULT '',
    actor_principal TEXT NOT NULL DEFAULT '',
    task_state      TEXT NOT NULL DEFAULT '',
    content         TEXT NOT NULL DEFAULT ''
);
CREATE INDEX event_journal_by_workflow ON event_journal (workflow_id, journal_id);
CREATE INDEX event_journal_by_task ON event_journal (task_id, journal_id);

-- The first ready indexes (pending by seq, overall and per workflow) are
-- superseded by those of claim-next order (0006); the few reads that used
-- them read those. Every claim deleted an entry from each.
DROP INDEX tasks_ready;
DROP INDEX tasks_ready_by_workflow;
