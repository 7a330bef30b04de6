-- 0027: the rules on the tasks' values are domains, not CHECK constraints
-- (issue 23).
--
-- PostgreSQL checks every CHECK constraint of a table on every row an
-- UPDATE writes, whatever columns it sets, and it reads each constraint
-- back from its stored text and plans it again for every statement that
-- writes the table (ExecRelCheck: stringToNode and expression_planner, once
-- per statement). With the 14 rules of tasks that cost some 80 µs of
-- server CPU per UPDATE statement, a third of a one-row claim's update:
-- pgbench of one prepared one-row UPDATE of tasks as a claim writes it,
-- 0.23-0.27 ms with the rules as CHECKs and 0.16-0.19 ms without them.
-- A domain's rule is planned once per session (the type cache) and checked
-- only where a value is assigned to a column of the domain, so an update
-- that sets the state checks the state alone, and one that sets no ruled
-- column checks nothing. The rules are the same: every value written to
-- these columns, by an INSERT or an UPDATE, still meets them (a NULL
-- passes a domain's CHECK as it passed the CHECK constraints they
-- replace; NOT NULL stays on the columns), and a violation is still
-- SQLSTATE 23514 (TestTaskRulesHold). Clients see the base types: a
-- domain column is described by its base type on the wire.
--
-- The ALTER rewrites tasks once, under its ACCESS EXCLUSIVE lock, as any
-- type change with a rule does (PostgreSQL validates the rows); the
-- migration runs in the runner's one transaction, under its advisory lock.
-- The triggers whose WHEN or column list names state or due_at_ms block a
-- change of those columns' types, so they are dropped and created again,
-- as 0012 and 0018 define them.
CREATE DOMAIN tg_task_state AS TEXT CHECK (VALUE IN ('blocked', 'pending', 'claimed', 'completed', 'failed', 'cancelled'));
CREATE DOMAIN tg_task_kind AS TEXT CHECK (VALUE IN ('task', 'gate'));
CREATE DOMAIN tg_gate_on_timeout AS TEXT CHECK (VALUE IN ('', 'approve', 'reject'));
CREATE DOMAIN tg_created_by AS TEXT CHECK (length(VALUE) BETWEEN 1 AND 128);
CREATE DOMAIN tg_nonnegative AS BIGINT CHECK (VALUE >= 0);
CREATE DOMAIN tg_lease_ms AS BIGINT CHECK (VALUE > 0);
CREATE DOMAIN tg_max_attempts AS BIGINT CHECK (VALUE BETWEEN 1 AND 100);
CREATE DOMAIN tg_retry_delay_ms AS BIGINT CHECK (VALUE BETWEEN 0 AND 900000);
CREATE DOMAIN tg_priority AS INTEGER CHECK (VALUE BETWEEN -100 AND 100);

DROP TRIGGER tasks_key_release ON tasks;
DROP TRIGGER tasks_key_park_insert ON tasks;
DROP TRIGGER tasks_key_park_ready ON tasks;
DROP TRIGGER tasks_key_unpark ON tasks;
DROP TRIGGER tasks_key_leave ON tasks;

ALTER TABLE tasks
    DROP CONSTRAINT tasks_state_check,
    DROP CONSTRAINT tasks_generation_check,
    DROP CONSTRAINT tasks_lease_ms_check,
    DROP CONSTRAINT tasks_attempts_check,
    DROP CONSTRAINT tasks_max_attempts_check,
    DROP CONSTRAINT tasks_unmet_check,
    DROP CONSTRAINT tasks_priority_check,
    DROP CONSTRAINT tasks_created_by_check,
    DROP CONSTRAINT tasks_due_at_ms_check,
    DROP CONSTRAINT tasks_retry_delay_ms_check,
    DROP CONSTRAINT tasks_dependents_check,
    DROP CONSTRAINT tasks_kind_check,
    DROP CONSTRAINT tasks_gate_timeout_ms_check,
    DROP CONSTRAINT tasks_gate_on_timeout_check,
    ALTER COLUMN state TYPE tg_task_state,
    ALTER COLUMN generation TYPE tg_nonnegative,
    ALTER COLUMN lease_ms TYPE tg_lease_ms,
    ALTER COLUMN attempts TYPE tg_nonnegative,
    ALTER COLUMN max_attempts TYPE tg_max_attempts,
    ALTER COLUMN unmet TYPE tg_nonnegative,
    ALTER COLUMN priority TYPE tg_priority,
    ALTER COLUMN created_by TYPE tg_created_by,
    ALTER COLUMN due_at_ms TYPE tg_nonnegative,
    ALTER COLUMN retry_delay_ms TYPE tg_retry_delay_ms,
    ALTER COLUMN dependents TYPE tg_nonnegative,
    ALTER COLUMN kind TYPE tg_task_kind,
    ALTER COLUMN gate_timeout_ms TYPE tg_nonnegative,
    ALTER COLUMN gate_on_timeout TYPE tg_gate_on_timeout;

CREATE TRIGGER tasks_key_release AFTER UPDATE OF state ON tasks FOR EACH ROW
    WHEN (OLD.state = 'claimed' AND NEW.state <> 'claimed' AND OLD.concurrency_key <> '')
    EXECUTE FUNCTION tasks_key_release();
CREATE TRIGGER tasks_key_park_insert BEFORE INSERT ON tasks FOR EACH ROW
    WHEN (NEW.state = 'pending' AND NEW.due_at_ms = 0 AND NEW.concurrency_key <> '')
    EXECUTE FUNCTION tasks_key_park_entry();
CREATE TRIGGER tasks_key_park_ready BEFORE UPDATE OF state, due_at_ms ON tasks FOR EACH ROW
    WHEN (NEW.state = 'pending' AND NEW.due_at_ms = 0 AND NEW.concurrency_key <> '' AND NOT (OLD.state = 'pending' AND OLD.due_at_ms = 0))
    EXECUTE FUNCTION tasks_key_park_entry();
CREATE TRIGGER tasks_key_unpark BEFORE UPDATE OF state, due_at_ms ON tasks FOR EACH ROW
    WHEN (OLD.key_parked AND (NEW.state <> 'pending' OR NEW.due_at_ms <> 0))
    EXECUTE FUNCTION tasks_key_unpark();
CREATE TRIGGER tasks_key_leave AFTER UPDATE OF state, due_at_ms ON tasks FOR EACH ROW
    WHEN (OLD.state = 'pending' AND OLD.due_at_ms = 0 AND OLD.concurrency_key <> '' AND NOT OLD.key_parked
        AND (NEW.state <> 'pending' OR NEW.due_at_ms <> 0))
    EXECUTE FUNCTION tasks_key_leave();
