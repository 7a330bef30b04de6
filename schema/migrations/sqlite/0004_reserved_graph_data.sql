-- 0004: a placeholder on the principals branch that keeps the numbering without
-- gaps; the branch of issue 16 owns this number. Delete this file at merge.
SELECT 1;
