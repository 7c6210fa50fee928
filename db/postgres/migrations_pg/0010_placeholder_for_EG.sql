-- Placeholder for branch EG's migration 0010 (error group states), so
-- that this branch's 0011 runs while EG has not landed. Drop this file
-- when merging EG.
SELECT 1;
