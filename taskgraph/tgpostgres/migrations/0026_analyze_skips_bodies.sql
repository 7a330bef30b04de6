-- 0026: ANALYZE skips the columns that no statement filters, joins or
-- orders by (issue 23).
--
-- Autovacuum analyzes tasks and events again and again under load (every
-- 10% of their rows changed or inserted), each time sampling up to 30,000
-- rows and sorting every column's values for its statistics. Events are
-- mostly bodies (detail, content, task_state, hashes) and tasks carry a
-- payload, a result, an error and a status message: text the planner
-- never uses, since every statement reaches those rows through an index
-- on their keys. perf of a 30,000-task bench put vacuum and analyze at a
-- fifth of the server's samples; ANALYZE events fell from 243 ms to 40 ms
-- and ANALYZE tasks from 200 ms to 120 ms with these columns skipped. The
-- columns statements do filter, join or order by (ids, workflow, state,
-- due time, key, priority, lease expiry, generation...) keep their
-- statistics (TestAnalyzeSkipsOnlyBodies).
ALTER TABLE events
    ALTER COLUMN detail SET STATISTICS 0,
    ALTER COLUMN content SET STATISTICS 0,
    ALTER COLUMN task_state SET STATISTICS 0,
    ALTER COLUMN prev_hash SET STATISTICS 0,
    ALTER COLUMN hash SET STATISTICS 0,
    ALTER COLUMN hash_version SET STATISTICS 0,
    ALTER COLUMN actor_kind SET STATISTICS 0,
    ALTER COLUMN actor_name SET STATISTICS 0,
    ALTER COLUMN actor_principal SET STATISTICS 0,
    ALTER COLUMN owner SET STATISTICS 0,
    ALTER COLUMN kind SET STATISTICS 0,
    ALTER COLUMN at_ms SET STATISTICS 0;
ALTER TABLE tasks
    ALTER COLUMN payload SET STATISTICS 0,
    ALTER COLUMN result SET STATISTICS 0,
    ALTER COLUMN error SET STATISTICS 0,
    ALTER COLUMN report SET STATISTICS 0,
    ALTER COLUMN status_message SET STATISTICS 0,
    ALTER COLUMN token_hash SET STATISTICS 0,
    ALTER COLUMN created_by SET STATISTICS 0,
    ALTER COLUMN depends_on SET STATISTICS 0,
    ALTER COLUMN usage_input_tokens SET STATISTICS 0,
    ALTER COLUMN usage_output_tokens SET STATISTICS 0,
    ALTER COLUMN usage_cost_usd SET STATISTICS 0,
    ALTER COLUMN prior_input_tokens SET STATISTICS 0,
    ALTER COLUMN prior_output_tokens SET STATISTICS 0,
    ALTER COLUMN prior_cost_usd SET STATISTICS 0;
