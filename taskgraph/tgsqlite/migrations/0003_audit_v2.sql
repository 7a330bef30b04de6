-- 0003: the audit trail, hash format v2 (see MCP.md, "Audit trail format").
-- Events written before this migration keep hash_version 1 and keep
-- verifying; the store writes every new event at version 2, which also
-- covers the event's actor and the task state (and content digests) it
-- leaves. The switch is recorded as the first entry of the database-wide
-- chain (audit_chain), written by the store when it first opens the migrated
-- database, with one "adopt" entry per workflow that existed then.
ALTER TABLE events ADD COLUMN hash_version INTEGER NOT NULL DEFAULT 1;
-- who caused the event: worker, operator, requestor, sweeper, server, submitter
ALTER TABLE events ADD COLUMN actor_kind TEXT NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN actor_name TEXT NOT NULL DEFAULT '';
-- the authenticated principal of the request, '' when none
ALTER TABLE events ADD COLUMN actor_principal TEXT NOT NULL DEFAULT '';
-- canonical JSON (RFC 8785) of the task state the event leaves, '' at v1
ALTER TABLE events ADD COLUMN task_state TEXT NOT NULL DEFAULT '';
-- canonical JSON of the digests of the content the event changed, '' at v1
ALTER TABLE events ADD COLUMN content TEXT NOT NULL DEFAULT '';

-- The database-wide chain: every workflow's creation and prune (and the
-- switch to v2), so that a workflow deleted whole is detected.
CREATE TABLE audit_chain (
    seq INTEGER PRIMARY KEY,
    kind        TEXT NOT NULL,
    workflow_id TEXT NOT NULL DEFAULT '',
    at_ms       INTEGER NOT NULL,
    -- canonical JSON (RFC 8785) object
    detail      TEXT NOT NULL,
    prev_hash   TEXT NOT NULL,
    hash        TEXT NOT NULL
);

-- The head of audit_chain, advanced by compare and set.
CREATE TABLE audit_head (
    singleton   INTEGER PRIMARY KEY CHECK (singleton = 1),
    entry_count INTEGER NOT NULL,
    head_hash   TEXT NOT NULL
);
