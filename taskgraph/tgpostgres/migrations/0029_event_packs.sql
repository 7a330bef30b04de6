-- 0029 (PostgreSQL): journaled event bodies are written in packs (issue 23).
--
-- Until now a writer inserted one events row per event: a heap tuple and
-- entries in events_pkey and events_by_task_seq for each, some 40-46 us of
-- the hot path's events statement per claim+complete cycle at W=32. Now
-- the writer's one statement inserts, for each run of at most 16 events of
-- one workflow, one event_packs row holding their bodies as arrays (element
-- k of every array is the pack's k-th event), and one journal row naming
-- the pack (its journal_id is the pack's pack_id, its first event's id).
-- A pack is written once and stays: the linker links its events by id into
-- event_links, as it linked events rows.
--
-- * event_ids take events' own sequence, ascending within a pack: an event
--   id names one body, in events or in a pack, never both.
-- * The arrays are stored MAIN (compressed in line when large, kept in the
--   row): a pack read decompresses nothing out of line.
-- * task_seqs is each event's task's seq (events.task_seq's meaning), indexed
--   by GIN without a pending list: a task's history is found through the
--   index alone (with the pending list, a search reads the whole list).
-- * (workflow_id, pack_id) finds a workflow's packs.
--
-- Bodies written before this migration stay in events; every reader reads
-- both (see package tgpostgres, "Events").
CREATE TABLE event_packs (
    pack_id          BIGINT PRIMARY KEY,
    workflow_id      TEXT NOT NULL,
    event_ids        BIGINT[] NOT NULL,
    task_seqs        BIGINT[] NOT NULL,
    task_ids         TEXT[] NOT NULL,
    kinds            TEXT[] NOT NULL,
    owners           TEXT[] NOT NULL,
    generations      BIGINT[] NOT NULL,
    ats              BIGINT[] NOT NULL,
    details          TEXT[] NOT NULL,
    hash_versions    BIGINT[] NOT NULL,
    actor_kinds      TEXT[] NOT NULL,
    actor_names      TEXT[] NOT NULL,
    actor_principals TEXT[] NOT NULL,
    task_states      TEXT[] NOT NULL,
    contents         TEXT[] NOT NULL
);
ALTER TABLE event_packs
    ALTER COLUMN event_ids SET STORAGE MAIN,
    ALTER COLUMN task_seqs SET STORAGE MAIN,
    ALTER COLUMN task_ids SET STORAGE MAIN,
    ALTER COLUMN kinds SET STORAGE MAIN,
    ALTER COLUMN owners SET STORAGE MAIN,
    ALTER COLUMN generations SET STORAGE MAIN,
    ALTER COLUMN ats SET STORAGE MAIN,
    ALTER COLUMN details SET STORAGE MAIN,
    ALTER COLUMN hash_versions SET STORAGE MAIN,
    ALTER COLUMN actor_kinds SET STORAGE MAIN,
    ALTER COLUMN actor_names SET STORAGE MAIN,
    ALTER COLUMN actor_principals SET STORAGE MAIN,
    ALTER COLUMN task_states SET STORAGE MAIN,
    ALTER COLUMN contents SET STORAGE MAIN;
-- ANALYZE keeps statistics of what statements reach packs by (pack_id,
-- workflow_id, and task_seqs, whose element statistics estimate the GIN
-- searches) and skips the bodies, as 0026 does for events: an array
-- column's statistics sort and count its elements.
ALTER TABLE event_packs
    ALTER COLUMN event_ids SET STATISTICS 0,
    ALTER COLUMN task_ids SET STATISTICS 0,
    ALTER COLUMN kinds SET STATISTICS 0,
    ALTER COLUMN owners SET STATISTICS 0,
    ALTER COLUMN generations SET STATISTICS 0,
    ALTER COLUMN ats SET STATISTICS 0,
    ALTER COLUMN details SET STATISTICS 0,
    ALTER COLUMN hash_versions SET STATISTICS 0,
    ALTER COLUMN actor_kinds SET STATISTICS 0,
    ALTER COLUMN actor_names SET STATISTICS 0,
    ALTER COLUMN actor_principals SET STATISTICS 0,
    ALTER COLUMN task_states SET STATISTICS 0,
    ALTER COLUMN contents SET STATISTICS 0;
CREATE INDEX event_packs_by_task_seq ON event_packs USING gin (task_seqs) WITH (fastupdate = off);
CREATE INDEX event_packs_by_workflow ON event_packs (workflow_id, pack_id);
