-- Kept in step with PostgreSQL's migration of the same number, which
-- writes the links of a linking pass as one row per workflow (a run of
-- events: arrays of ids and hashes) instead of one row per event. SQLite
-- links every event in its own row, so its event_links (kept so that both
-- drivers have the same tables) stays empty; it takes the new columns
-- (SQLite has no arrays: the ids and hashes would be text).
DROP TABLE event_links;
CREATE TABLE event_links (
    workflow_id  TEXT NOT NULL,
    wseq         INTEGER NOT NULL,
    prev_hash    TEXT NOT NULL,
    event_ids    TEXT NOT NULL,
    hashes       TEXT NOT NULL,
    min_event_id INTEGER NOT NULL,
    max_event_id INTEGER NOT NULL,
    PRIMARY KEY (workflow_id, wseq)
);
CREATE INDEX event_links_by_event ON event_links (workflow_id, min_event_id);
