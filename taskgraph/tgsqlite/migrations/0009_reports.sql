-- 0009: progress, status message and usage reported by workers (issue 26).
--
-- report is the current (or last) attempt's report as canonical JSON
-- ({"generation":..,"progress":{"done":..,"total":..},"status_message":..,
-- "usage":{..}}, each member optional but generation), NULL when the
-- attempt reported nothing. A heartbeat, completion or failure that
-- carries a report replaces it whole; a new claim clears it. The usage_*
-- columns are that report's usage (0 without one), and the prior_*
-- columns the usage of the task's earlier attempts, folded in by the
-- claim that ends them, so that a workflow's usage is one SUM. The history
-- records every report in its event's detail; verify does not compare
-- these columns (they are not part of an event's task state).
ALTER TABLE tasks ADD COLUMN report TEXT;
ALTER TABLE tasks ADD COLUMN usage_input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN usage_output_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN usage_cost_usd REAL NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN prior_input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN prior_output_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN prior_cost_usd REAL NOT NULL DEFAULT 0;
