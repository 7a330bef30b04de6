-- 0001: workflows, tasks, dependency edges, and the hash-chained event history.
-- Times are server time in UTC milliseconds since the Unix epoch.

CREATE TABLE workflows (
    workflow_id   TEXT PRIMARY KEY,
    task_count    INTEGER NOT NULL DEFAULT 0,
    event_count   INTEGER NOT NULL DEFAULT 0,
    -- hash of the newest event of this workflow's chain ('' before the first)
    head_hash     TEXT NOT NULL DEFAULT '',
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL
);

CREATE TABLE tasks (
    -- creation order; claim-next takes the lowest ready seq
    seq                 INTEGER PRIMARY KEY,
    task_id             TEXT NOT NULL UNIQUE,
    workflow_id         TEXT NOT NULL REFERENCES workflows (workflow_id) ON DELETE CASCADE,
    node_id             TEXT NOT NULL,
    payload             TEXT NOT NULL,
    -- JSON array of node ids in this workflow, as given at creation
    depends_on          TEXT NOT NULL,
    state               TEXT NOT NULL CHECK (state IN ('blocked', 'pending', 'claimed', 'completed', 'failed', 'cancelled')),
    owner               TEXT,
    generation          INTEGER NOT NULL DEFAULT 0 CHECK (generation >= 0),
    -- SHA-256 of the live claim token; the token itself is never stored
    token_hash          BLOB,
    lease_expires_at_ms INTEGER,
    attempts            INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts        INTEGER NOT NULL CHECK (max_attempts BETWEEN 1 AND 100),
    -- dependencies not yet completed; the task is pending when this reaches 0
    unmet               INTEGER NOT NULL CHECK (unmet >= 0),
    result              TEXT,
    error               TEXT,
    status_message      TEXT NOT NULL DEFAULT '',
    -- seq of the upstream task whose failure or cancellation cancelled this one
    cancel_cause        INTEGER,
    created_at_ms       INTEGER NOT NULL,
    updated_at_ms       INTEGER NOT NULL,
    UNIQUE (workflow_id, node_id)
);

-- claim-next: the oldest pending task, overall or within one workflow
CREATE INDEX tasks_ready ON tasks (seq) WHERE state = 'pending';
CREATE INDEX tasks_ready_by_workflow ON tasks (workflow_id, seq) WHERE state = 'pending';
-- the lease sweep: claimed tasks by expiry
CREATE INDEX tasks_leases ON tasks (lease_expires_at_ms) WHERE state = 'claimed';
-- listings and counts by state
CREATE INDEX tasks_by_state ON tasks (state, seq);
-- operator requeue/skip revives what a failure cancelled
CREATE INDEX tasks_cancel_cause ON tasks (cancel_cause) WHERE cancel_cause IS NOT NULL;

-- dep_seq must complete before task_seq may run
CREATE TABLE edges (
    dep_seq  INTEGER NOT NULL REFERENCES tasks (seq) ON DELETE CASCADE,
    task_seq INTEGER NOT NULL REFERENCES tasks (seq) ON DELETE CASCADE,
    PRIMARY KEY (dep_seq, task_seq)
) WITHOUT ROWID;
CREATE INDEX edges_by_task ON edges (task_seq, dep_seq);

-- one hash chain per workflow: hash = sha256(prev_hash || "\n" || canonical event JSON)
CREATE TABLE events (
    event_id    INTEGER PRIMARY KEY,
    workflow_id TEXT NOT NULL,
    wseq        INTEGER NOT NULL,
    task_id     TEXT NOT NULL,
    kind        TEXT NOT NULL,
    owner       TEXT NOT NULL DEFAULT '',
    generation  INTEGER NOT NULL,
    at_ms       INTEGER NOT NULL,
    detail      TEXT NOT NULL,
    prev_hash   TEXT NOT NULL,
    hash        TEXT NOT NULL,
    UNIQUE (workflow_id, wseq)
);
CREATE INDEX events_by_task ON events (task_id, event_id);

-- a record of each workflow removed by prune, with the head of its chain
CREATE TABLE pruned_workflows (
    workflow_id  TEXT NOT NULL,
    pruned_at_ms INTEGER NOT NULL,
    task_count   INTEGER NOT NULL,
    event_count  INTEGER NOT NULL,
    head_hash    TEXT NOT NULL,
    PRIMARY KEY (workflow_id, pruned_at_ms)
);
