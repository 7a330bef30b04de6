-- 0022: a hot batch's last round fails on the server when one of its
-- guarded updates changed fewer rows than it was given (tgpostgres doc,
-- "Batches": the COMMIT travels in that round, so the check cannot wait
-- for the client to count the rows). apply_guard(got, want) is true when
-- got = want and raises SQLSTATE TG001 otherwise; the driver maps TG001
-- to tgdriver.ErrGuardFailed, and the error aborts the transaction before
-- the COMMIT queued after it runs.
CREATE FUNCTION apply_guard(got bigint, want bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF got IS DISTINCT FROM want THEN
        RAISE EXCEPTION 'a guarded update of the batch''s last round changed % of its % rows', got, want
            USING ERRCODE = 'TG001';
    END IF;
    RETURN true;
END
$$;
