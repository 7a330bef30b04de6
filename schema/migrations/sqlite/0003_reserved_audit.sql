-- 0003: a placeholder on the graph-data branch that keeps the numbering without
-- gaps; the branch of issue 14 (audit) owns this number. Delete this file at merge.
SELECT 1;
