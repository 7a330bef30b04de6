-- 0016 (PostgreSQL): each event's body written once (issue 23).
--
-- Until now a writer inserted the event into event_journal and the linker
-- copied the body into events with its position and hashes, then deleted
-- the journal entry: every event's body was written twice (with an index
-- entry more each time), three quarters of the WAL of a claim+complete
-- cycle. Now the writer inserts the body into events, where it stays, with
-- no position (wseq NULL) and no hashes (''), and a pointer to it into the
-- journal; the linker writes the link (position and hashes) into
-- event_links, a narrow row, and deletes the pointer. Readers join the
-- two. Events linked before this migration keep their link in their own
-- row and are read as before: nothing old is rewritten, so an old database
-- verifies as it did. See package tgpostgres, "Events".
ALTER TABLE events ALTER COLUMN wseq DROP NOT NULL;
-- The chain's order over the links kept in events (those of before this
-- migration, and those AppendEvents writes): a body waiting for its link,
-- or linked in event_links, costs this index nothing.
ALTER TABLE events DROP CONSTRAINT IF EXISTS events_workflow_id_wseq_key;
CREATE UNIQUE INDEX events_inline_chain ON events (workflow_id, wseq) WHERE wseq IS NOT NULL;

-- The link of an event written since: its position in its workflow's
-- chain (one event per position) and its hashes (one link per event).
CREATE TABLE event_links (
    event_id    BIGINT NOT NULL,
    wseq        BIGINT NOT NULL,
    workflow_id TEXT NOT NULL,
    prev_hash   TEXT NOT NULL,
    hash        TEXT NOT NULL,
    PRIMARY KEY (workflow_id, wseq)
);
CREATE UNIQUE INDEX event_links_by_event ON event_links (event_id);

-- A journal entry is now a pointer: journal_id is its event's event_id,
-- and the body's columns are NULL (SQLite's journal, kept for the drivers'
-- common contract and always empty there, still holds bodies). The index
-- by workflow serves every access to the journal, so the primary key's
-- index, an entry more per event, goes (journal_id is unique as event_id
-- is).
ALTER TABLE event_journal DROP CONSTRAINT IF EXISTS event_journal_pkey;
ALTER TABLE event_journal
    ALTER COLUMN task_id DROP NOT NULL,
    ALTER COLUMN kind DROP NOT NULL,
    ALTER COLUMN owner DROP NOT NULL, ALTER COLUMN owner DROP DEFAULT,
    ALTER COLUMN generation DROP NOT NULL,
    ALTER COLUMN at_ms DROP NOT NULL,
    ALTER COLUMN detail DROP NOT NULL,
    ALTER COLUMN hash_version DROP NOT NULL,
    ALTER COLUMN actor_kind DROP NOT NULL, ALTER COLUMN actor_kind DROP DEFAULT,
    ALTER COLUMN actor_name DROP NOT NULL, ALTER COLUMN actor_name DROP DEFAULT,
    ALTER COLUMN actor_principal DROP NOT NULL, ALTER COLUMN actor_principal DROP DEFAULT,
    ALTER COLUMN task_state DROP NOT NULL, ALTER COLUMN task_state DROP DEFAULT,
    ALTER COLUMN content DROP NOT NULL, ALTER COLUMN content DROP DEFAULT;

-- Entries journaled before this migration and not yet linked (a server
-- stopped before its linker ran) become bodies in events, in journal
-- order (identity values are handed out in the order rows are inserted),
-- and pointers to them; the next linker links them.
WITH old AS (DELETE FROM event_journal WHERE task_id IS NOT NULL RETURNING *),
moved AS (
    INSERT INTO events (workflow_id, wseq, task_id, kind, owner, generation, at_ms, detail, prev_hash, hash,
        hash_version, actor_kind, actor_name, actor_principal, task_state, content)
    SELECT workflow_id, NULL, task_id, kind, owner, generation, at_ms, detail, '', '',
        hash_version, actor_kind, actor_name, actor_principal, task_state, content
    FROM old ORDER BY journal_id
    RETURNING event_id, workflow_id)
INSERT INTO event_journal (journal_id, workflow_id) SELECT event_id, workflow_id FROM moved;
