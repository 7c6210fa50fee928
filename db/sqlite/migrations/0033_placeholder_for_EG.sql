-- Placeholder for branch EG's migration 0033 (error group states), so
-- that this branch's 0034 runs while EG has not landed: the migrations
-- must be numbered 1, 2, 3, ... Drop this file when merging EG (its
-- 0033 and this one would both be numbered 0033, and the check refuses
-- that).
SELECT 1;
