-- Links by run (PostgreSQL; issue 23): one row per workflow per linking
-- pass instead of one per event.
--
-- Since 0016 the linker wrote each event's link (position and hashes) as a
-- row of event_links with two index entries, about a thousand bytes of WAL
-- per task of three events. Now a row holds the run of consecutive events
-- of one workflow that a linking pass linked: the position of its first
-- event (wseq) and the hash that event links to (prev_hash), the events'
-- ids and hashes in chain order (arrays), and the least and greatest id
-- (a task's event finds its run). Each later event's prev_hash is the hash
-- before it in the run. See package tgpostgres, "Events".
CREATE TABLE event_link_runs (
    workflow_id  TEXT NOT NULL,
    wseq         BIGINT NOT NULL,
    prev_hash    TEXT NOT NULL,
    event_ids    BIGINT[] NOT NULL,
    hashes       TEXT[] NOT NULL,
    min_event_id BIGINT NOT NULL,
    max_event_id BIGINT NOT NULL,
    CONSTRAINT event_link_runs_pkey PRIMARY KEY (workflow_id, wseq)
);
-- The links written since 0016 become runs of one event each: the same
-- positions and hashes, so those chains verify as they did.
INSERT INTO event_link_runs (workflow_id, wseq, prev_hash, event_ids, hashes, min_event_id, max_event_id)
    SELECT workflow_id, wseq, prev_hash, ARRAY[event_id], ARRAY[hash], event_id, event_id FROM event_links;
DROP TABLE event_links;
ALTER TABLE event_link_runs RENAME TO event_links;
ALTER INDEX event_link_runs_pkey RENAME TO event_links_pkey;
CREATE INDEX event_links_by_event ON event_links (workflow_id, min_event_id);
