-- 0030: event packs and link runs are compressed with lz4, not pglz
-- (issue 23).
--
-- A pack's arrays are stored MAIN (0029): compressed in line when the row
-- passes the TOAST threshold (about 2 KB: a pack of some five events or
-- more). PostgreSQL compresses with pglz unless told otherwise, and the
-- writers' statement paid for it: bench --tasks 20000 --workers 32,
-- pg_stat_statements, two alternated pairs on a quiet machine: the
-- statement that writes a batch's packs took 28.4 and 26.6 us of server
-- time per task with pglz, 22.5 and 21.3 with lz4 (ALTER DATABASE ... SET
-- default_toast_compression for the test). lz4 decompresses faster too
-- (a task's history, verification). A run's event ids (consecutive
-- numbers, the part of a run that compresses) get the same.
--
-- Only values written from now on are compressed with lz4; those stored
-- stay as they are, and PostgreSQL reads either. A server built without
-- lz4 refuses the method (feature_not_supported): the columns then keep
-- pglz, and the migration still applies (TestPacksCompressWithLZ4).
DO $$
BEGIN
    ALTER TABLE event_packs
        ALTER COLUMN event_ids SET COMPRESSION lz4,
        ALTER COLUMN task_seqs SET COMPRESSION lz4,
        ALTER COLUMN task_ids SET COMPRESSION lz4,
        ALTER COLUMN kinds SET COMPRESSION lz4,
        ALTER COLUMN owners SET COMPRESSION lz4,
        ALTER COLUMN generations SET COMPRESSION lz4,
        ALTER COLUMN ats SET COMPRESSION lz4,
        ALTER COLUMN details SET COMPRESSION lz4,
        ALTER COLUMN hash_versions SET COMPRESSION lz4,
        ALTER COLUMN actor_kinds SET COMPRESSION lz4,
        ALTER COLUMN actor_names SET COMPRESSION lz4,
        ALTER COLUMN actor_principals SET COMPRESSION lz4,
        ALTER COLUMN task_states SET COMPRESSION lz4,
        ALTER COLUMN contents SET COMPRESSION lz4;
    ALTER TABLE event_links ALTER COLUMN event_ids SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'this server has no lz4: event packs stay compressed with pglz';
END
$$;
