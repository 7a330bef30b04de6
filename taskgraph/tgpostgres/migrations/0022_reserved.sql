-- 0022: reserved for another change of this session (migration numbers
-- are handed out by the coordinator); a no-op here so that 0023 follows
-- without a gap. Dropped at merge in favour of the real 0022.
SELECT 1;
