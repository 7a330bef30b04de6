-- 0016: kept in step with PostgreSQL's 0016, which writes each event's
-- body once: into events, with its link (position and hashes) written
-- later into event_links by the linker, and a pointer in the journal.
-- SQLite links every event in its writer's transaction, in the event's own
-- row, so its events were always written once: event_links (created here
-- so that both drivers have the same tables) stays empty, as its journal
-- (kept for the drivers' common contract) does.
CREATE TABLE event_links (
    event_id    INTEGER NOT NULL,
    wseq        INTEGER NOT NULL,
    workflow_id TEXT NOT NULL,
    prev_hash   TEXT NOT NULL,
    hash        TEXT NOT NULL,
    PRIMARY KEY (workflow_id, wseq)
);
CREATE UNIQUE INDEX event_links_by_event ON event_links (event_id);
