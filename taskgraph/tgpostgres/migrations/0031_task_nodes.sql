-- 0031: a task's place in its workflow (workflow_id, node_id) is kept in
-- a table of its own, task_nodes, rather than by a unique index on tasks
-- (issue 23).
--
-- A claim and a completion change a task's state, which indexes name, so
-- PostgreSQL cannot update the row in place (HOT): every new version of a
-- task enters every index of tasks whose predicate it meets. With
-- UNIQUE (workflow_id, node_id) on tasks that was one index entry more per
-- claim and per completion, for a pair of columns that never changes after
-- the task is created. task_nodes holds the pair once, written when the
-- task is inserted and never updated, so the claim's and the completion's
-- versions no longer enter it. bench, the unique index dropped (a build
-- that did only that, five-node lookups unmeasured), alternated with the
-- store as it was, N=10000, four pairs each, load 0.5-1.3: W=8 median
-- 1.10 (1.07-1.14), W=32 1.04 and 1.10 in two runs of four pairs.
--
-- task_nodes keeps what the unique index kept:
--   - No two tasks of a workflow share a node id: its primary key. A
--     second creation of a node waits for the first, as it waited on the
--     index, and fails with the same unique violation (23505), which the
--     driver runs again (the rerun finds the node).
--   - Lookups by workflow (a workflow's tasks, its nodes by id, its
--     unfinished tasks) read task_nodes' primary key, then tasks by seq
--     (tasks_pkey): tasks has no index that leads with workflow_id but
--     the ready ones, which hold only ready tasks.
--   - Every task belongs to an existing workflow: task_nodes' reference to
--     workflows replaces tasks' own, which cost PostgreSQL a scan of tasks
--     on every deletion of a workflow once no index of tasks led with
--     workflow_id.
--
-- Rows come and go with their tasks:
--   - tasks_nodes_insert (AFTER INSERT, once per statement, from the
--     statement's new rows) inserts a task's row, in the statement that
--     inserts the task: every insert of tasks, the driver's and a test's
--     alike, gets its rows.
--   - Deleting a task deletes its row (task_nodes.seq references tasks).
--   - Deleting a workflow deletes its tasks first (workflows_delete_tasks,
--     BEFORE DELETE of each workflow row, through task_nodes' primary
--     key), as the reference of tasks to workflows deleted them before;
--     their edges and rows of task_nodes go with them.
-- workflow_id and node_id of a task never change (no statement of the
-- driver sets them), so the rows never need updating.
CREATE TABLE task_nodes (
    workflow_id TEXT NOT NULL REFERENCES workflows (workflow_id),
    node_id     TEXT NOT NULL,
    seq         BIGINT NOT NULL UNIQUE REFERENCES tasks (seq) ON DELETE CASCADE,
    PRIMARY KEY (workflow_id, node_id)
);

INSERT INTO task_nodes (workflow_id, node_id, seq) SELECT workflow_id, node_id, seq FROM tasks;

ALTER TABLE tasks
    DROP CONSTRAINT tasks_workflow_id_node_id_key,
    DROP CONSTRAINT tasks_workflow_id_fkey;

CREATE FUNCTION tasks_nodes_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO task_nodes (workflow_id, node_id, seq) SELECT workflow_id, node_id, seq FROM inserted;
    RETURN NULL;
END
$$;

CREATE TRIGGER tasks_nodes_insert AFTER INSERT ON tasks
    REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION tasks_nodes_insert();

CREATE FUNCTION workflows_delete_tasks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM tasks WHERE seq IN (SELECT n.seq FROM task_nodes n WHERE n.workflow_id = OLD.workflow_id);
    RETURN OLD;
END
$$;

CREATE TRIGGER workflows_delete_tasks BEFORE DELETE ON workflows
    FOR EACH ROW EXECUTE FUNCTION workflows_delete_tasks();

ANALYZE task_nodes;
