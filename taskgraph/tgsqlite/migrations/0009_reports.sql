-- 0009: a placeholder on the flow branch for the progress branch's
-- 0009_reports.sql (progress fields), which is merged first: the series
-- must have no gap. On merge, take the progress branch's file.
SELECT 1;
